// Node-deduplicated expert dispatch and combine (see probe_node_dedup.h for the legend).
//   Step 1 (source): per remote node, the unique tokens of its pairs and each pair's index among them.
//   Step 2 (inter group): the gateways' metadata: unique rows and pair rows per local rank, the indices.
//   Step 3 (gateway): what it forwards to each local rank: its own pairs, then each remote node's.
//   Step 4 (destination): the received rows back in the plain all-to-all's order.
// Dispatch / Combine then run the exchanges (differentiable: backward = the reverse exchange).
#include "backends/probe_node_dedup.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "backends/proxy_model.h"

namespace onboard::backends {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Synchronous all-to-all over a sub-group; backward sends the gradients back the same way.
class DedupAllToAllFn : public torch::autograd::Function<DedupAllToAllFn> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, int64_t group,
                            std::vector<int64_t> send, std::vector<int64_t> recv) {
    ctx->saved_data["group"] = group;
    ctx->saved_data["send"] = send;
    ctx->saved_data["recv"] = recv;
    return reinterpret_cast<Group*>(group)->AllToAll(x.contiguous(), send, recv);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto* g = reinterpret_cast<Group*>(ctx->saved_data["group"].toInt());
    at::Tensor dx = g->AllToAll(grads[0].contiguous(), ctx->saved_data["recv"].toIntVector(),
                                ctx->saved_data["send"].toIntVector());
    return {dx, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

at::Tensor DedupExchange(Group* g, const at::Tensor& x, const std::vector<int64_t>& send,
                         const std::vector<int64_t>& recv) {
  return DedupAllToAllFn::apply(x, reinterpret_cast<int64_t>(g), send, recv);
}

at::Tensor DedupLongTensor(const std::vector<int64_t>& v, const at::Device& dev) {
  return at::tensor(v, at::kLong).to(dev);
}

std::vector<int64_t> DedupToVector(const at::Tensor& t) {
  const at::Tensor c = t.to(at::kCPU, at::kLong).contiguous();
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

int64_t DedupSum(const std::vector<int64_t>& v) {
  int64_t s = 0;
  for (int64_t x : v) s += x;
  return s;
}

bool DedupDropForward() {
  static const bool fault = [] {
    const char* v = std::getenv("ONBOARD_PROBE_DEDUP_FAULT");
    return v != nullptr && std::string(v) == "drop_forward";
  }();
  return fault;
}

}  // namespace

NodeDedup::NodeDedup(const MoeRouting& R, const at::Tensor& tok, const std::vector<int64_t>& send,
                     const std::vector<int64_t>& recv, int64_t n_tok)
    : inter_(R.ep_inter), intra_(R.ep_intra), n_tok_(n_tok) {
  const int64_t N = inter_->size(), L = intra_->size(), ep = R.ep->size();
  const int64_t ng = inter_->rank(), lg = intra_->rank();
  ONBOARD_ASSERT(N * L == ep && R.ep->rank() == ng * L + lg, "node-dedup groups do not tile the EP group");
  const std::vector<int64_t> t = DedupToVector(tok);
  pairs_ = static_cast<int64_t>(t.size());
  std::vector<int64_t> off(static_cast<size_t>(ep + 1), 0);
  for (int64_t j = 0; j < ep; ++j) off[j + 1] = off[j] + send[j];
  // Step 1: per remote node m, its unique tokens U_m (ascending) and each pair's index in U_m.
  const int64_t H = L + 1;  // header per node: |U_m|, then pairs to each of its local ranks
  std::vector<int64_t> header(static_cast<size_t>(N * H), 0), x1_idx, w1_idx, pidx,
      pos(static_cast<size_t>(n_tok), -1);
  x1_send_.assign(N, 0), w1_send_.assign(N, 0);
  for (int64_t m = 0; m < N; ++m) {
    if (m == ng) continue;  // own node: no slow tier
    const int64_t a = off[m * L], z = off[(m + 1) * L];
    std::vector<int64_t> u(t.begin() + a, t.begin() + z);
    std::sort(u.begin(), u.end());
    u.erase(std::unique(u.begin(), u.end()), u.end());
    for (size_t i = 0; i < u.size(); ++i) pos[u[i]] = static_cast<int64_t>(i);
    for (int64_t p = a; p < z; ++p) pidx.push_back(pos[t[p]]), w1_idx.push_back(p);
    x1_idx.insert(x1_idx.end(), u.begin(), u.end());
    x1_send_[m] = static_cast<int64_t>(u.size()), w1_send_[m] = z - a;
    header[m * H] = x1_send_[m];
    for (int64_t l = 0; l < L; ++l) header[m * H + 1 + l] = send[m * L + l];
  }
  cross_rows_ = DedupSum(x1_send_);
  const at::Device dev = tok.device();
  x1_idx_ = DedupLongTensor(x1_idx, dev), w1_idx_ = DedupLongTensor(w1_idx, dev);
  // Step 2: the gateways' metadata over the inter group (headers, then the pair indices).
  const std::vector<int64_t> hr = DedupToVector(inter_->AllToAll(
      DedupLongTensor(header, dev).view({-1, 1}), std::vector<int64_t>(N, H), std::vector<int64_t>(N, H)));
  x1_recv_.assign(N, 0), w1_recv_.assign(N, 0);
  for (int64_t m = 0; m < N; ++m) {
    x1_recv_[m] = hr[m * H];
    for (int64_t l = 0; l < L; ++l) w1_recv_[m] += hr[m * H + 1 + l];
  }
  const std::vector<int64_t> ir =
      DedupToVector(inter_->AllToAll(DedupLongTensor(pidx, dev).view({-1, 1}), w1_send_, w1_recv_));
  // Step 3: gateway rows, into S = [xl; slow-tier rows] and Sw = [wpair; slow-tier weights]; per local
  // rank l2, the sources of node index m = 0..N-1 with this rank's local index, in that order.
  std::vector<int64_t> xoff(N), woff(N), g, gw, mask;
  for (int64_t m = 0, xo = n_tok, wo = 0; m < N; ++m)
    xoff[m] = xo, woff[m] = wo, xo += x1_recv_[m], wo += w1_recv_[m];
  i2_send_.assign(L, 0);
  for (int64_t l2 = 0; l2 < L; ++l2)
    for (int64_t m = 0; m < N; ++m) {
      if (m == ng) {  // this rank's own pairs to its node's rank l2
        const int64_t d = ng * L + l2;
        for (int64_t p = off[d]; p < off[d + 1]; ++p) g.push_back(t[p]), gw.push_back(p), mask.push_back(1);
        i2_send_[l2] += send[d];
        continue;
      }
      int64_t q = woff[m];
      for (int64_t l = 0; l < l2; ++l) q += hr[m * H + 1 + l];
      const int64_t c = hr[m * H + 1 + l2];
      for (int64_t i = q; i < q + c; ++i)
        g.push_back(xoff[m] + ir[i]), gw.push_back(pairs_ + i), mask.push_back(DedupDropForward() ? 0 : 1);
      i2_send_[l2] += c;
    }
  fwd_rows_ = DedupSum(x1_recv_);
  g_idx_ = DedupLongTensor(g, dev), gw_idx_ = DedupLongTensor(gw, dev);
  if (DedupDropForward()) fwd_mask_ = at::tensor(mask, at::kFloat).to(dev).view({-1, 1});
  // Step 4: the intra rows arrive by gateway local index lg2, then node index m (source m*L + lg2).
  std::vector<int64_t> boff(ep), reorder, inverse;
  i2_recv_.assign(L, 0);
  for (int64_t lg2 = 0, o = 0; lg2 < L; ++lg2)
    for (int64_t m = 0; m < N; ++m)
      boff[m * L + lg2] = o, o += recv[m * L + lg2], i2_recv_[lg2] += recv[m * L + lg2];
  for (int64_t s = 0; s < ep; ++s)
    for (int64_t i = 0; i < recv[s]; ++i) reorder.push_back(boff[s] + i);
  inverse.resize(reorder.size());
  for (size_t i = 0; i < reorder.size(); ++i) inverse[reorder[i]] = static_cast<int64_t>(i);
  reorder_ = DedupLongTensor(reorder, dev), inverse_ = DedupLongTensor(inverse, dev);
}

at::Tensor NodeDedup::Dispatch(const at::Tensor& xl, const at::Tensor& wpair, at::Tensor* w_recv) const {
  // Slow tier: one row per (token, remote node); fast tier: one row per pair.
  const at::Tensor S =
      at::cat({xl, DedupExchange(inter_, xl.index_select(0, x1_idx_), x1_send_, x1_recv_)}, 0);
  at::Tensor fwd = S.index_select(0, g_idx_);
  if (fwd_mask_.defined()) fwd = fwd * fwd_mask_.to(fwd.scalar_type());
  const at::Tensor w = wpair.reshape({-1, 1});
  const at::Tensor Sw =
      at::cat({w, DedupExchange(inter_, w.index_select(0, w1_idx_), w1_send_, w1_recv_)}, 0);
  *w_recv = DedupExchange(intra_, Sw.index_select(0, gw_idx_), i2_send_, i2_recv_).index_select(0, reorder_);
  return DedupExchange(intra_, fwd, i2_send_, i2_recv_).index_select(0, reorder_);
}

at::Tensor NodeDedup::Combine(const at::Tensor& yw) const {
  // Fast tier back to the gateways, which sum each token's rows of their node; slow tier: the sums.
  const at::Tensor back = DedupExchange(intra_, yw.index_select(0, inverse_), i2_recv_, i2_send_);
  const at::Tensor T = at::zeros({n_tok_ + fwd_rows_, yw.size(1)}, back.options()).index_add(0, g_idx_, back);
  const at::Tensor z = DedupExchange(inter_, T.narrow(0, n_tok_, fwd_rows_), x1_recv_, x1_send_);
  return T.narrow(0, 0, n_tok_).index_add(0, x1_idx_, z);
}

}  // namespace onboard::backends
