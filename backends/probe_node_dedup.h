// INTERNAL to backends/ (includes LibTorch). Node-deduplicated expert dispatch and combine
// (DeepEP-style; ProbeConfig::ep_dispatcher == "deepep"; issue 18), used by proxy_moe.cpp.
// Legend: EP group of size ep = N nodes x L ranks, EP rank j = n*L + l (node index n inside the
// group, local index l); n_tok source tokens, P (token, expert) pairs in the plain all-to-all's
// order (destination rank, then expert), d = row width. Rows are tokens; counts are rows.
//   inter group: the N EP ranks with this rank's local index (one per node): the slow tier;
//   intra group: the L EP ranks of this rank's node: the fast tier.
// Dispatch: a token crosses to a remote node once (to the gateway there, the rank with the
// sender's local index), with the index of each of its pairs on that node and the pair's router
// weight; the gateway forwards one row per pair to the node's ranks (intra-node). Every expert
// rank then holds exactly the rows of the plain all-to-all, in its order (source rank, then local
// expert): the expert computation is unchanged, bit for bit.
// Combine (the adjoint): each expert rank weights its rows by the pairs' router weights and sends
// them back to the gateway, which sums a token's rows of its node (pre-reduction) and sends one
// row per (token, node) back over the slow tier; the source adds its nodes' partial sums. That
// sum runs in another order than the plain combine's slot-order sum: with top_k = 2 every such sum
// has at most two terms, which commute (bit-exact, measured); with more, the curve differs from the
// plain dispatch in rounding (measured 9.4e-7 relative for top_k = 4), not in maths. Backward = the reverse
// exchanges (autograd through the same gathers and sums), also one slow-tier row per (token, node).
// Test-only fault ONBOARD_PROBE_DEDUP_FAULT=drop_forward: gateways forward zeros instead of the
// rows that came over the slow tier (tests/backends/probe_node_dedup_test.cpp's negative).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "backends/c10d_compat.h"

namespace onboard::backends {

struct MoeRouting;

class NodeDedup {
 public:
  // tok [P]: source token of each pair (plain all-to-all order); send[j] / recv[j]: the plain
  // all-to-all's pair rows to / from EP rank j. Exchanges the gateways' metadata (inter group).
  NodeDedup(const MoeRouting& R, const at::Tensor& tok, const std::vector<int64_t>& send,
            const std::vector<int64_t>& recv, int64_t n_tok);
  // xl [n_tok, d]: source rows; wpair [P]: router weight of each pair. Returns the rows the
  // plain all-to-all delivers ([sum recv, d], its order); *w_recv = their pairs' weights [R, 1].
  at::Tensor Dispatch(const at::Tensor& xl, const at::Tensor& wpair, at::Tensor* w_recv) const;
  // yw [sum recv, d]: weighted expert outputs in Dispatch's order -> [n_tok, d], each token's sum.
  at::Tensor Combine(const at::Tensor& yw) const;
  // Rows this source sent over the slow tier (unique tokens per remote node).
  int64_t cross_node_rows() const { return cross_rows_; }

 private:
  Group* inter_ = nullptr;
  Group* intra_ = nullptr;
  int64_t n_tok_ = 0, pairs_ = 0, cross_rows_ = 0, fwd_rows_ = 0;  // fwd_rows_: slow-tier rows received
  std::vector<int64_t> x1_send_, x1_recv_;                         // inter: unique token rows per node
  std::vector<int64_t> w1_send_, w1_recv_;                         // inter: pair weights per node
  std::vector<int64_t> i2_send_, i2_recv_;                         // intra: pair rows per local rank
  at::Tensor x1_idx_;    // [sum x1_send] source token of each slow-tier row
  at::Tensor w1_idx_;    // [sum w1_send] pair of each slow-tier weight
  at::Tensor g_idx_;     // gateway: rows of [xl; received] forwarded, in intra send order
  at::Tensor gw_idx_;    // gateway: the same for the weights, into [wpair; received]
  at::Tensor fwd_mask_;  // fault drop_forward: 0 on forwarded rows (undefined otherwise)
  at::Tensor reorder_;   // destination: received intra rows -> plain order
  at::Tensor inverse_;   // its inverse
};

}  // namespace onboard::backends
