// DeepSeek-V3.2 lightning indexer (transformers models/deepseek_v32 DeepseekV32Indexer, the bf16 form of
// DeepSeek's reference; the Hadamard rotation there is orthogonal and cancels in q.k, the fp8 scoring
// is a precision choice, so neither appears here):
//   q = wq_b(q_resid) -> [S, nI, dI]; k = LayerNorm(wk(x)) (eps 1e-6, weight + bias) -> [S, dI];
//   RoPE on the first qk_rope_head_dim dims of q and k, HALF-SPLIT (not interleaved like MLA), the
//     rest passes; scores[s,h,t] = relu(q[s,h].k[t] / sqrt(dI));
//   weight[s,h] = weights_proj(x)[s,h] / sqrt(nI); index[s,t] = sum_h weight[s,h] scores[s,h,t];
//   causal mask (-inf), top-min(index_topk, S) keys per query; attention keeps causal AND selected.
//   Ties: a key whose every head dot is negative scores exactly 0, so equal scores are common when
//   nI is small; the reference engines' topk leaves their order open, here the earlier key wins
//   (a stable descending sort), so the selection is deterministic and matches the tests' reference.
// Shapes: x [S, hidden]; q [S, nI, dI]; k [S, dI]; index [S, S]. Units: positions in tokens.
#include <cmath>
#include <limits>

#include "backends/hf_model.h"
#include "backends/hf_rope.h"

namespace onboard {
namespace {

constexpr double kIndexerKNormEps = 1e-6;  // nn.LayerNorm(index_head_dim, eps=1e-6)

// RoPE (half-split) over the first `rd` dims of the last axis of x [S, n, d].
// kimi_k3 (mla_use_nope: RopeSpec::none) rotates nothing, the indexer included.
torch::Tensor RopePrefix(const torch::Tensor& x, const RopeTables& t, int64_t rd, bool none) {
  const int64_t d = x.size(-1);
  if (none) return x;
  return torch::cat({ApplyRope(x.narrow(-1, 0, rd), t, false), x.narrow(-1, rd, d - rd)}, -1);
}

}  // namespace

torch::Tensor HfDsaSelectedKeys(const HfForwardConfig& c, const AttentionSpec& a, const HfAttentionWeights& w,
                                const torch::Tensor& x, const torch::Tensor& q_resid) {
  const int64_t s = x.size(0), nI = a.index_heads, dI = a.index_head_dim, rd = a.qk_rope_head_dim;
  // Step 1: indexer queries and the one shared key, rotated on their first rd dims.
  const RopeTables rope = MakeRopeTables(c.rope, s, x.scalar_type());
  const torch::Tensor q =
      RopePrefix(HfApplyLinear(q_resid, w.idx_wq_b).view({s, nI, dI}), rope, rd, c.rope.none);
  const torch::Tensor kn =
      torch::layer_norm(HfApplyLinear(x, w.idx_wk), {dI}, w.idx_k_norm_w, w.idx_k_norm_b, kIndexerKNormEps);
  const torch::Tensor k = RopePrefix(kn.view({s, 1, dI}), rope, rd, c.rope.none).view({s, dI});
  // Step 2: index scores, weighted over heads.
  const torch::Tensor scores = torch::relu(torch::einsum("shd,td->sht", {q, k}) / std::sqrt(double(dI)));
  const torch::Tensor weight = HfApplyLinear(x, w.idx_weights) / std::sqrt(double(nI));  // [S, nI]
  torch::Tensor index = torch::einsum("sh,sht->st", {weight, scores});
  // Step 3: causal mask, top-k (ties: earlier key first), selected AND causal.
  const torch::Tensor future = torch::arange(s).unsqueeze(0) > torch::arange(s).unsqueeze(1);
  index = index.masked_fill(future, -std::numeric_limits<double>::infinity());
  const torch::Tensor order =
      std::get<1>(torch::sort(index, /*stable=*/true, /*dim=*/-1, /*descending=*/true));
  const torch::Tensor top = order.narrow(1, 0, std::min(a.index_topk, s));
  const torch::Tensor chosen = torch::zeros({s, s}, torch::kBool).scatter_(1, top, true);
  return chosen.logical_and(future.logical_not());
}

}  // namespace onboard
