// FSDP unit autograd function (see fsdp_unit.h).
#include "backends/fsdp_unit.h"

namespace onboard::backends {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

at::Tensor Gather(Group* g, const at::Tensor& shard, int64_t numel) {
  if (numel == 0) return shard;
  return g->AllGather(shard).narrow(0, 0, numel);
}

// Pads a full-size gradient to the shard multiple and reduce-scatters it (shard_like: the shard,
// for dtype and device).
at::Tensor Scatter(Group* g, const at::Tensor& full_grad, int64_t numel, const at::Tensor& shard_like) {
  const int64_t shard = shard_like.numel();
  at::Tensor grad = full_grad.defined() ? full_grad : at::zeros({numel}, shard_like.options());
  const int64_t padded = shard * g->size();
  if (padded > numel) grad = at::constant_pad_nd(grad, {0, padded - numel});
  return g->ReduceScatterSum(grad);
}

// Elements of the unsharded local-experts buffer (or its adapters) of the runner's unit.
int64_t LocalExpertNumel(const UnitRunner& r, bool lora) {
  const int64_t per = lora ? r.unit->expert_lora.numel : r.unit->expert.numel;
  return per * static_cast<int64_t>(r.routing->local_experts.size());
}

class FsdpUnitFn : public torch::autograd::Function<FsdpUnitFn> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& dense,
                            const at::Tensor& lora, const at::Tensor& experts,
                            const at::Tensor& expert_lora, int64_t runner_ptr) {
    auto* r = reinterpret_cast<UnitRunner*>(runner_ptr);
    ctx->saved_data["runner"] = runner_ptr;
    ctx->save_for_backward({x, dense, lora, experts, expert_lora});
    at::Tensor full = Gather(r->fsdp, dense, r->unit->dense.numel);
    at::Tensor full_lora = Gather(r->fsdp, lora, r->unit->lora.numel);
    at::Tensor ex = Gather(r->expert_fsdp, experts, LocalExpertNumel(*r, false));
    at::Tensor exl = Gather(r->expert_fsdp, expert_lora, LocalExpertNumel(*r, true));
    r->routing->record = true;
    return UnitForward(*r->spec, *r->unit, x, full, full_lora, ex, exl, r->lora_scale,
                       *r->routing, *r->inputs);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto* r = reinterpret_cast<UnitRunner*>(ctx->saved_data["runner"].toInt());
    variable_list saved = ctx->get_saved_variables();
    // Step 1: re-gather and rebuild the unit's graph from leaves that stand for its inputs.
    auto leaf = [](const at::Tensor& t, bool grad) {
      at::Tensor l = t.detach();
      if (grad && l.is_floating_point() && l.numel() > 0) l.requires_grad_(true);
      return l;
    };
    std::vector<bool> want(5);
    for (size_t i = 0; i < 5; ++i) want[i] = ctx->needs_input_grad(i);
    at::Tensor x = leaf(saved[0], want[0]);
    at::Tensor full = leaf(Gather(r->fsdp, saved[1], r->unit->dense.numel), want[1]);
    at::Tensor full_lora = leaf(Gather(r->fsdp, saved[2], r->unit->lora.numel), want[2]);
    at::Tensor ex = leaf(Gather(r->expert_fsdp, saved[3], LocalExpertNumel(*r, false)), want[3]);
    at::Tensor exl = leaf(Gather(r->expert_fsdp, saved[4], LocalExpertNumel(*r, true)), want[4]);
    at::Tensor out;
    {
      at::AutoGradMode enable(true);
      r->routing->record = false;  // recomputation: do not count routed tokens twice
      out = UnitForward(*r->spec, *r->unit, x, full, full_lora, ex, exl, r->lora_scale,
                        *r->routing, *r->inputs);
      r->routing->record = true;
    }
    // Step 2: backpropagate through the unit.
    std::vector<at::Tensor> leaves = {x, full, full_lora, ex, exl};
    std::vector<at::Tensor> inputs;
    std::vector<size_t> where;
    for (size_t i = 0; i < 5; ++i)
      if (leaves[i].requires_grad()) { inputs.push_back(leaves[i]); where.push_back(i); }
    variable_list result(6);
    if (inputs.empty() || !out.requires_grad()) return result;
    variable_list g = torch::autograd::grad({out}, inputs, {grads[0]}, /*retain_graph=*/false,
                                            /*create_graph=*/false, /*allow_unused=*/true);
    for (size_t j = 0; j < where.size(); ++j) result[where[j]] = g[j];
    // Step 3: weight gradients of the sharded buffers go back to their shards (dense / adapters
    // over the fsdp group, local experts over the EP replicas).
    if (want[1]) result[1] = Scatter(r->fsdp, result[1], r->unit->dense.numel, saved[1]);
    if (want[2]) result[2] = Scatter(r->fsdp, result[2], r->unit->lora.numel, saved[2]);
    if (want[3]) result[3] = Scatter(r->expert_fsdp, result[3], LocalExpertNumel(*r, false), saved[3]);
    if (want[4]) result[4] = Scatter(r->expert_fsdp, result[4], LocalExpertNumel(*r, true), saved[4]);
    return result;
  }
};

}  // namespace

at::Tensor RunFsdpUnit(UnitRunner* runner, const at::Tensor& x, const at::Tensor& dense_shard,
                       const at::Tensor& lora_shard, const at::Tensor& experts,
                       const at::Tensor& expert_lora) {
  return FsdpUnitFn::apply(x, dense_shard, lora_shard, experts, expert_lora,
                           reinterpret_cast<int64_t>(runner));
}

}  // namespace onboard::backends
