// Softmax attention of one sequence as transformers computes it (eager path):
//   GQA (llama/qwen/mistral/mixtral): q/k/v projections (+ biases), optional per-head q/k RMSNorm
//   (qwen3, before RoPE), RoPE, key/value head i // (H/KV) for query head i, causal (+ sliding
//   window: key j visible to query i when i - window < j <= i), softmax(q k^T * scale) v, o_proj.
//   MLA (deepseek_v3): q (low-rank through q_a_layernorm), latent kv_a -> kv_a_layernorm -> kv_b gives
//   per-head k_nope and v; one shared rotary key of dr dims; q = [q_nope, rope(q_rot)],
//   k = [k_nope, rope(k_rot)]; scale = 1/sqrt(dn+dr) (x mscale^2 under YaRN).
// Shapes: x [S, hidden]; q/k [S, H, d]; scores [H, S, S]. Units: positions in tokens.
#include <limits>

#include "backends/hf_model.h"
#include "backends/hf_rope.h"

namespace onboard {
namespace {

// DeepseekV3RMSNorm(q_lora_rank) / (kv_lora_rank) are built without eps: the class default 1e-6.
constexpr double kMlaLatentNormEps = 1e-6;

// scores [H, S, S] -> probabilities under the causal (+ window) mask.
torch::Tensor MaskedSoftmax(torch::Tensor scores, int64_t window) {
  const int64_t s = scores.size(1);
  const torch::Tensor i = torch::arange(s).unsqueeze(1), j = torch::arange(s).unsqueeze(0);
  torch::Tensor hidden = j > i;
  if (window > 0) hidden = hidden.logical_or(j <= i - window);
  scores = scores.masked_fill(hidden.unsqueeze(0), -std::numeric_limits<double>::infinity());
  return torch::softmax(scores, -1);
}

// q [S, H, dq], k [S, H, dq], v [S, H, dv] -> [S, H * dv].
torch::Tensor Attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, double scale,
                     int64_t window) {
  const torch::Tensor scores = torch::einsum("shd,thd->hst", {q, k}) * scale;
  const torch::Tensor p = MaskedSoftmax(scores, window);
  return torch::einsum("hst,thd->shd", {p, v}).reshape({q.size(0), -1});
}

torch::Tensor Gqa(const HfForwardConfig& c, const AttentionSpec& a, const HfAttentionWeights& w, const torch::Tensor& x) {
  const int64_t s = x.size(0);
  torch::Tensor q = HfApplyLinear(x, w.q).view({s, a.num_heads, a.head_dim});
  torch::Tensor k = HfApplyLinear(x, w.k).view({s, a.num_kv_heads, a.head_dim});
  torch::Tensor v = HfApplyLinear(x, w.v).view({s, a.num_kv_heads, a.head_dim});
  if (w.q_norm.defined()) {
    q = HfRmsNorm(q, w.q_norm, c.rms_eps);
    k = HfRmsNorm(k, w.k_norm, c.rms_eps);
  }
  const RopeTables rope = MakeRopeTables(c.rope, s, x.scalar_type());
  q = ApplyRope(q, rope, false);
  k = ApplyRope(k, rope, false);
  const int64_t groups = a.num_heads / a.num_kv_heads;
  k = k.repeat_interleave(groups, 1);
  v = v.repeat_interleave(groups, 1);
  const int64_t window = a.kind == MixerKind::kSlidingWindow ? a.window : 0;
  return HfApplyLinear(Attend(q, k, v, c.softmax_scale, window), w.o);
}

torch::Tensor Mla(const HfForwardConfig& c, const AttentionSpec& a, const HfAttentionWeights& w, const torch::Tensor& x) {
  const int64_t s = x.size(0), H = a.num_heads, dn = a.qk_nope_head_dim, dr = a.qk_rope_head_dim;
  // Step 1: queries.
  const torch::Tensor qf = a.q_lora_rank > 0
                               ? HfApplyLinear(HfRmsNorm(HfApplyLinear(x, w.q_a), w.q_a_norm, kMlaLatentNormEps), w.q_b)
                               : HfApplyLinear(x, w.q);
  const torch::Tensor q = qf.view({s, H, dn + dr});
  // Step 2: latent -> per-head k_nope, v; one rotary key shared by the heads.
  const torch::Tensor kv = HfApplyLinear(x, w.kv_a);  // [S, rkv + dr]
  const torch::Tensor latent = HfRmsNorm(kv.narrow(1, 0, a.kv_lora_rank), w.kv_a_norm, kMlaLatentNormEps);
  const torch::Tensor kvb = HfApplyLinear(latent, w.kv_b).view({s, H, dn + a.v_head_dim});
  const RopeTables rope = MakeRopeTables(c.rope, s, x.scalar_type());
  const torch::Tensor q_rot = ApplyRope(q.narrow(2, dn, dr), rope, c.rope.interleave);
  const torch::Tensor k_rot = ApplyRope(kv.narrow(1, a.kv_lora_rank, dr).view({s, 1, dr}), rope, c.rope.interleave);
  const torch::Tensor query = torch::cat({q.narrow(2, 0, dn), q_rot}, 2);
  const torch::Tensor key = torch::cat({kvb.narrow(2, 0, dn), k_rot.expand({s, H, dr})}, 2);
  const torch::Tensor value = kvb.narrow(2, dn, a.v_head_dim);
  // Step 3: attention and output projection.
  return HfApplyLinear(Attend(query, key, value, c.softmax_scale, 0), w.o);
}

}  // namespace

torch::Tensor HfAttention(const HfForwardConfig& c, const LayerSpec& l, const HfAttentionWeights& w,
                          const torch::Tensor& x) {
  return l.attn.kind == MixerKind::kMLA ? Mla(c, l.attn, w, x) : Gqa(c, l.attn, w, x);
}

}  // namespace onboard
