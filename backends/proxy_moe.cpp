// Routed MoE of a proxy layer with expert parallelism (see proxy_model.h MoeForward).
// Legend: b sequences, T tokens, D hidden, E experts, n = b*T tokens, P = n*top_k (token, expert)
// pairs, d = latent width (or D). Rows are tokens; counts are rows.
#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>
#include <algorithm>
#include <limits>
#include <optional>

#include "backends/c10d_compat.h"
#include "backends/ep_all_to_all.h"
#include "backends/ordered_sum.h"
#include "backends/probe_node_dedup.h"
#include "backends/probe_tp.h"
#include "backends/proxy_moe_autograd.h"
#include "backends/proxy_weights.h"

namespace onboard::backends {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Posts rows to the EP ranks; without overlap the exchange is waited at once (all of it exposed).
// The caller builds the same ops in the same order either way, then AllToAllWaitFn.
AllToAllHandle PostAllToAll(const MoeRouting& R, const at::Tensor& rows, const std::vector<int64_t>& send,
                            const std::vector<int64_t>& recv) {
  AllToAllHandle h = R.ep->AllToAllStart(rows.detach(), send, recv);
  if (!R.overlap) h.Wait();
  return h;
}

// Node-limited routing (DeepSeek-V3): keeps the selection scores of the M nodes with the highest
// sum of their top max(1, k/M) scores and sets the others' to -inf, so the top-k that follows picks
// inside those nodes. choice [n, E]; node_of[e] in [0, nodes). Ties go to the lower node id.
at::Tensor LimitToNodes(const at::Tensor& choice, const std::vector<int64_t>& node_of, int64_t M, int64_t k) {
  const int64_t nodes = *std::max_element(node_of.begin(), node_of.end()) + 1;
  if (M >= nodes) return choice;
  const int64_t per = std::max<int64_t>(1, k / M);
  at::Tensor node_t = at::tensor(node_of, at::kLong).to(choice.device());
  std::vector<at::Tensor> node_score;
  for (int64_t n = 0; n < nodes; ++n) {
    at::Tensor members = at::nonzero(node_t == n).flatten();
    at::Tensor s = choice.index_select(1, members);
    node_score.push_back(std::get<0>(s.sort(true, -1, true)).narrow(-1, 0, std::min(per, s.size(1))).sum(-1));
  }
  at::Tensor keep = std::get<1>(at::stack(node_score, 1).sort(true, -1, true)).narrow(-1, 0, M);  // [n, M]
  at::Tensor node_keep =
      at::zeros({choice.size(0), nodes}, choice.options().dtype(at::kBool)).scatter_(1, keep, true);
  at::Tensor mask = node_keep.index_select(1, node_t);  // [n, E]
  return choice.masked_fill(mask.logical_not(), -std::numeric_limits<double>::infinity());
}

// This MoE layer's expert -> EP rank and expert -> node: R's, or, with a per-layer placement
// (ProbeConfig::expert_placement with one block of E per MoE layer), this layer's block.
struct LayerPlacement {
  std::vector<int64_t> placement, expert_node;
};

LayerPlacement PlacementOfLayer(const ProxySpec& s, const UnitLayout& u, const MoeRouting& R) {
  const int64_t E = s.num_experts;
  LayerPlacement lp{R.placement, R.expert_node};
  if (static_cast<int64_t>(R.placement.size()) > E) {
    const auto moe_before =
        std::count_if(s.layers.begin(), s.layers.begin() + u.layer,
                      [](const ProxyLayer& l) { return l.channel == ProxyChannel::kMoE; });
    lp.placement.assign(R.placement.begin() + moe_before * E, R.placement.begin() + (moe_before + 1) * E);
    lp.expert_node.assign(R.expert_node.begin() + moe_before * E,
                          R.expert_node.begin() + (moe_before + 1) * E);
  }
  return lp;
}

// Step 1's result: each token's top-k experts and their gate weights, [n, k] each. The router's
// intermediates are kept with them until the layer returns (the live-tensor peak counts them).
struct TopK {
  at::Tensor itop, wtop;
  at::Tensor logits, scores, choice;
};

// Step 1: router in fp32; top-k experts and their weights per token. x [n, D].
TopK RouteTokens(const ProxySpec& s, const UnitLayout& u, const Weights& W, const MoeRouting& R,
                 const at::Tensor& x, const std::vector<int64_t>& expert_node) {
  const int64_t E = s.num_experts, k = s.top_k;
  TopK top;
  at::Tensor& logits = top.logits;
  at::Tensor& scores = top.scores;
  at::Tensor& choice = top.choice;
  logits = W.Lin("router", x.scalar_type() == at::kDouble ? x : x.to(at::kFloat));
  scores = s.router == RouterActivation::kSigmoid ? at::sigmoid(logits) : at::softmax(logits, -1);
  // Top-k by a stable descending sort: equal scores go to the lower expert id on every layout.
  // The balancing bias (if any) moves the choice, not the gate weights.
  choice = scores;
  if (R.score_bias != nullptr) {
    auto it = R.score_bias->find(u.layer);
    if (it != R.score_bias->end()) choice = scores + it->second.to(scores.device(), scores.scalar_type());
  }
  if (R.random_route_seed != 0) {  // random_router control: the choice ignores the router
    at::Generator gen = at::detail::createCPUGenerator(R.random_route_seed + static_cast<uint64_t>(u.layer) *
                                                                                 0x9E3779B97F4A7C15ull);
    choice = at::rand({x.size(0), E}, gen, at::TensorOptions().dtype(at::kFloat)).to(scores.device());
  }
  if (R.max_route_nodes > 0) choice = LimitToNodes(choice, expert_node, R.max_route_nodes, k);
  top.itop = std::get<1>(choice.sort(/*stable=*/true, -1, /*descending=*/true)).narrow(-1, 0, k);
  top.wtop = scores.gather(-1, top.itop);
  if (s.renormalize) top.wtop = top.wtop / (top.wtop.sum(-1, true) + 1e-20);
  top.wtop = top.wtop * s.routed_scaling;
  return top;
}

// Step 1 (recorded passes only): the routing as chosen, read only, into the co-activation
// recorder and the per-expert token counts (summed over the micro-batches of the step).
void RecordRouting(const ProxySpec& s, const UnitLayout& u, const MoeRouting& R, const at::Tensor& itop,
                   const std::vector<int64_t>& placement) {
  const int64_t E = s.num_experts, k = s.top_k;
  if (R.record && R.coact != nullptr) {
    const at::Tensor top = itop.to(at::kCPU, at::kLong).contiguous();
    R.coact->RecordRouting(u.layer, top.data_ptr<int64_t>(), top.size(0), k, placement);
  }
  if (R.record && R.load != nullptr) {
    at::Tensor cnt = at::bincount(itop.flatten(), {}, E);
    auto& row = (*R.load)[u.layer];
    row.resize(static_cast<size_t>(E), 0);
    for (int64_t e = 0; e < E; ++e) row[static_cast<size_t>(e)] += cnt[e].item<int64_t>();
  }
}

// Step 3's result: the (token, expert) pairs in destination order.
struct PairOrder {
  at::Tensor perm;      // [P] pairs sorted by ordinal (stable)
  at::Tensor tok;       // [P] source token of each pair, in that order
  at::Tensor counts;    // [el * ep] pairs per ordinal
  at::Tensor ord, key;  // expert -> ordinal [E], each pair's ordinal [P] (kept until the layer returns)
  int64_t el = 0;       // slots per EP rank
};

// Step 3: order (token, expert) pairs by destination rank, then expert (ordinal = position in
// the list "experts of EP rank 0 ascending, of rank 1 ascending, ...").
// Redundant experts (R.log2phy, probe_replicas.h): the ordinal is this source's physical slot.
PairOrder OrderPairs(const ProxySpec& s, const MoeRouting& R, const at::Tensor& itop,
                     const std::vector<int64_t>& placement) {
  const int64_t E = s.num_experts, k = s.top_k, ep = R.ep->size();
  std::vector<int64_t> ordinal(static_cast<size_t>(E));
  if (!R.log2phy.empty()) {
    ordinal = R.log2phy;
  } else {
    int64_t pos = 0;
    for (int64_t r = 0; r < ep; ++r)
      for (int64_t e = 0; e < E; ++e)
        if (placement[static_cast<size_t>(e)] == r) ordinal[static_cast<size_t>(e)] = pos++;
  }
  PairOrder po;
  po.el = R.log2phy.empty() ? E / ep : R.slots_per_rank;
  po.ord = at::tensor(ordinal, at::kLong).to(itop.device());
  po.key = po.ord.index_select(0, itop.flatten());  // [P]
  po.perm = std::get<1>(po.key.sort(/*stable=*/true, 0, false));
  po.tok = at::arange(itop.size(0), itop.options()).repeat_interleave(k).index_select(0, po.perm);
  po.counts = at::bincount(po.key, {}, po.el * ep);  // per ordinal
  return po;
}

// Step 4's counts: pairs sent to / received from each EP rank, and the received per-expert
// counts [ep source, el] (rc_cpu: on the CPU, contiguous).
struct PairCounts {
  at::Tensor recv_counts, rc_cpu;
  std::vector<int64_t> send, recv;
};

// Step 4 (counts): exchange per-expert counts; the rows' split sizes are the actual counts.
PairCounts ExchangeCounts(const MoeRouting& R, const PairOrder& po) {
  const int64_t ep = R.ep->size(), el = po.el;
  PairCounts pc;
  pc.recv_counts =
      R.ep->AllToAll(po.counts.view({el * ep, 1}), std::vector<int64_t>(static_cast<size_t>(ep), el),
                     std::vector<int64_t>(static_cast<size_t>(ep), el))
          .view({ep, el});
  pc.rc_cpu = pc.recv_counts.to(at::kCPU).contiguous();  // [ep source, el]
  const auto rc = pc.rc_cpu.accessor<int64_t, 2>();
  pc.send.assign(static_cast<size_t>(ep), 0);
  pc.recv.assign(static_cast<size_t>(ep), 0);
  for (int64_t r = 0; r < ep; ++r) {
    pc.send[static_cast<size_t>(r)] = po.counts.narrow(0, r * el, el).sum().item<int64_t>();
    for (int64_t j = 0; j < el; ++j) pc.recv[static_cast<size_t>(r)] += rc[r][j];
  }
  return pc;
}

// Step 4's rows: what this rank received for its experts [R, d] (and, node-dedup, their pairs'
// router weights), the shared expert's hidden activations, and the posted rows (kept alive with
// the caller's handle until the layer returns).
struct Dispatched {
  at::Tensor xsend, xr, w_recv, sh_h;
};

// Step 4 (rows) and 4b: the token rows go to their experts' EP ranks (node-dedup: synchronous,
// probe_node_dedup.h); the shared expert's up-projection (TP column-parallel) runs while the
// dispatch is in flight; then the dispatch is waited. *dispatch: the caller's handle.
Dispatched DispatchRows(const ProxySpec& s, const Weights& W, const MoeRouting& R, const NodeDedup* dedup,
                        const at::Tensor& x, const at::Tensor& xl, const TopK& top, const PairOrder& po,
                        const PairCounts& pc, AllToAllHandle* dispatch) {
  Dispatched d;
  if (dedup != nullptr) {
    d.xr = dedup->Dispatch(xl, top.wtop.flatten().index_select(0, po.perm), &d.w_recv);
  } else {
    d.xsend = xl.index_select(0, po.tok);
    *dispatch = PostAllToAll(R, d.xsend, pc.send, pc.recv);
  }
  if (s.num_shared > 0) {
    const at::Tensor xs = TpCopyIn(R.tp, x);
    d.sh_h = at::silu(W.Lin("sh_w1", xs)) * W.Lin("sh_w3", xs);  // SwiGlu's first half (proxy_weights.h)
  }
  if (dedup == nullptr)
    d.xr = AllToAllWaitFn::apply(d.xsend, reinterpret_cast<int64_t>(dispatch),
                                 reinterpret_cast<int64_t>(R.ep), pc.send, pc.recv);  // [R, d]
  return d;
}

// Step 5's result: the experts' outputs in received order (yr [R, d]), with the intermediates that
// are kept until the layer returns (the live-tensor peak counts them).
struct ExpertRows {
  at::Tensor local_of_row, by_e, xe, ex_rows, exl_rows;
  std::vector<at::Tensor> ys;
  at::Tensor ye, yr;
};

// Step 5: received rows are grouped by source then local expert; regroup by expert (stable:
// each expert's rows stay grouped by source) and run each expert over its sources' rows.
ExpertRows RunLocalExperts(const UnitLayout& u, const MoeRouting& R, const at::Tensor& experts,
                           const at::Tensor& expert_lora, double lora_scale, const at::Tensor& xr,
                           const at::Tensor& itop, const PairOrder& po, const PairCounts& pc) {
  const int64_t ep = R.ep->size(), el = po.el;
  const auto rc = pc.rc_cpu.accessor<int64_t, 2>();
  ExpertRows out;
  out.local_of_row = at::arange(el, itop.options()).repeat({ep}).repeat_interleave(pc.recv_counts.flatten());
  out.by_e = std::get<1>(out.local_of_row.sort(true, 0, false));
  out.xe = TpExpertIn(R.tp, xr.index_select(0, out.by_e));  // expert TP (probe_tp.h); else xe
  const at::Tensor& xe = out.xe;
  const int64_t n_local = experts.numel() / std::max<int64_t>(1, u.expert.numel);
  ONBOARD_ASSERT(n_local == el, "local expert buffers hold " + std::to_string(n_local) + " experts, EP expects " + std::to_string(el));
  out.ex_rows = SyncReplicas(experts, R.replica_sync).view({el, u.expert.numel});
  out.exl_rows = u.expert_lora.numel > 0
                     ? SyncReplicas(expert_lora, R.replica_sync).view({el, u.expert_lora.numel})
                     : at::Tensor();
  const at::Tensor &ex_rows = out.ex_rows, &exl_rows = out.exl_rows;
  std::vector<at::Tensor>& ys = out.ys;
  int64_t start = 0;
  for (int64_t j = 0; j < el; ++j) {
    std::vector<int64_t> seg(static_cast<size_t>(ep));
    int64_t c = 0;
    for (int64_t src = 0; src < ep; ++src) c += (seg[static_cast<size_t>(src)] = rc[src][j]);
    const at::Tensor wl = exl_rows.defined() ? exl_rows[j] : experts.new_zeros({0});
    // Every local expert goes through the function, even with no rows: its backward then gives
    // the expert a (zero) gradient on every layout alike.
    ys.push_back(ExpertSegments(xe.narrow(0, start, c), ex_rows[j], wl, u, lora_scale, seg));
    start += c;
  }
  out.ye = TpExpertOut(R.tp, ys.empty() ? xe * 0.0 : at::cat(ys, 0));  // expert TP: summed over TP
  out.yr = at::empty_like(out.ye).index_copy(0, out.by_e, out.ye);     // back to received order
  return out;
}

// Step 6 and 6b: send results back; put them back in (token, slot) order and combine with the
// router weights, summing each token's top_k outputs in slot order (the same order on every
// layout). Node-dedup: weighted at the expert rank, summed per node at the gateway
// (probe_node_dedup.h). The shared expert's down-projection and its TP all-reduce run while the
// combine is in flight (*sh_y). Returns [n, d]. *combine: the caller's handle.
at::Tensor CombineRows(const ProxySpec& s, const Weights& W, const MoeRouting& R, const NodeDedup* dedup,
                       const at::Tensor& yr, const Dispatched& d, const TopK& top, const PairOrder& po,
                       const PairCounts& pc, AllToAllHandle* combine, at::Tensor* sh_y) {
  at::Tensor y;
  if (dedup != nullptr) y = dedup->Combine(yr * d.w_recv.to(yr.scalar_type()));  // [n, d]
  *combine = dedup != nullptr ? AllToAllHandle() : PostAllToAll(R, yr, pc.recv, pc.send);
  if (s.num_shared > 0) *sh_y = TpReduceOut(R.tp, W.Lin("sh_w2", d.sh_h));  // TP: row-parallel
  if (dedup == nullptr) {
    at::Tensor yb =
        AllToAllWaitFn::apply(yr, reinterpret_cast<int64_t>(combine), reinterpret_cast<int64_t>(R.ep),
                              pc.recv, pc.send);  // [P, d] perm order
    at::Tensor ypair =
        at::empty_like(yb).index_copy(0, po.perm, yb).view({top.itop.size(0), s.top_k, yb.size(1)});
    y = (ypair * top.wtop.unsqueeze(-1).to(yb.scalar_type())).sum(1);  // [n, d]
  }
  return y;
}

}  // namespace

