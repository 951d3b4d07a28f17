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
struct HfFsdpRun {
  HfFsdp* fsdp = nullptr;
  size_t unit = 0;
  std::function<torch::Tensor(const torch::Tensor&)> run;
  std::function<void()> release;  // extra clean-up after Release (adapted weights back to the chunk)
  std::vector<torch::Tensor> params;
};
torch::Tensor HfFsdpUnit(HfFsdpRun& r, const torch::Tensor& x);

// Every defined tensor of a mapped decoder layer (norms, attention, MLP or router + experts + shared).
std::vector<torch::Tensor*> HfLayerTensors(HfLayerWeights& l);

}  // namespace onboard::backends
