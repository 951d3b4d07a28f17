// HfMoeEpRouted: the routed part of a Hugging Face MoE channel with the routed experts split over an EP group
// (hf_moe_ep.h). Legend: T tokens of this rank, k = top_k, P = T*k (token, expert) pairs, E experts, el = E /
// ep experts per EP rank (owner of expert e: e / el). Counts are rows.
#include "backends/hf_moe_ep.h"

#include <vector>

#include "backends/ep_all_to_all.h"

namespace onboard::backends {

torch::Tensor HfMoeEpRouted(const HfForwardConfig& c, const MoESpec& m, const HfMoeWeights& w,
                            const torch::Tensor& x, Group& ep) {
  const int64_t T = x.size(0), k = m.top_k, E = m.num_experts, R = ep.size(), el = E / R;
  ONBOARD_ASSERT(E % R == 0, "EP needs experts divisible by the group");
  // Step 1: routing on this rank's tokens (the router is replicated).
  const HfRouting r = HfRoute(c, m, w, x);
  // Step 2: pairs in (expert, token) order: a stable sort of the (token, slot) list by expert, so
  // each expert's tokens ascend and the owners' blocks follow in rank order.
  const torch::Tensor key = r.experts.flatten();  // [P]
  const torch::Tensor perm = std::get<1>(key.sort(/*stable=*/true, 0, false));
  const torch::Tensor tok = torch::arange(T, key.options()).repeat_interleave(k).index_select(0, perm);
  const torch::Tensor counts = torch::bincount(key, {}, E);  // per expert
  // Step 3: per-expert counts to the owners, then the rows (split sizes = the counts).
  const std::vector<int64_t> per_rank(size_t(R), el);
  const torch::Tensor rc = ep.AllToAll(counts.view({E, 1}), per_rank, per_rank).view({R, el}).contiguous();
  const auto rca = rc.accessor<int64_t, 2>();
  const torch::Tensor cc = counts.contiguous();
  const auto ca = cc.accessor<int64_t, 1>();
  std::vector<int64_t> send(size_t(R), 0), recv(size_t(R), 0);
  for (int64_t q = 0; q < R; ++q)
    for (int64_t j = 0; j < el; ++j) {
      send[size_t(q)] += ca[q * el + j];
      recv[size_t(q)] += rca[q][j];
    }
  const torch::Tensor xl = HfLatentIn(w, x);  // latent MoE: the routed experts' width (HfMoe's)
  const torch::Tensor xr = EpAllToAll(ep, xl.index_select(0, tok), send, recv);  // by source, then expert
  // Step 4: each owned expert over each source's rows alone (HfMoe's GEMM on one process).
  std::vector<torch::Tensor> ys;
  int64_t off = 0;
  for (int64_t src = 0; src < R; ++src)
    for (int64_t j = 0; j < el; ++j) {
      const int64_t n = rca[src][j];
      const HfMlpWeights& ew = w.experts[size_t(ep.rank() * el + j)];
      ONBOARD_ASSERT(ew.down.w.defined(), "EP rank got rows for an expert it does not hold");
      ys.push_back(HfExpert(c, xr.narrow(0, off, n), ew));
      off += n;
    }
  const torch::Tensor yb = EpAllToAll(ep, torch::cat(ys, 0), recv, send);  // [P] in (expert, token) order
  // Step 5: combine as HfMoe: zeros, then per expert ascending its tokens' weighted outputs.
  const torch::Tensor wpair = r.weights.flatten().index_select(0, perm).unsqueeze(1);  // [P, 1]
  torch::Tensor out = torch::zeros_like(xl);
  int64_t start = 0;
  for (int64_t e = 0; e < E; ++e) {
    const int64_t n = ca[e];
    if (n == 0) continue;
    out.index_add_(0, tok.narrow(0, start, n), yb.narrow(0, start, n) * wpair.narrow(0, start, n));
    start += n;
  }
  return out;  // the caller adds HfLatentOut and the shared expert(s) as HfMoe does
}

}  // namespace onboard::backends
