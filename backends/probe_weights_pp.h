// INTERNAL to backends/ (includes LibTorch). Pipeline parallelism of the real-weights probe (`--pp P`,
// probe_weights.h): stage s holds only its layers (PpStageLayers; the embedding on stage 0, the final
// norm + head on the last). One step = the rank's whole batch forward through the stages, then
// backward: activations [b, S, hidden] go to the next stage (tag 0), their gradients come back
// (tag 1) over the 2..P-rank pair group of one (data rank, TP rank) (Group::Send / Recv, in the order
// sent). The loss exists on the last stage. Adapter gradients are summed over the stage's ranks (its
// data x TP ranks); the global norm for clipping adds every stage's square sum once over the world.
// The PEFT adapter: each stage's first rank writes its modules, rank 0 merges them.
#pragma once

#include <string>
#include <vector>

#include <torch/torch.h>

#include "backends/c10d_compat.h"
#include "backends/probe_weights_model.h"

namespace onboard::backends {

struct PpContext {
  Group* pair = nullptr;   // the P stages of this (data rank, TP rank); rank = stage
  Group* stage = nullptr;  // this stage's data x TP ranks
  int64_t index = 0, stages = 1;
  bool first() const { return index == 0; }
  bool last() const { return index == stages - 1; }
};

// The rank's part of one forward (and, when `backward`, backward) through the pipeline; returns the
// loss of the counted windows on the last stage, 0 elsewhere (detached).
torch::Tensor PpStageStep(RankModel& m, TpContext& tp, PpContext& pp, const Batch& b, int64_t counted,
                          double inv_tokens, bool backward);

// Clips the (stage-summed) adapter gradients `params` to global norm 1 (torch's clip_grad_norm_ rule:
// x 1 / (norm + 1e-6) when that is < 1); `owner`: this rank adds its stage's squares to the world sum.
void PpClipGradients(const std::vector<torch::Tensor>& params, Group& world, bool owner);

// Rank 0: the stages' adapters (`dirs`, PEFT folders) as one PEFT adapter in `out`, modules sorted.
[[nodiscard]] Status MergeStageAdapters(const std::vector<std::string>& dirs, const std::string& out);

}  // namespace onboard::backends
