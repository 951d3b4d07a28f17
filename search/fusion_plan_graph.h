// The fusion plan checked against an exported graph: the IR plan (search/fusion_plan.h) says which
// chains a layer of this kind has; the ONNX graph (parsers/onnx_fusion_patterns.h) says whether each
// chain's intermediates really have no other reader. Rules, per layer:
//   norm+linear      a blocked norm match blocks the layer's kNormLinearPrologue term of what the
//                    norm feeds in the graph (GraphFusionMatch::feeds: mixer -> the attention-input
//                    term, channel -> the MLP/MoE-input term), whatever the graph order; a match
//                    whose target the graph does not show (unknown) blocks nothing
//   silu*mul         any blocked match blocks the layer's kGatedActivation terms
//   sigmoid->kernel  any blocked match blocks the layer's beta-sigmoid kKdaPrologue term (the gate
//                    and q/k norm terms stay: the kernel switches each part on its own)
//   softmax(QK^T)V   a fusable match adds a kSoftmaxAttention term (the graph materialises the
//                    scores, which the IR plan does not assume): the scaled / masked scores and the
//                    probabilities, H x seq elements per token each (full s x s: exporters mask, they
//                    do not skip), written and read: 2 x n x H x seq x act_bytes per token for the n
//                    intermediates of the chain; launches saved = chain ops - 1
// Terms whose chain the graph does not show stay as the IR plan has them. Blocked terms move to
// LayerFusion::blocked with the graph's reason and leave the totals.
#pragma once

#include <string>
#include <vector>

#include "core/model_ir.h"
#include "parsers/onnx_fusion_patterns.h"
#include "search/fusion_plan.h"

namespace onboard {

FusionPlan ConfirmFusionsInGraph(FusionPlan plan, const ModelIR& model,
                                 const std::vector<GraphFusionMatch>& matches);

// The plan of `model` loaded from `path`: PlanFusions, then ConfirmFusionsInGraph when `path` is an
// .onnx file. `*from_graph` (optional) says whether the graph was read. Graph read errors as
// FindOnnxFusionsInFile's.
[[nodiscard]] Expected<FusionPlan> PlanFusionsForModelFile(const ModelIR& model, const std::string& path,
                                                           const FusionOptions& options,
                                                           bool* from_graph = nullptr);

}  // namespace onboard