at::Tensor MoeForward(const ProxySpec& s, const UnitLayout& u, const Weights& W, const at::Tensor& experts,
                      const at::Tensor& expert_lora, double lora_scale, const at::Tensor& h, MoeRouting& R) {
  const int64_t b = h.size(0), T = h.size(1), D = s.hidden;
  const LayerPlacement lp = PlacementOfLayer(s, u, R);
  at::Tensor x = h.reshape({b * T, D});
  // Step 1: router in fp32; top-k experts and their weights per token (recorded passes: the
  // routing and the per-expert counts).
  const TopK top = RouteTokens(s, u, W, R, x, lp.expert_node);
  RecordRouting(s, u, R, top.itop, lp.placement);
  // Step 2: latent down-projection; routed experts run at latent width (the latent norm acts on
  // their weighted sum, Step 7).
  const at::Tensor xl = s.latent_dim > 0 ? W.Lin("lat_down", x) : x;
  // Step 3: (token, expert) pairs in destination order.
  const PairOrder po = OrderPairs(s, R, top.itop, lp.placement);
  // Step 4: exchange per-expert counts, then the token rows (split sizes = actual counts).
  const PairCounts pc = ExchangeCounts(R, po);
  // Node-deduplicated dispatch (ProbeConfig::ep_dispatcher deepep, probe_node_dedup.h): the same
  // received rows in the same order, one slow-tier row per (token, remote node); synchronous.
  std::optional<NodeDedup> dedup;
  if (R.ep_inter != nullptr) dedup.emplace(R, po.tok, pc.send, pc.recv, b * T);
  if (R.record && R.coact != nullptr)
    R.coact->RecordDispatch(u.layer, pc.send, xl.size(1) * xl.element_size(),
                            dedup ? dedup->cross_node_rows() : -1);
  const NodeDedup* dd = dedup ? &*dedup : nullptr;
  AllToAllHandle dispatch, combine;  // posted exchanges: live until the layer returns
  // Step 4b (inside): the shared expert's up-projection, under the dispatch in flight.
  const Dispatched d = DispatchRows(s, W, R, dd, x, xl, top, po, pc, &dispatch);
  // Step 5: each local expert over its sources' rows.
  const ExpertRows er = RunLocalExperts(u, R, experts, expert_lora, lora_scale, d.xr, top.itop, po, pc);
  // Step 6: combine (6b inside: the shared expert's down-projection, under the combine in flight).
  at::Tensor sh_y;
  at::Tensor y = CombineRows(s, W, R, dd, er.yr, d, top, po, pc, &combine, &sh_y);
  // Step 7: latent MoE: the experts' weighted sum is RMSNorm'd, then up-projected, as the K3 model
  // computes it (hf_moe.cpp; the norm does not commute with the sum).
  if (s.latent_dim > 0) y = W.Lin("lat_up", s.latent_norm ? Rms(y, W["lat_norm"]) : y);
  if (s.num_shared > 0) y = y + sh_y;
  return y.view({b, T, D});
}

}  // namespace onboard::backends
