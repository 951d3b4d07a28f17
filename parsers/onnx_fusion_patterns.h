// Fusable producer-consumer patterns found in an exported ONNX graph (torch.onnx / optimum output),
// per layer, for the fusion plan (search/fusion_plan.h ConfirmFusionsInGraph).
//
// A chain fuses only when every intermediate it keeps on chip has no reader outside the chain: an
// intermediate that is a graph output, or that another node also reads, must be written to memory
// anyway, so the match is reported with fusable = false and the blocker named. Shape/Size readers
// do not block (they read metadata, not data).
//
// Patterns (node ops as exporters write them):
//   norm+linear      LayerNormalization-family op, or a decomposed norm (ReduceMean [-> Sub -> Pow ->
//                    ReduceMean] -> Add -> Sqrt -> Div/Reciprocal [-> Mul weight] [-> Add bias]), whose
//                    output feeds only linears
//                    (MatMul/Gemm with a weight initializer). Blocked when the normed output is also
//                    the residual stream (post-LN encoders) or another op's input. What the norm feeds
//                    is read from the structure, not from graph order: the mixer when two values the
//                    linears produce meet again at a MatMul of two activations (Q.K^T, P.V) or at a
//                    custom-domain kernel op (KDA); else the channel when the walk reaches an
//                    activation or a router (Sigmoid, Silu, Gelu, Erf, Relu, Tanh, Softmax, TopK); else
//                    unknown. The walk goes downstream from the linears, stops at the next linear (the
//                    branch's end) and visits at most kMaxFeedsWalk nodes.
//   silu*mul         Sigmoid(x) -> Mul(x, .) (SiLU) -> Mul(., up) [or Silu/Swish op -> Mul]: the gate
//                    GEMM output x, the sigmoid, the SiLU and the up GEMM output are each read only by
//                    the next op of the chain.
//   softmax(QK^T)V   MatMul of two activations -> (Div/Mul scale, Add/Where mask, Cast)* -> Softmax
//                    -> MatMul with V: each score tensor is read only by the next op.
//   sigmoid->kernel  Sigmoid whose output (through Cast/Reshape/Unsqueeze) feeds a custom-domain op
//                    (a KDA / gated-DeltaNet kernel exported as a custom op): the beta sigmoid can run
//                    inside the kernel.
// Units: none (node and value names). Layer = 0-based position in the graph's layer list (the same
// numbering as the ModelIR the reader builds); -1 for nodes outside layers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace onboard {

enum class GraphPattern { kNormLinear, kSiluMul, kSoftmaxAttention, kSigmoidIntoKernel };
enum class NormFeeds { kUnknown, kMixer, kChannel };  // norm+linear: what the normed input feeds
const char* GraphPatternName(GraphPattern p);  // "norm+linear", ...

struct GraphFusionMatch {
  int64_t layer = -1;
  GraphPattern pattern = GraphPattern::kNormLinear;
  std::vector<std::string> nodes;  // node names along the chain, producer first
  int64_t intermediates = 0;       // values the fused chain keeps on chip
  bool fusable = true;
  std::string blocker;  // when !fusable: "value V is also read by node N (Op)"
  NormFeeds feeds = NormFeeds::kUnknown;  // kNormLinear only
};

// All matches of the file, in graph order. Errors as AnalyzeOnnxFile's (kBadInput naming the file).
[[nodiscard]] Expected<std::vector<GraphFusionMatch>> FindOnnxFusionsInFile(const std::string& path);
[[nodiscard]] Expected<std::vector<GraphFusionMatch>> FindOnnxFusionsInBytes(const std::string& bytes,
                                                                             const std::string& origin);

}  // namespace onboard
