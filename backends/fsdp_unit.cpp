// FSDP unit autograd function (see fsdp_unit.h).
#include "backends/fsdp_unit.h"

#include "backends/tensor_memory_compat.h"

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

// The unit is recomputed as a whole: a layer whose two block kinds are both "full".
bool RecomputeUnit(const UnitRunner& r) {
  return r.unit->kind == UnitKind::kLayer && r.mixer == Recompute::kFull && r.channel == Recompute::kFull;
}

// Gathered buffer i (1..4 = dense, lora, experts, expert_lora) of the unit from its shard.
at::Tensor GatherBuffer(const UnitRunner& r, size_t i, const at::Tensor& shard) {
  switch (i) {
    case 1:
      return Gather(r.fsdp, shard, r.unit->dense.numel);
    case 2:
      return Gather(r.fsdp, shard, r.unit->lora.numel);
    case 3:
      return Gather(r.expert_fsdp, shard, LocalExpertNumel(r, false));
    default:
      return Gather(r.expert_fsdp, shard, LocalExpertNumel(r, true));
  }
}

// Step 3 of both backward paths: weight gradients of the sharded buffers go back to their shards
// (dense / adapters over the fsdp group, local experts over the EP replicas).
void ScatterGrads(const UnitRunner& r, const std::vector<bool>& want, const variable_list& shards,
                  variable_list& result) {
  if (want[1]) result[1] = Scatter(r.fsdp, result[1], r.unit->dense.numel, shards[1]);
  if (want[2]) result[2] = Scatter(r.fsdp, result[2], r.unit->lora.numel, shards[2]);
  if (want[3]) result[3] = Scatter(r.expert_fsdp, result[3], LocalExpertNumel(r, false), shards[3]);
  if (want[4]) result[4] = Scatter(r.expert_fsdp, result[4], LocalExpertNumel(r, true), shards[4]);
}

// Gradients of `out` (seeded with g_out) with respect to the leaves that require grad, placed at
// their input index (6 slots: x, 4 buffers, runner).
variable_list GradsAt(const at::Tensor& out, const at::Tensor& g_out, const std::vector<at::Tensor>& leaves) {
  std::vector<at::Tensor> inputs;
  std::vector<size_t> where;
  for (size_t i = 0; i < leaves.size(); ++i)
    if (leaves[i].requires_grad()) {
      inputs.push_back(leaves[i]);
      where.push_back(i);
    }
  variable_list result(6);
  if (inputs.empty() || !out.requires_grad()) return result;
  variable_list g = torch::autograd::grad({out}, inputs, {g_out}, /*retain_graph=*/false,
                                          /*create_graph=*/false, /*allow_unused=*/true);
  for (size_t j = 0; j < where.size(); ++j) result[where[j]] = g[j];
  return result;
}

// Kept path (see fsdp_unit.h): forward with grad, gathered bytes freed until the backward.
class KeptUnitFn : public torch::autograd::Function<KeptUnitFn> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& dense,
                            const at::Tensor& lora, const at::Tensor& experts, const at::Tensor& expert_lora,
                            int64_t runner_ptr) {
    auto* r = reinterpret_cast<UnitRunner*>(runner_ptr);
    ctx->saved_data["runner"] = runner_ptr;
    ctx->save_for_backward({dense, lora, experts, expert_lora});
    // Step 1: leaves for the input and the gathered buffers; the unit's graph hangs off them.
    const std::vector<at::Tensor> shards = {x, dense, lora, experts, expert_lora};
    std::vector<at::Tensor> leaves(5);
    for (size_t i = 0; i < 5; ++i) {
      at::Tensor l = (i == 0 ? x : GatherBuffer(*r, i, shards[i])).detach();
      if (shards[i].requires_grad() && l.is_floating_point() && l.numel() > 0) l.requires_grad_(true);
      leaves[i] = l;
    }
    UnitInputs in = *r->inputs;
    in.mixer_recompute = r->unit->kind == UnitKind::kLayer ? r->mixer : Recompute::kNone;
    in.channel_recompute = r->unit->kind == UnitKind::kLayer ? r->channel : Recompute::kNone;
    at::Tensor out;
    {
      at::AutoGradMode enable(true);
      r->routing->record = true;
      out = UnitForward(*r->spec, *r->unit, leaves[0], leaves[1], leaves[2], leaves[3], leaves[4],
                        r->lora_scale, *r->routing, in);
    }
    // Step 2: reshard after forward: the gathered bytes go; the graph's saved views stay.
    for (size_t i = 1; i < 5; ++i)
      if (leaves[i].numel() > 0 && !leaves[i].storage().is_alias_of(shards[i].storage()))
        FreeStorage(leaves[i]);
    ctx->saved_data["out"] = out;
    for (size_t i = 0; i < 5; ++i) ctx->saved_data["leaf" + std::to_string(i)] = leaves[i];
    return out.detach();
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto* r = reinterpret_cast<UnitRunner*>(ctx->saved_data["runner"].toInt());
    variable_list saved = ctx->get_saved_variables();
    const variable_list shards = {at::Tensor(), saved[0], saved[1], saved[2], saved[3]};
    std::vector<at::Tensor> leaves(5);
    for (size_t i = 0; i < 5; ++i) leaves[i] = ctx->saved_data["leaf" + std::to_string(i)].toTensor();
    // Step 1: re-gather into the freed storages.
    for (size_t i = 1; i < 5; ++i)
      if (leaves[i].numel() > 0 && leaves[i].storage().data_ptr().get() == nullptr)
        RefillStorage(leaves[i], GatherBuffer(*r, i, shards[i]));
    // Step 2: backpropagate the kept graph.
    const at::Tensor out = ctx->saved_data["out"].toTensor();
    variable_list result = GradsAt(out, grads[0], leaves);
    ctx->saved_data.erase("out");
    for (size_t i = 0; i < 5; ++i) ctx->saved_data.erase("leaf" + std::to_string(i));
    // Step 3: to the shards.
    std::vector<bool> want(5);
    for (size_t i = 0; i < 5; ++i) want[i] = ctx->needs_input_grad(i);
    ScatterGrads(*r, want, shards, result);
    return result;
  }
};

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
    variable_list result = GradsAt(out, grads[0], {x, full, full_lora, ex, exl});
    // Step 3: to the shards.
    ScatterGrads(*r, want, saved, result);
    return result;
  }
};

}  // namespace

at::Tensor RunFsdpUnit(UnitRunner* runner, const at::Tensor& x, const at::Tensor& dense_shard,
                       const at::Tensor& lora_shard, const at::Tensor& experts,
                       const at::Tensor& expert_lora) {
  const int64_t ptr = reinterpret_cast<int64_t>(runner);
  if (RecomputeUnit(*runner)) return FsdpUnitFn::apply(x, dense_shard, lora_shard, experts, expert_lora, ptr);
  return KeptUnitFn::apply(x, dense_shard, lora_shard, experts, expert_lora, ptr);
}

}  // namespace onboard::backends
