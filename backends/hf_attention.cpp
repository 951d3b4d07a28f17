// Softmax attention of one sequence as transformers computes it (eager path):
//   GQA (llama/qwen/mistral/mixtral): q/k/v projections (+ biases), optional per-head q/k RMSNorm
//   (qwen3, before RoPE), RoPE, key/value head i // (H/KV) for query head i, causal (+ sliding
//   window: key j visible to query i when i - window < j <= i), softmax(q k^T * scale) v, o_proj.
//   glm4_moe rotates only the first RopeSpec::dim dims of each head (partial_rotary_factor).
//   gpt_oss sinks: one learned logit per head joins each row's softmax as an extra column and is
//   dropped after it (probabilities of the real keys sum to < 1).
//   MLA (deepseek_v3): q (low-rank through q_a_layernorm), latent kv_a -> kv_a_layernorm -> kv_b gives
//   per-head k_nope and v; one shared rotary key of dr dims; q = [q_nope, rope(q_rot)],
//   k = [k_nope, rope(k_rot)]; scale = 1/sqrt(dn+dr) (x mscale^2 under YaRN).
//   Kimi-Linear MLA skips the rotation (mla_use_nope); its KDA layers go to hf_kda_layer.cpp.
//   kimi_k3 gated MLA (mla_use_output_gate): o * sigmoid(g_proj(x)) on the per-head output [S, H*dv]
//   (after kv_b's value up-projection), then o_proj (sglang's KimiK3MLAAttention: the gate does not
//   commute with kv_b, so it cannot act on the 512-wide latent).
//   DSA (deepseek_v32): MLA over the keys the lightning indexer selects (hf_dsa_indexer.cpp).
// Shapes: x [S, hidden]; q/k [S, H, d]; scores [H, S, S]. Units: positions in tokens.
#include <limits>

#include "backends/hf_model.h"
#include "backends/hf_rope.h"

