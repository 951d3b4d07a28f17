// MoE channel of one sequence, per family (transformers modeling code):
//   softmax (mixtral, qwen2_moe, qwen3_moe): p = softmax(router(x)); top-k of p; renormalise when
//     norm_topk_prob (mixtral: always); qwen2_moe adds sigmoid(shared_expert_gate(x)) * shared(x).
//   sigmoid noaux_tc (deepseek_v3): s = sigmoid(router(x)); choice = s + e_score_correction_bias;
//     group score = sum of the top-2 choices per group; keep topk_group groups; top-k of choice inside
//     them; weights = s at those experts, / (sum + 1e-20) when norm_topk_prob, x routed_scaling_factor;
//     + shared experts(x).
//   latent (kimi_k3, routed_expert_hidden_size L): routing on x; the routed experts run on
//     xl = routed_expert_down_proj(x) [T, L]; their weighted sum u [T, L] -> routed_expert_up_proj(
//     RMSNorm(u; routed_expert_norm, rms_norm_eps)) (norm when latent_moe_use_norm); shared experts on x
//     at full width. The norm acts on the combined sum, before the up-projection (sglang's KimiK3MoE:
//     "sum(RMSNorm(x_i)) != RMSNorm(sum(x_i))"; Megatron's K3MoELayer postprocess). Under TP (or EP)
//     a rank's HfMoeRouted is a partial sum: the caller all-reduces it before HfLatentOut
//     (probe_weights_model.cpp).
//   gpt_oss: logits = router(x) + bias; top-k of the logits; weights = softmax over those k; experts
//     with biases and the clamped SwiGLU (HfExpert).
// Shapes: x [T, h]; router logits [T, E]; routing [T, k].
#include "backends/hf_model.h"

namespace onboard {
namespace {

HfRouting SigmoidGrouped(const HfForwardConfig& c, const MoESpec& m, const HfMoeWeights& w,
                         const torch::Tensor& logits) {
  const int64_t t = logits.size(0), e = m.num_experts, g = m.num_groups;
  const torch::Tensor scores = logits.sigmoid();
  const torch::Tensor choice = w.score_bias.defined() ? scores + w.score_bias : scores;
  torch::Tensor masked = choice;
  if (g > 1) {
    const torch::Tensor group_scores = std::get<0>(choice.view({t, g, e / g}).topk(2, -1)).sum(-1);  // [T, G]
    const torch::Tensor keep = std::get<1>(group_scores.topk(m.topk_groups, -1));
    const torch::Tensor group_mask = torch::zeros_like(group_scores).scatter_(1, keep, 1.0);
    const torch::Tensor mask = group_mask.unsqueeze(-1).expand({t, g, e / g}).reshape({t, e});
    masked = choice.masked_fill(mask.logical_not(), 0.0);
  }
  const torch::Tensor idx = std::get<1>(masked.topk(m.top_k, -1));
  torch::Tensor weights = scores.gather(1, idx);
  if (c.norm_topk_prob) weights = weights / (weights.sum(-1, true) + 1e-20);
  return {idx, weights * m.routed_scaling};
}

HfRouting SoftmaxTopK(const HfForwardConfig& c, const MoESpec& m, const torch::Tensor& logits) {
  if (c.softmax_after_topk) {
    auto [top, idx] = logits.topk(m.top_k, -1);
    return {idx, torch::softmax(top, -1)};
  }
  const torch::Tensor p = torch::softmax(logits, -1);
  auto [weights, idx] = p.topk(m.top_k, -1);
  if (c.norm_topk_prob) weights = weights / weights.sum(-1, true);
  return {idx, weights};
}

}  // namespace

torch::Tensor HfExpert(const HfForwardConfig& c, const torch::Tensor& x, const HfMlpWeights& w) {
  if (c.swiglu_limit <= 0) return HfMlp(c, x, w);
  const torch::Tensor gate = HfApplyLinear(x, w.gate).clamp_max(c.swiglu_limit);
  const torch::Tensor up = HfApplyLinear(x, w.up).clamp(-c.swiglu_limit, c.swiglu_limit);
  return HfApplyLinear((up + 1) * (gate * torch::sigmoid(gate * c.swiglu_alpha)), w.down);
}

HfRouting HfRoute(const HfForwardConfig& c, const MoESpec& m, const HfMoeWeights& w, const torch::Tensor& x) {
  const torch::Tensor logits = HfApplyLinear(x, w.router);
  return m.router == RouterActivation::kSigmoid ? SigmoidGrouped(c, m, w, logits) : SoftmaxTopK(c, m, logits);
}

torch::Tensor HfSharedExperts(const HfForwardConfig& c, const HfMoeWeights& w, const torch::Tensor& x) {
  if (!w.has_shared) return {};
  torch::Tensor s = HfMlp(c, x, w.shared);
  if (w.shared_gate.w.defined()) s = torch::sigmoid(HfApplyLinear(x, w.shared_gate)) * s;
  return s;
}

torch::Tensor HfLatentIn(const HfMoeWeights& w, const torch::Tensor& x) {
  return w.latent_down.w.defined() ? HfApplyLinear(x, w.latent_down) : x;
}

torch::Tensor HfLatentOut(const HfForwardConfig& c, const HfMoeWeights& w, const torch::Tensor& y) {
  if (!w.latent_up.w.defined()) return y;
  return HfApplyLinear(w.latent_norm.defined() ? HfRmsNorm(y, w.latent_norm, c.rms_eps) : y, w.latent_up);
}

torch::Tensor HfMoeRouted(const HfForwardConfig& c, const MoESpec& m, const HfMoeWeights& w,
                          const torch::Tensor& in) {
  // Step 1: routing (on the full-width input).
  const HfRouting r = HfRoute(c, m, w, in);
  // Step 2: each expert on the tokens routed to it, weighted (latent MoE: at the latent width).
  const torch::Tensor x = HfLatentIn(w, in);
  torch::Tensor out = torch::zeros_like(x);
  for (int64_t e = 0; e < m.num_experts; ++e) {
    const torch::Tensor hit = r.experts.eq(e);                                    // [T, k]
    const torch::Tensor tokens = hit.any(1).nonzero().squeeze(1);                 // tokens routed to e
    if (tokens.numel() == 0 || !w.experts[size_t(e)].down.w.defined()) continue;  // none, or another rank's
    const torch::Tensor weight = (r.weights * hit).sum(1).index_select(0, tokens).unsqueeze(1);
    out.index_add_(0, tokens, HfExpert(c, x.index_select(0, tokens), w.experts[size_t(e)]) * weight);
  }
  return out;
}

torch::Tensor HfMoe(const HfForwardConfig& c, const MoESpec& m, const HfMoeWeights& w,
                    const torch::Tensor& in) {
  // Steps 1-2: the routed experts' weighted sum; Step 3: back to hidden (latent MoE); shared expert(s)
  // on the full-width input, gated for qwen2_moe.
  torch::Tensor out = HfLatentOut(c, w, HfMoeRouted(c, m, w, in));
  if (w.has_shared) out = out + HfSharedExperts(c, w, in);
  return out;
}

}  // namespace onboard
