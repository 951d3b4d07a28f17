// Kimi-Linear's KDA token mixer (KimiDeltaAttention in the model's modeling_kimi.py, fla's kernels),
// with the recurrence of shared/reference/kernels.md run by the project's reference
// (backends::KdaRecurrent, kda_chunked.h):
//   q, k, v = silu(causal depthwise conv_K(proj(x)))                        [S, H*d]
//   g = -exp(A_log[h]) * softplus(f_b(f_a(x)) + dt_bias)                     [S, H, d] log decay <= 0
//     bounded (gate_lower_bound lb < 0, kimi_k3; fla's safe gate, as the proxy's):
//     g = lb * sigmoid(exp(A_log[h]) * (f_b(f_a(x)) + dt_bias)), in [lb, 0]
//   beta = sigmoid(b_proj(x))                                                [S, H]
//   q = l2norm(q) / sqrt(d), k = l2norm(k) per head (eps 1e-6 inside the root)
//   S_t = diag(exp g_t) S_{t-1}; S_t += beta_t k_t (v_t - S^T k_t)^T; o_t = S_t^T q_t
//   o = RMSNorm(o; o_norm, rms_norm_eps) * sigmoid(g_b(g_a(x))) per head; out = o_proj(o)
//     (use_full_rank_gate, kimi_k3: sigmoid(g_proj(x)) in place of g_b(g_a(x)))
// Shapes: x [S, hidden]; conv weights [H*d, 1, K]; tap i of K multiplies x[t - (K-1) + i].
#include "backends/hf_model.h"
#include "backends/kda_chunked.h"

namespace onboard {
namespace {

constexpr double kL2NormEps = 1e-6;  // fla l2norm: x / sqrt(sum x^2 + eps)

// Causal depthwise conv over time, then SiLU. x [S, D], w [D, 1, K].
torch::Tensor ShortConv(const torch::Tensor& x, const torch::Tensor& w) {
  const int64_t s = x.size(0), K = w.size(2);
  const torch::Tensor padded =
      torch::cat({torch::zeros({K - 1, x.size(1)}, x.options()), x}, 0);  // [S+K-1, D]
  torch::Tensor y = torch::zeros_like(x);
  for (int64_t i = 0; i < K; ++i) y = y + padded.narrow(0, i, s) * w.select(2, i).squeeze(1);
  return torch::silu(y);
}

torch::Tensor L2Norm(const torch::Tensor& x) { return x * torch::rsqrt(x.pow(2).sum(-1, true) + kL2NormEps); }

}  // namespace

torch::Tensor HfKdaMixer(const HfForwardConfig& c, const AttentionSpec& a, const HfAttentionWeights& w,
                         const torch::Tensor& x) {
  const int64_t s = x.size(0), H = a.num_heads, d = a.head_dim;
  // Step 1: projections through the short convolutions.
  const torch::Tensor q = ShortConv(HfApplyLinear(x, w.q), w.q_conv).view({s, H, d});
  const torch::Tensor k = ShortConv(HfApplyLinear(x, w.k), w.k_conv).view({s, H, d});
  const torch::Tensor v = ShortConv(HfApplyLinear(x, w.v), w.v_conv).view({s, H, d});
  // Step 2: per-channel log decay and the write strength.
  const torch::Tensor f = HfApplyLinear(HfApplyLinear(x, w.f_a), w.f_b) + w.dt_bias;  // [S, H*d]
  const torch::Tensor A = w.a_log.exp().view({1, H, 1});
  const torch::Tensor g = a.gate_form == GateForm::kBounded
                              ? a.gate_lower_bound * torch::sigmoid(A * f.view({s, H, d}))
                              : -A * torch::softplus(f).view({s, H, d});
  const torch::Tensor beta = torch::sigmoid(HfApplyLinear(x, w.beta));  // [S, H]
  // Step 3: the gated delta rule (batch of one).
  const torch::Tensor qn = L2Norm(q) / std::sqrt(double(d)), kn = L2Norm(k);
  const torch::Tensor o =
      backends::KdaRecurrent(qn.unsqueeze(0), kn.unsqueeze(0), v.unsqueeze(0), g.unsqueeze(0),
                             beta.unsqueeze(0))
          .squeeze(0);  // [S, H, d]
  // Step 4: gated RMSNorm per head, output projection.
  const torch::Tensor graw =
      w.g.w.defined() ? HfApplyLinear(x, w.g) : HfApplyLinear(HfApplyLinear(x, w.g_a), w.g_b);
  const torch::Tensor gate = torch::sigmoid(graw).view({s, H, d});
  return HfApplyLinear((HfRmsNorm(o, w.o_norm, c.rms_eps) * gate).reshape({s, H * d}), w.o);
}

}  // namespace onboard