namespace onboard {
namespace {

// DeepseekV3RMSNorm(q_lora_rank) / (kv_lora_rank) are built without eps: the class default 1e-6.
constexpr double kMlaLatentNormEps = 1e-6;

// scores [H, S, S] -> probabilities under the causal (+ window) mask, with the sink column when
// `sinks` [H] is defined.
// `allowed` [S, S] (DSA's selected keys) further restricts the mask when defined.
torch::Tensor MaskedSoftmax(torch::Tensor scores, int64_t window, const torch::Tensor& sinks,
                            const torch::Tensor& allowed) {
  const int64_t h = scores.size(0), s = scores.size(1);
  const torch::Tensor i = torch::arange(s).unsqueeze(1), j = torch::arange(s).unsqueeze(0);
  torch::Tensor hidden = j > i;
  if (window > 0) hidden = hidden.logical_or(j <= i - window);
  if (allowed.defined()) hidden = hidden.logical_or(allowed.logical_not());
  scores = scores.masked_fill(hidden.unsqueeze(0), -std::numeric_limits<double>::infinity());
  if (!sinks.defined()) return torch::softmax(scores, -1);
  const torch::Tensor with_sink = torch::cat({scores, sinks.view({h, 1, 1}).expand({h, s, 1})}, -1);
  return torch::softmax(with_sink, -1).narrow(-1, 0, s);
}

// q [S, H, dq], k [S, H, dq], v [S, H, dv] -> [S, H * dv].
torch::Tensor Attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, double scale,
                     int64_t window, const torch::Tensor& sinks = {}, const torch::Tensor& allowed = {}) {
  const torch::Tensor scores = torch::einsum("shd,thd->hst", {q, k}) * scale;
  const torch::Tensor p = MaskedSoftmax(scores, window, sinks, allowed);
  return torch::einsum("hst,thd->shd", {p, v}).reshape({q.size(0), -1});
}

// RoPE over the first c.rope.dim dims of each head; the rest pass through (partial rotary).
torch::Tensor RotatePrefix(const torch::Tensor& x, const HfForwardConfig& c, const RopeTables& rope) {
  const int64_t d = x.size(-1), rd = c.rope.dim;
  if (rd == d) return ApplyRope(x, rope, false);
  return torch::cat({ApplyRope(x.narrow(-1, 0, rd), rope, false), x.narrow(-1, rd, d - rd)}, -1);
}

torch::Tensor Gqa(const HfForwardConfig& c, const AttentionSpec& a, const HfAttentionWeights& w,
                  const torch::Tensor& x, const HfMrope* mrope) {
  const int64_t s = x.size(0);
  torch::Tensor q = HfApplyLinear(x, w.q).view({s, a.num_heads, a.head_dim});
  torch::Tensor k = HfApplyLinear(x, w.k).view({s, a.num_kv_heads, a.head_dim});
  torch::Tensor v = HfApplyLinear(x, w.v).view({s, a.num_kv_heads, a.head_dim});
  if (w.q_norm.defined()) {
    q = HfRmsNorm(q, w.q_norm, c.rms_eps);
    k = HfRmsNorm(k, w.k_norm, c.rms_eps);
  }
  // M-RoPE positions (an image's t/h/w rows) when given, else 0..S-1.
  const RopeTables rope =
      mrope ? MakeMropeTables(c.rope, *mrope, x.scalar_type()) : MakeRopeTables(c.rope, s, x.scalar_type());
  q = RotatePrefix(q, c, rope);
  k = RotatePrefix(k, c, rope);
  const int64_t groups = a.num_heads / a.num_kv_heads;
  k = k.repeat_interleave(groups, 1);
  v = v.repeat_interleave(groups, 1);
  const int64_t window = a.kind == MixerKind::kSlidingWindow ? a.window : 0;
  return HfApplyLinear(Attend(q, k, v, c.softmax_scale, window, w.sinks), w.o);
}

torch::Tensor Mla(const HfForwardConfig& c, const AttentionSpec& a, const HfAttentionWeights& w, const torch::Tensor& x) {
  const int64_t s = x.size(0), H = a.num_heads, dn = a.qk_nope_head_dim, dr = a.qk_rope_head_dim;
  // Step 1: queries.
  const torch::Tensor q_resid =
      a.q_lora_rank > 0 ? HfRmsNorm(HfApplyLinear(x, w.q_a), w.q_a_norm, kMlaLatentNormEps) : torch::Tensor();
  const torch::Tensor qf = a.q_lora_rank > 0 ? HfApplyLinear(q_resid, w.q_b) : HfApplyLinear(x, w.q);
  const torch::Tensor q = qf.view({s, H, dn + dr});
  // Step 2: latent -> per-head k_nope, v; one rotary key shared by the heads.
  const torch::Tensor kv = HfApplyLinear(x, w.kv_a);  // [S, rkv + dr]
  const torch::Tensor latent = HfRmsNorm(kv.narrow(1, 0, a.kv_lora_rank), w.kv_a_norm, kMlaLatentNormEps);
  const torch::Tensor kvb = HfApplyLinear(latent, w.kv_b).view({s, H, dn + a.v_head_dim});
  const RopeTables rope = MakeRopeTables(c.rope, s, x.scalar_type());
  auto rotate = [&](const torch::Tensor& t) {
    return c.rope.none ? t : ApplyRope(t, rope, c.rope.interleave);
  };
  const torch::Tensor q_rot = rotate(q.narrow(2, dn, dr));
  const torch::Tensor k_rot = rotate(kv.narrow(1, a.kv_lora_rank, dr).view({s, 1, dr}));
  const torch::Tensor query = torch::cat({q.narrow(2, 0, dn), q_rot}, 2);
  const torch::Tensor key = torch::cat({kvb.narrow(2, 0, dn), k_rot.expand({s, H, dr})}, 2);
  const torch::Tensor value = kvb.narrow(2, dn, a.v_head_dim);
  // Step 3: attention (DSA: over the indexer's selected keys only) and output projection.
  const torch::Tensor allowed =
      a.kind == MixerKind::kDSA ? HfDsaSelectedKeys(c, a, w, x, q_resid) : torch::Tensor();
  torch::Tensor o = Attend(query, key, value, c.softmax_scale, 0, {}, allowed);  // [S, H*dv]
  // kimi_k3 gated MLA: sigmoid(g_proj(x)) per head and channel, after the value up-projection.
  if (w.g.w.defined()) o = o * torch::sigmoid(HfApplyLinear(x, w.g));
  return HfApplyLinear(o, w.o);
}

}  // namespace

torch::Tensor HfAttention(const HfForwardConfig& c, const LayerSpec& l, const HfAttentionWeights& w,
                          const torch::Tensor& x, const HfMrope* mrope) {
  if (l.attn.kind == MixerKind::kKDA) return HfKdaMixer(c, l.attn, w, x);
  const bool mla = l.attn.kind == MixerKind::kMLA || l.attn.kind == MixerKind::kDSA;
  ONBOARD_ASSERT(!(mla && mrope), "M-RoPE positions apply to GQA layers only");
  return mla ? Mla(c, l.attn, w, x) : Gqa(c, l.attn, w, x, mrope);
}

}  // namespace onboard
