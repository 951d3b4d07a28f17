// Routed MoE of a proxy layer with expert parallelism (see proxy_model.h MoeForward).
// Legend: b sequences, T tokens, D hidden, E experts, n = b*T tokens, P = n*top_k (token, expert)
// pairs, d = latent width (or D). Rows are tokens; counts are rows.
#include <torch/torch.h>

#include "backends/proxy_weights.h"

namespace onboard::backends {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

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

}  // namespace

at::Tensor MoeForward(const ProxySpec& s, const UnitLayout& u, const Weights& W,
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

}  // namespace onboard::backends
