// Autograd functions of the proxy's routed experts (backends/proxy_moe_autograd.h).
// Legend: R received rows, d = latent width (or hidden); S slots per EP rank, P = S * ep physical slots.
#include "backends/proxy_moe_autograd.h"

#include "backends/ordered_sum.h"
#include "backends/proxy_weights.h"

namespace onboard::backends {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Expert FFN (SwiGLU at latent width) over rows received from `seg.size()` EP source ranks, rows
// grouped by source in rank order (seg[s] rows from source s).
//   forward:  each source's rows alone: the same GEMM shapes as that source's micro-batch has on
//             a single process, whatever the layout;
//   backward: per-source weight gradients, summed over sources in the canonical pairwise order
//             (ordered_sum.h; empty sources count as zeros), so the expert's gradient has the bits
//             of the one-process micro-batch accumulation.
// x [R, d]; w: one expert's flat weights; wl: its flat adapters ([0] without LoRA).
class ExpertSegmentsFn : public torch::autograd::Function<ExpertSegmentsFn> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& w,
                            const at::Tensor& wl, int64_t unit_ptr, double lora_scale,
                            std::vector<int64_t> seg) {
    ctx->save_for_backward({x, w, wl});
    ctx->saved_data["unit"] = unit_ptr;
    ctx->saved_data["lora_scale"] = lora_scale;
    ctx->saved_data["seg"] = seg;
    const auto* u = reinterpret_cast<const UnitLayout*>(unit_ptr);
    const Weights W = ExpertWeights(*u, w, wl, lora_scale);
    std::vector<at::Tensor> ys;
    int64_t off = 0;
    for (int64_t c : seg) {
      if (c > 0) ys.push_back(SwiGlu(W, "", x.narrow(0, off, c)));
      off += c;
    }
    return ys.empty() ? x.new_zeros({0, x.size(1)}) : at::cat(ys, 0);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    variable_list saved = ctx->get_saved_variables();
    const auto* u = reinterpret_cast<const UnitLayout*>(ctx->saved_data["unit"].toInt());
    const double lora_scale = ctx->saved_data["lora_scale"].toDouble();
    const std::vector<int64_t> seg = ctx->saved_data["seg"].toIntVector();
    const bool want_w = ctx->needs_input_grad(1), want_wl = ctx->needs_input_grad(2) && saved[2].numel() > 0;
    TreeAccumulator dw, dwl;
    std::vector<at::Tensor> dx;
    int64_t off = 0;
    for (int64_t c : seg) {
      if (c == 0) {  // this source sent nothing: a zero leaf keeps the tree's shape
        if (want_w) dw.Push(at::zeros_like(saved[1]));
        if (want_wl) dwl.Push(at::zeros_like(saved[2]));
        continue;
      }
      at::AutoGradMode enable(true);
      at::Tensor xs = saved[0].narrow(0, off, c).detach().requires_grad_(true);
      at::Tensor w = saved[1].detach().requires_grad_(want_w);
      at::Tensor wl = saved[2].detach().requires_grad_(want_wl);
      at::Tensor y = SwiGlu(ExpertWeights(*u, w, wl, lora_scale), "", xs);
      std::vector<at::Tensor> in{xs};
      if (want_w) in.push_back(w);
      if (want_wl) in.push_back(wl);
      variable_list g = torch::autograd::grad({y}, in, {grads[0].narrow(0, off, c)}, false, false, true);
      auto def = [](const at::Tensor& t, const at::Tensor& like) {
        return t.defined() ? t : at::zeros_like(like);
      };
      dx.push_back(def(g[0], xs));
      size_t k = 1;
      if (want_w) dw.Push(def(g[k++], w));
      if (want_wl) dwl.Push(def(g[k++], wl));
      off += c;
    }
    at::Tensor dxa = dx.empty() ? at::zeros_like(saved[0]) : at::cat(dx, 0);
    return {dxa,
            want_w ? dw.Take() : at::Tensor(),
            want_wl ? dwl.Take() : at::Tensor(),
            at::Tensor(),
            at::Tensor(),
            at::Tensor()};
  }

 private:
  static Weights ExpertWeights(const UnitLayout& u, const at::Tensor& w, const at::Tensor& wl,
                               double lora_scale) {
    Weights W;
    W.lora_scale = lora_scale;
    AddViews(W, u.expert, w);
    if (wl.numel() > 0) AddViews(W, u.expert_lora, wl);
    return W;
  }
};

// Redundant experts (probe_replicas.h): identity forward; backward all-gathers every physical
// slot's weight gradient over EP and gives each slot the pairwise sum (ordered_sum.h) over its
// expert's copies in replica order. A replica's gradient covers one aligned block of sources, so
// the sum has the bits of the expert's gradient without replicas. w: this rank's slots, flat.
class ReplicaGradSyncFn : public torch::autograd::Function<ReplicaGradSyncFn> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& w, int64_t sync_ptr) {
    ctx->saved_data["sync"] = sync_ptr;
    return w.clone();
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto* s = reinterpret_cast<const ReplicaGradSync*>(ctx->saved_data["sync"].toInt());
    const int64_t S = s->slots_per_rank, me = s->ep->rank();
    const at::Tensor g = grads[0].contiguous();
    const at::Tensor all = s->ep->AllGather(g).view({S * s->ep->size(), -1});  // [P, numel per slot]
    std::vector<at::Tensor> out;
    for (int64_t j = 0; j < S; ++j) {
      const auto& copies = s->copies[static_cast<size_t>(s->phy2log[static_cast<size_t>(me * S + j)])];
      TreeAccumulator acc;
      for (int64_t p : copies) acc.Push(all[p]);
      out.push_back(acc.Take());
    }
    return {at::stack(out).view_as(grads[0]), at::Tensor()};
  }
};

}  // namespace

at::Tensor SyncReplicas(const at::Tensor& w, const ReplicaGradSync* sync) {
  if (sync == nullptr || w.numel() == 0 || !w.requires_grad()) return w;
  return ReplicaGradSyncFn::apply(w, reinterpret_cast<int64_t>(sync));
}

at::Tensor ExpertSegments(const at::Tensor& x, const at::Tensor& w, const at::Tensor& wl, const UnitLayout& u,
                          double lora_scale, std::vector<int64_t> seg) {
  return ExpertSegmentsFn::apply(x, w, wl, reinterpret_cast<int64_t>(&u), lora_scale, std::move(seg));
}

}  // namespace onboard::backends
