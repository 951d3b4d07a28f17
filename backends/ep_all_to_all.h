// INTERNAL to backends/ (includes LibTorch). The EP token exchange attached to autograd, one home for
// the proxy's routed MoE (proxy_moe.cpp) and the real-weights probe's (hf_moe_ep.cpp).
// Rows are tokens (or (token, expert) pairs); send / recv: rows per EP rank, in rank order.
#pragma once

#include <torch/torch.h>

#include <vector>

#include "backends/c10d_compat.h"

namespace onboard::backends {

// Exchange of token rows between EP ranks, posted beforehand (Group::AllToAllStart, so that
// compute can run while it is in flight: ProbeConfig::moe_overlap): forward returns what the
// posted exchange `handle` delivers (AllToAllHandle::Wait); backward runs the reverse exchange,
// synchronously. x: the rows that were posted (their autograd graph).
class AllToAllWaitFn : public torch::autograd::Function<AllToAllWaitFn> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, int64_t handle,
                            int64_t group, std::vector<int64_t> send, std::vector<int64_t> recv) {
    (void)x;
    ctx->saved_data["group"] = group;
    ctx->saved_data["send"] = send;
    ctx->saved_data["recv"] = recv;
    return reinterpret_cast<AllToAllHandle*>(handle)->Wait();
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto* g = reinterpret_cast<Group*>(ctx->saved_data["group"].toInt());
    at::Tensor dx =
        g->AllToAll(grads[0], ctx->saved_data["recv"].toIntVector(), ctx->saved_data["send"].toIntVector());
    return {dx, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

// The synchronous exchange with autograd: rows of x split by send -> rows received split by recv
// (backward: the reverse exchange).
inline at::Tensor EpAllToAll(Group& group, const at::Tensor& x, const std::vector<int64_t>& send,
                             const std::vector<int64_t>& recv) {
  AllToAllHandle h = group.AllToAllStart(x.detach(), send, recv);
  return AllToAllWaitFn::apply(x, reinterpret_cast<int64_t>(&h), reinterpret_cast<int64_t>(&group), send,
                               recv);
}

}  // namespace onboard::backends
