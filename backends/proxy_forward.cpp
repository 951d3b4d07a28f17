// Forward of one proxy unit (embed / KDA or MLA layer with dense or MoE channel / head + loss).
// Legend: b sequences, T tokens, D hidden, nh heads, K/V head dims, E experts, n = b*T tokens,
// P = n*top_k (token, expert) pairs. Weights are views into flat buffers (proxy_model.h).
#include <torch/torch.h>

#include <cmath>

#include "backends/kda_chunked.h"
#include "backends/kda_generated.h"
#include "backends/proxy_model.h"
#include "backends/proxy_weights.h"

namespace onboard::backends {
namespace {

// SiLU of a causal depthwise conv over tokens: y [b,T,C], w [C, kw].
at::Tensor ConvSilu(const at::Tensor& y, const at::Tensor& w) {
  const int64_t T = y.size(1), kw = w.size(1);
  at::Tensor c = at::conv1d(y.transpose(1, 2), w.unsqueeze(1), {}, 1, kw - 1, 1, w.size(0));
  return at::silu(c.narrow(2, 0, T).transpose(1, 2));
}
at::Tensor Kda(const ProxySpec& s, const Weights& W, const at::Tensor& h) {
  const int64_t b = h.size(0), T = h.size(1), nh = s.kda_heads, K = s.kda_head_dim;
  auto heads = [&](const at::Tensor& t) { return t.view({b, T, nh, K}); };
  at::Tensor q = heads(ConvSilu(W.Lin("q_proj", h), W["conv_q"]));  // raw: KdaCore normalises
  at::Tensor k = heads(ConvSilu(W.Lin("k_proj", h), W["conv_k"]));
  at::Tensor v = heads(ConvSilu(W.Lin("v_proj", h), W["conv_v"]));
  // Bounded gate: g = lb * sigmoid(exp(A_log[h]) * (g_raw + dt_bias)), in [lb, 0].
  at::Tensor graw = heads(W.Lin("g_proj", h) + W["dt_bias"]);
  at::Tensor g = s.gate_lower_bound * at::sigmoid(W["A_log"].exp().view({nh, 1}) * graw);
  at::Tensor beta = at::sigmoid(W.Lin("beta_proj", h));  // [b,T,nh]
  at::Tensor o = KdaCore(q, k, v, g, beta, s.chunk, ProcessKdaImpl());  // [b,T,nh,K]
  o = Rms(o, W["o_norm"]) * heads(at::sigmoid(W.Lin("gate_b", W.Lin("gate_a", h))));
  return W.Lin("o_proj", o.reshape({b, T, nh * K}));
}

at::Tensor Mla(const ProxySpec& s, const Weights& W, const at::Tensor& h) {
  const int64_t b = h.size(0), T = h.size(1), nh = s.mla_heads;
  const int64_t dn = s.qk_nope_dim, dr = s.qk_rope_dim, dv = s.v_head_dim;
  at::Tensor q = s.q_lora_rank > 0 ? W.Lin("q_b", Rms(W.Lin("q_a", h), W["q_a_norm"]))
                                   : W.Lin("q_proj", h);
  q = q.view({b, T, nh, dn + dr});
  at::Tensor kva = W.Lin("kv_a", h);                                        // [b,T,kvl+dr]
  at::Tensor ckv = Rms(kva.narrow(-1, 0, s.kv_lora_rank), W["kv_a_norm"]);
  at::Tensor kv = W.Lin("kv_b", ckv).view({b, T, nh, dn + dv});
  at::Tensor k = kv.narrow(-1, 0, dn);
  if (dr > 0) {  // shared decoupled key dims (NoPE: not rotated)
    at::Tensor kr = kva.narrow(-1, s.kv_lora_rank, dr).unsqueeze(2).expand({b, T, nh, dr});
    k = at::cat({k, kr}, -1);
  }
  at::Tensor v = kv.narrow(-1, dn, dv);
  at::Tensor scores = at::matmul(q.transpose(1, 2), k.transpose(1, 2).transpose(-1, -2)) /
                      std::sqrt(double(dn + dr));                              // [b,nh,T,T]
  at::Tensor keep = at::ones({T, T}, h.options().dtype(at::kBool)).tril().expand({b, T, T});
  if (s.index_topk > 0 && s.index_topk < T) {
    // DSA lightning indexer: I[t,s] = sum_j w[t,j] relu(qI[t,j] . kI[s]); keep the top-k causal keys.
    // The selection is not differentiable: the indexer weights get no gradient from the LM loss.
    at::NoGradGuard no_grad;
    const int64_t ih = s.index_heads, id = s.index_head_dim;
    at::Tensor qi = W.Lin("idx_q", h).view({b, T, ih, id});
    at::Tensor ki = W.Lin("idx_k", h);                                          // [b,T,id]
    at::Tensor wi = W.Lin("idx_w", h) / std::sqrt(double(ih * id));             // [b,T,ih]
    at::Tensor rel = at::relu(at::matmul(qi, ki.unsqueeze(1).transpose(-1, -2)));  // [b,T,ih,T]
    at::Tensor I = (rel * wi.unsqueeze(-1)).sum(2).masked_fill(keep.logical_not(), -INFINITY);
    // Ties (relu zeros are common) go to the earlier key: a stable sort, not topk, whose order
    // among equal values is unspecified.
    at::Tensor top = std::get<1>(I.sort(/*stable=*/true, -1, /*descending=*/true)).narrow(-1, 0, s.index_topk);
    keep = keep.logical_and(at::zeros_like(keep).scatter(-1, top, true));
  }
  scores = scores.masked_fill(keep.logical_not().unsqueeze(1), -INFINITY);
  at::Tensor o = at::matmul(at::softmax(scores, -1), v.transpose(1, 2)).transpose(1, 2);  // [b,T,nh,dv]
  if (s.mla_output_gate) o = o * at::sigmoid(W.Lin("gate", h)).view({b, T, nh, dv});
  return W.Lin("o_proj", o.reshape({b, T, nh * dv}));
}

}  // namespace

at::Tensor UnitForward(const ProxySpec& s, const UnitLayout& u, const at::Tensor& x,
                       const at::Tensor& dense, const at::Tensor& lora, const at::Tensor& experts,
                       const at::Tensor& expert_lora, double lora_scale, MoeRouting& routing,
                       const UnitInputs& in) {
  Weights W;
  W.lora_scale = lora_scale;
  AddViews(W, u.dense, dense);
  if (u.lora.numel > 0) AddViews(W, u.lora, lora);
  if (u.kind == UnitKind::kEmbed) {
    return W["tok"].index_select(0, x.flatten()).view({x.size(0), x.size(1), s.hidden});
  }
  if (u.kind == UnitKind::kHead) {
    at::Tensor logits = W.Lin("out", Rms(x, W["final_norm"]));            // [b,T,V]
    at::Tensor nll = -at::log_softmax(logits, -1).gather(-1, in.targets->unsqueeze(-1)).squeeze(-1);
    return (nll * *in.loss_mask).sum() * in.inv_global_tokens;
  }
  const ProxyLayer& pl = s.layers[static_cast<size_t>(u.layer)];
  at::Tensor h = Rms(x, W["norm1"]);
  at::Tensor y = x + (pl.mixer == ProxyMixer::kKDA ? Kda(s, W, h) : Mla(s, W, h));
  at::Tensor h2 = Rms(y, W["norm2"]);
  if (pl.channel == ProxyChannel::kDense) return y + SwiGlu(W, "", h2);
  std::vector<Weights> ex(routing.local_experts.size());
  const int64_t n_local = static_cast<int64_t>(routing.local_experts.size());
  for (int64_t j = 0; j < n_local; ++j) {
    ex[static_cast<size_t>(j)].lora_scale = lora_scale;
    AddViews(ex[static_cast<size_t>(j)], u.expert, experts.view({n_local, u.expert.numel})[j]);
    if (u.expert_lora.numel > 0)
      AddViews(ex[static_cast<size_t>(j)], u.expert_lora, expert_lora.view({n_local, u.expert_lora.numel})[j]);
  }
  return y + MoeForward(s, u, W, ex, h2, routing);
}

}  // namespace onboard::backends
