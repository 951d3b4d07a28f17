// Forward of one proxy unit (embed / KDA or MLA layer with dense or MoE channel / head + loss).
// Legend: b sequences, T tokens, D hidden, nh heads, K/V head dims, E experts, n = b*T tokens,
// P = n*top_k (token, expert) pairs. Weights are views into flat buffers (proxy_model.h).
#include <torch/torch.h>

#include <cmath>

#include "backends/kda_chunked.h"
#include "backends/kda_generated.h"
#include "backends/proxy_model.h"

namespace onboard::backends {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// name -> view into the flat buffers of one unit (base and adapters) or of one expert.
struct Weights {
  std::map<std::string, at::Tensor> w;
  double lora_scale = 0;
  const at::Tensor& operator[](const std::string& n) const {
    auto it = w.find(n);
    ONBOARD_ASSERT(it != w.end(), "proxy weight '" + n + "' missing");
    return it->second;
  }
  bool has(const std::string& n) const { return w.count(n) > 0; }
  // x W^T (+ scale * (x A^T) B^T when the weight has an adapter).
  at::Tensor Lin(const std::string& n, const at::Tensor& x) const {
    at::Tensor y = at::matmul(x, (*this)[n].t());
    auto a = w.find(n + ".A");
    if (a != w.end()) y = y + lora_scale * at::matmul(at::matmul(x, a->second.t()), (*this)[n + ".B"].t());
    return y;
  }
};

void AddViews(Weights& out, const FlatLayout& layout, const at::Tensor& flat) {
  for (const ParamSlot& p : layout.slots)
    out.w[p.name] = flat.narrow(0, p.offset, p.numel).view(p.shape);
}

at::Tensor Rms(const at::Tensor& x, const at::Tensor& w) {
  return x * at::rsqrt(x.pow(2).mean(-1, /*keepdim=*/true) + 1e-6) * w;
}

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

at::Tensor SwiGlu(const Weights& W, const std::string& p, const at::Tensor& x) {
  return W.Lin(p + "w2", at::silu(W.Lin(p + "w1", x)) * W.Lin(p + "w3", x));
}

// Exchange of token rows between EP ranks; backward runs the reverse exchange.
class AllToAllFn : public torch::autograd::Function<AllToAllFn> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, int64_t group,
                            std::vector<int64_t> send, std::vector<int64_t> recv) {
    ctx->saved_data["group"] = group;
    ctx->saved_data["send"] = send;
    ctx->saved_data["recv"] = recv;
    return reinterpret_cast<Group*>(group)->AllToAll(x, send, recv);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto* g = reinterpret_cast<Group*>(ctx->saved_data["group"].toInt());
    at::Tensor dx = g->AllToAll(grads[0], ctx->saved_data["recv"].toIntVector(),
                                ctx->saved_data["send"].toIntVector());
    return {dx, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

at::Tensor Moe(const ProxySpec& s, const UnitLayout& u, const Weights& W,
               const std::vector<Weights>& experts, const at::Tensor& h, MoeRouting& R) {
  const int64_t b = h.size(0), T = h.size(1), D = s.hidden, E = s.num_experts, k = s.top_k;
  const int64_t ep = R.ep->size();
  at::Tensor x = h.reshape({b * T, D});
  // Step 1: router in fp32; top-k experts and their weights per token.
  at::Tensor logits = W.Lin("router", x.scalar_type() == at::kDouble ? x : x.to(at::kFloat));
  at::Tensor scores = s.router == RouterActivation::kSigmoid ? at::sigmoid(logits) : at::softmax(logits, -1);
  // Top-k by a stable descending sort: equal scores go to the lower expert id on every layout.
  at::Tensor itop = std::get<1>(scores.sort(/*stable=*/true, -1, /*descending=*/true)).narrow(-1, 0, k);
  at::Tensor wtop = scores.gather(-1, itop);
  if (s.renormalize) wtop = wtop / (wtop.sum(-1, true) + 1e-20);
  wtop = wtop * s.routed_scaling;
  if (R.record && R.load != nullptr) {
    at::Tensor cnt = at::bincount(itop.flatten(), {}, E);
    auto& row = (*R.load)[u.layer];
    row.assign(static_cast<size_t>(E), 0);
    for (int64_t e = 0; e < E; ++e) row[static_cast<size_t>(e)] = cnt[e].item<int64_t>();
  }
  // Step 2: latent down-projection; routed experts run at latent width.
  at::Tensor xl = x;
  if (s.latent_dim > 0) {
    xl = W.Lin("lat_down", x);
    if (s.latent_norm) xl = Rms(xl, W["lat_norm"]);
  }
  // Step 3: order (token, expert) pairs by destination rank, then expert (ordinal = position in
  // the list "experts of EP rank 0 ascending, of rank 1 ascending, ...").
  std::vector<int64_t> ordinal(static_cast<size_t>(E)), per_rank(static_cast<size_t>(ep), 0);
  {
    int64_t pos = 0;
    for (int64_t r = 0; r < ep; ++r)
      for (int64_t e = 0; e < E; ++e)
        if (R.placement[static_cast<size_t>(e)] == r) { ordinal[static_cast<size_t>(e)] = pos++; per_rank[static_cast<size_t>(r)]++; }
  }
  at::Tensor ord = at::tensor(ordinal, at::kLong);
  at::Tensor key = ord.index_select(0, itop.flatten());                          // [P]
  at::Tensor perm = std::get<1>(key.sort(/*stable=*/true, 0, false));
  at::Tensor tok = at::arange(b * T, at::kLong).repeat_interleave(k).index_select(0, perm);
  at::Tensor wsorted = wtop.flatten().index_select(0, perm);
  at::Tensor counts = at::bincount(key, {}, E);                                  // per ordinal
  // Step 4: exchange per-expert counts, then the token rows (split sizes = actual counts).
  const int64_t el = E / ep;
  at::Tensor recv_counts = R.ep->AllToAll(counts.view({E, 1}), std::vector<int64_t>(static_cast<size_t>(ep), el),
                                          std::vector<int64_t>(static_cast<size_t>(ep), el)).view({ep, el});
  std::vector<int64_t> send(static_cast<size_t>(ep)), recv(static_cast<size_t>(ep));
  for (int64_t r = 0; r < ep; ++r) {
    send[static_cast<size_t>(r)] = counts.narrow(0, r * el, el).sum().item<int64_t>();
    recv[static_cast<size_t>(r)] = recv_counts[r].sum().item<int64_t>();
  }
  const auto group = reinterpret_cast<int64_t>(R.ep);
  at::Tensor xr = AllToAllFn::apply(xl.index_select(0, tok), group, send, recv);  // [R, d]
  // Step 5: received rows are grouped by source then local expert; regroup by expert and run.
  at::Tensor local_of_row = at::arange(el, at::kLong).repeat({ep}).repeat_interleave(recv_counts.flatten());
  at::Tensor by_e = std::get<1>(local_of_row.sort(true, 0, false));
  at::Tensor xe = xr.index_select(0, by_e);
  at::Tensor per_e = recv_counts.sum(0);                                         // [el]
  std::vector<at::Tensor> ys;
  int64_t start = 0;
  for (int64_t j = 0; j < el; ++j) {
    const int64_t c = per_e[j].item<int64_t>();
    if (c > 0) ys.push_back(SwiGlu(experts[static_cast<size_t>(j)], "", xe.narrow(0, start, c)));
    start += c;
  }
  at::Tensor ye = ys.empty() ? xe * 0.0 : at::cat(ys, 0);
  at::Tensor yr = at::empty_like(ye).index_copy(0, by_e, ye);  // back to received order
  // Step 6: send results back and combine with the router weights.
  at::Tensor yb = AllToAllFn::apply(yr, group, recv, send);                       // [P, d]
  at::Tensor y = at::zeros({b * T, xl.size(1)}, xl.options())
                     .index_add(0, tok, yb * wsorted.unsqueeze(-1).to(yb.scalar_type()));
  if (s.latent_dim > 0) y = W.Lin("lat_up", y);
  if (s.num_shared > 0) y = y + SwiGlu(W, "sh_", x);
  return y.view({b, T, D});
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
  return y + Moe(s, u, W, ex, h2, routing);
}

}  // namespace onboard::backends
