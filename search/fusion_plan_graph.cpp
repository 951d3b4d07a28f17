// ConfirmFusionsInGraph (rules and units in search/fusion_plan_graph.h).
#include "search/fusion_plan_graph.h"

#include <map>

namespace onboard {
namespace {

// Moves term i of l.terms to l.blocked with `why`.
void Block(LayerFusion* l, size_t i, const std::string& why) {
  FusionTerm t = l->terms[i];
  t.blocked_by = why;
  l->blocked.push_back(t);
  l->terms.erase(l->terms.begin() + static_cast<std::ptrdiff_t>(i));
}

// Blocks every term of `kind` in the layer (only its beta-sigmoid part when `beta_only`) when any
// match of `pattern` there is blocked.
void BlockKind(LayerFusion* l, FusionKind kind, const std::vector<const GraphFusionMatch*>& ms,
               bool beta_only = false) {
  for (const GraphFusionMatch* m : ms) {
    if (m->fusable) continue;
    for (size_t i = l->terms.size(); i-- > 0;)
      if (l->terms[i].kind == kind && (!beta_only || l->terms[i].beta_sigmoid)) Block(l, i, m->blocker);
    return;
  }
}

// Step 2 of the norm rule: each norm match blocks the norm term of what it feeds (mixer or channel,
// from the graph's structure); a match whose target is unknown confirms or blocks nothing.
void BlockNorms(LayerFusion* l, const std::vector<const GraphFusionMatch*>& ms) {
  for (const GraphFusionMatch* m : ms) {
    if (m->fusable || m->feeds == NormFeeds::kUnknown) continue;
    const bool channel = m->feeds == NormFeeds::kChannel;
    for (size_t i = 0; i < l->terms.size(); ++i) {
      const FusionTerm& t = l->terms[i];
      const bool norm = t.kind == FusionKind::kNormLinearPrologue || t.kind == FusionKind::kNormQuantize;
      if (!norm || t.feeds_channel != channel) continue;
      Block(l, i, m->blocker);
      break;
    }
  }
}

FusionTerm SoftmaxTerm(const GraphFusionMatch& m, const LayerSpec& spec, const FusionOptions& o) {
  const double H = static_cast<double>(spec.attn.num_heads), s = static_cast<double>(o.seq);
  const double n = static_cast<double>(m.intermediates);
  FusionTerm t;
  t.kind = FusionKind::kSoftmaxAttention;
  t.chain = "QK^T -> " + std::to_string(m.nodes.size() > 3 ? m.nodes.size() - 3 : 0) +
            " scale/mask ops -> softmax -> PV";
  t.launches_saved = static_cast<double>(m.nodes.size()) - 1;
  t.bytes_saved = 2 * n * H * s * o.act_bytes;
  t.formula = "2 x " + FusionNum(n) + " x " + FusionNum(H) + " x " + FusionNum(s) + " x " +
              FusionNum(o.act_bytes) + " B (scores and probabilities from the graph: write + read)";
  return t;
}

}  // namespace

FusionPlan ConfirmFusionsInGraph(FusionPlan plan, const ModelIR& model,
                                 const std::vector<GraphFusionMatch>& matches) {
  // Step 1: matches by layer and pattern, in graph order.
  std::map<int64_t, std::map<GraphPattern, std::vector<const GraphFusionMatch*>>> by_layer;
  for (const GraphFusionMatch& m : matches)
    if (m.layer >= 0) by_layer[m.layer][m.pattern].push_back(&m);
  for (LayerFusion& l : plan.layers) {
    auto it = by_layer.find(l.layer);
    if (it == by_layer.end()) continue;
    auto& pats = it->second;
    // Step 2: confirm or block the IR terms.
    BlockNorms(&l, pats[GraphPattern::kNormLinear]);
    BlockKind(&l, FusionKind::kGatedActivation, pats[GraphPattern::kSiluMul]);
    BlockKind(&l, FusionKind::kKdaPrologue, pats[GraphPattern::kSigmoidIntoKernel], /*beta_only=*/true);
    // Step 3: softmax attention the graph materialises.
    const size_t li = static_cast<size_t>(l.layer);
    if (li >= model.layers.size()) continue;
    for (const GraphFusionMatch* m : pats[GraphPattern::kSoftmaxAttention]) {
      FusionTerm t = SoftmaxTerm(*m, model.layers[li], plan.options);
      if (m->fusable) {
        l.terms.push_back(t);
      } else {
        t.blocked_by = m->blocker;
        l.blocked.push_back(t);
      }
    }
  }
  return plan;
}

Expected<FusionPlan> PlanFusionsForModelFile(const ModelIR& model, const std::string& path,
                                             const FusionOptions& options, bool* from_graph) {
  FusionPlan plan = PlanFusions(model, options);
  const bool onnx = path.size() > 5 && path.compare(path.size() - 5, 5, ".onnx") == 0;
  if (from_graph != nullptr) *from_graph = onnx;
  if (!onnx) return plan;
  ONBOARD_ASSIGN_OR_RETURN(std::vector<GraphFusionMatch> matches, FindOnnxFusionsInFile(path));
  return ConfirmFusionsInGraph(std::move(plan), model, matches);
}

}  // namespace onboard
