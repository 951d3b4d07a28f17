// INTERNAL to backends/ (includes LibTorch). FSDP of the real-weights probe's frozen base (`--fsdp
// F`, probe_weights.h): every rank holds only its dim-0 chunk (HfFsdpRows, torch.chunk's split) of
// each frozen tensor, read as a window by MapHfSlice; a unit (the embedding, one decoder layer, the
// final norm + head) is all-gathered just before it runs and released right after. As an autograd
// function (HfFsdpUnitFn, the shape of fsdp_unit.h's full-recompute path): forward gathers, runs the
// unit without keeping its graph, releases (only the unit's input is saved); backward gathers
// again, recomputes the unit with grad, backpropagates to the input and the unit's adapters,
// releases. The base is frozen: no weight gradient, so no reduce-scatter. The adapters stay whole
// on every rank (small).
// Exchange: one all-gather per unit and use of [F x the unit's padded chunks] (chunks padded to
// rank 0's row count, the largest); the row counts of every rank are all-gathered once.
#pragma once

#include <functional>
#include <vector>

#include <torch/torch.h>

#include "backends/c10d_compat.h"
#include "backends/hf_model.h"

namespace onboard::backends {

class HfFsdp {
 public:
  explicit HfFsdp(Group& group) : group_(group) {}
  // A unit over the tensors `slots` point at (each now holds this rank's chunk). Returns its index.
  size_t AddUnit(const std::vector<torch::Tensor*>& slots);
  // After the last AddUnit: every rank's chunk rows (one all-gather).
  void Finish();
  // Every slot of unit u := the whole tensor (the ranks' chunks in rank order).
  void Gather(size_t u);
  // Every slot of unit u := this rank's chunk again (the whole tensors are freed with their last use).
  void Release(size_t u);
  int64_t gathers() const { return gathers_; }

 private:
  struct Unit {
    std::vector<torch::Tensor*> slots;
    std::vector<torch::Tensor> shards;
    std::vector<std::vector<int64_t>> rows;  // [slot][rank] chunk rows
  };
  Group& group_;
  std::vector<Unit> units_;
  int64_t gathers_ = 0;
};

// What one unit's autograd function runs: `run` computes the unit from its input with its weights
// gathered (it may apply the unit's adapters); `params`: the adapters' A / B it uses (gradients).
// `units`: what is gathered around it: the FSDP group's unit and, under EP x FSDP, the layer's routed
// experts over the expert-data-parallel group (a second HfFsdp).
struct HfFsdpRun {
  std::vector<std::pair<HfFsdp*, size_t>> units;
  std::function<torch::Tensor(const torch::Tensor&)> run;
  std::function<void()> release;  // extra clean-up after Release (adapted weights back to the chunk)
  std::vector<torch::Tensor> params;
};
torch::Tensor HfFsdpUnit(HfFsdpRun& r, const torch::Tensor& x);

// gpt-oss's routed experts under FSDP (probe_weights_fsdp_experts.cpp): its fused [E, ...] tensors are
// chunked by expert, so a rank holds whole experts [e0, e0 + n); stacked again ([n, ...] per part) they
// are the dim-0 chunks of the whole stacks, which HfFsdp gathers (whole: experts from whole_e0, the
// group's first: 0, or under EP x FSDP the EP rank's first).
struct HfExpertStack {
  std::vector<torch::Tensor> parts;  // gate w / b, up w / b, down w / b; undefined where not held
  int64_t e0 = 0, n = 0, whole_e0 = 0;
};
HfExpertStack StackOwnedExperts(HfLayerWeights& l, int64_t whole_e0);
std::vector<torch::Tensor*> HfExpertStackSlots(HfExpertStack& s);  // the defined parts (FSDP slots)
// The layer's expert views on the stack as the slots hold it now: gathered (every expert of the group)
// or the rank's chunk (its n experts; the others undefined).
void BindStackedExperts(HfLayerWeights& l, const HfExpertStack& s);

// Every defined tensor of a mapped decoder layer (norms, attention, MLP or router + experts + shared);
// without `routed`, all but the routed experts'.
std::vector<torch::Tensor*> HfLayerTensors(HfLayerWeights& l, bool routed = true);
// The defined tensors of the layer's routed experts (this rank's, under EP).
std::vector<torch::Tensor*> HfRoutedExpertTensors(HfLayerWeights& l);

}  // namespace onboard::backends
