// Fusion plan from the IR: per layer, the producer-consumer chains that one kernel can run instead of
// several, with what each fusion saves: kernel launches per layer forward pass and HBM bytes of
// intermediates per token (an intermediate that is never written is also never read back).
//
// Units: launches are kernel launches per layer per forward pass of one micro-batch (independent of
// its token count); bytes are HBM bytes per token of the forward pass; element widths come from
// FusionOptions (activations 2 B for bf16, router logits and indexer scores 4 B, fp32).
// Each FusionTerm names its formula (elements x bytes x passes) so a reader can recompute it.
//
// Entry point for the cost model: PlanFusions(model, options) -> FusionPlan, then per layer
// LayerFusion::SavedLaunches() / SavedBytesPerToken() (or FusionPlan totals) to cost the elementwise
// and launch terms after fusion: unfused cost = fused cost + saved.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/model_ir.h"
#include "core/precision.h"

namespace onboard {

struct FusionOptions {
  double act_bytes = 2.0;    // bytes per activation element (bf16)
  double fp32_bytes = 4.0;   // router logits, probabilities and indexer scores
  double index_bytes = 4.0;  // int32 expert / key indices
  int64_t seq = 4096;        // tokens per sequence (DSA indexer scores scale with the causal length)
  Precision gemm_input = Precision::kBF16;  // GEMM input precision: a quantised one (fp8, mxfp8, nvfp4;
                                            // QuantisedGemmInputs) puts a quantise step after each norm
                                            // (kNormQuantize) instead of the GEMM prologue
  int64_t bf16_layers_first = 0;  // the plan's bf16 first / last layers (Plan::bf16_layers_first): their
  int64_t bf16_layers_last = 0;   // GEMM inputs are bf16 whatever gemm_input says
};

enum class FusionKind {
  kNormLinearPrologue,   // RMSNorm/LayerNorm computed while loading the next linear's input
  kNormQuantize,         // quantised GEMM inputs: fp8 / mxfp8, the norm kernel writes the quantised
                         // input (+ scales) itself (TE LayerNormLinear); nvfp4, the norm kernel takes
                         // the quantiser's amax pass (the cast still reads the 16-bit normed copy)
  kGatedActivation,      // SwiGLU/GeGLU/SiTU gate*up in the gate/up GEMM epilogue
  kActivationEpilogue,   // GELU/ReLU^2 in the up GEMM epilogue (ungated MLPs)
  kRouterTopkPermute,    // router logits -> activation -> top-k -> permute indices in one kernel
  kResidualAdd,          // residual add in the epilogue of the GEMM that produces the branch output
  kRotaryAttention,      // rotary embedding applied while the attention kernel loads q/k
  kKdaPrologue,          // KDA gate activation, q/k L2 norm, beta sigmoid inside the KDA kernel (one
                         // term each: the kernel switches them separately, codegen/kernel_spec.h)
  kDsaIndexerTopk,       // DSA indexer scores + top-k per query block, no score matrix in HBM
  kMoeUnpermuteCombine,  // MoE unpermute + weighted combine in one gather
  kSoftmaxAttention,     // QK^T -> scale/mask -> softmax -> PV in one kernel (only from graphs that
                         // materialise the scores: search/fusion_plan_graph.h; the IR plan assumes flash)
};
const char* FusionKindName(FusionKind k);  // "norm+linear prologue", ...

struct FusionTerm {
  FusionKind kind = FusionKind::kNormLinearPrologue;
  std::string chain;             // "rmsnorm -> q/k/v projection"
  double launches_saved = 0;     // per layer forward pass
  double bytes_saved = 0;        // HBM bytes per token
  std::string formula;           // "2 x 7168 x 2 B (write + read of the normed input)"
  std::string blocked_by;        // set on LayerFusion::blocked terms: why the graph keeps it unfused
  bool feeds_channel = false;    // kNormLinearPrologue / kNormQuantize: the norm before the MLP/MoE
                                 // (else before the mixer)
  bool channel_side = false;     // the term is in the channel block (its norm .. its residual add)
  bool beta_sigmoid = false;     // kKdaPrologue: the beta sigmoid part (the one a graph's sigmoid->kernel
                                 // match confirms or blocks); the gate and q/k norm parts are separate terms
};

struct LayerFusion {
  int64_t layer = 0;             // 0-based layer index
  std::vector<FusionTerm> terms;
  std::vector<FusionTerm> blocked;  // chains the exported graph shows cannot fuse (not in the totals)
  double SavedLaunches() const;
  double SavedBytesPerToken() const;
};

struct FusionPlan {
  FusionOptions options;
  std::vector<LayerFusion> layers;  // one per model layer, in order
  double SavedLaunches() const;        // all layers, per forward pass
  double SavedBytesPerToken() const;   // all layers
};

// A whole number as the formulas print it ("7168"): the one formatter of every fusion formula.
std::string FusionNum(double v);

// The fusible chains of every layer of the model.
FusionPlan PlanFusions(const ModelIR& model, const FusionOptions& options = {});
// The fusible chains of one layer of `model`.
LayerFusion PlanLayerFusions(const ModelIR& model, const LayerSpec& layer, const FusionOptions& options = {});

// Runs of consecutive layers with identical terms: [first, last] layer indices (0-based) into plan.layers.
struct FusionLayerRun {
  size_t first = 0, last = 0;
};
std::vector<FusionLayerRun> FoldFusionLayers(const FusionPlan& plan);

// Text: runs of layers with identical terms folded ("layers 2-5 (each)"), one term per line with
// units, totals.
std::string FormatFusionPlan(const FusionPlan& plan);

}  // namespace onboard
