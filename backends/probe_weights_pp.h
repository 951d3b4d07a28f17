// INTERNAL to backends/ (includes LibTorch). Pipeline parallelism of the real-weights probe (`--pp P`,
// probe_weights.h): stage s holds only its layers (PpStageLayers; the embedding on stage 0, the final
// norm + head on the last). One step = the rank's batch cut into M micro-batches of b / M windows,
// run in Megatron's 1F1B order (PipelineSchedule(P, 1, M, stage), probe_pipeline_schedule.h: the
// proxy probe's schedule, one home); with --interleave V each stage holds V model chunks (chunk q =
// v * P + s) run in Megatron's interleaved order (PipelineSchedule(P, V, M, stage), M a multiple of
// P). Activations [b/M, S, hidden] go from chunk q to q + 1 on the next stage (stage P - 1's to stage
// 0: its next chunk) (tag 0), their gradients come back (tag 1) over the P-rank pair group of one
// (data rank, TP rank) (Group::Send / Recv, FIFO per (peer, tag)); the adapters' gradients accumulate
// over the micro-batches. The loss exists on the last stage. Bubble (measured): the share of the
// step's span (its start to the pair group's barrier after the last op) this rank waited in receives,
// its sends and that barrier; in theory (P - 1) / (V M + P - 1) when the stages' micro-batch times are
// equal. Adapter gradients are summed over the stage's ranks (its data x TP ranks); the global norm
// for clipping adds every stage's square sum once over the world. The PEFT adapter: each stage's first rank
// writes its modules (all its chunks' layers), rank 0 merges them.
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
  int64_t chunks = 1;  // --interleave V: model chunks per stage (local chunk v = model chunk v * P + index)
  bool first() const { return index == 0; }
  bool last() const { return index == stages - 1; }
};

struct PpStepResult {
  torch::Tensor loss;  // the counted windows' loss on the last stage, 0 elsewhere (detached)
  double bubble = 0;   // measured idle share of the step's span on this rank, [0, 1]
};
// The rank's part of one forward (and, when `backward`, backward) through the pipeline over
// `microbatches` micro-batches (dividing b's windows; the counted windows come first). Forward only
// (held-out): each micro-batch through the stage's chunks in order, whatever M.
PpStepResult PpStageStep(RankModel& m, TpContext& tp, PpContext& pp, const Batch& b, int64_t counted,
                         double inv_tokens, bool backward, int64_t microbatches = 1);

// Clips the (summed) adapter gradients `params` to global norm 1 (torch's clip_grad_norm_ rule:
// x 1 / (norm + 1e-6) when that is < 1); the squared norm is the world sum of each rank's `counted`
// gradients' squares, each adapter counted on one rank (--pp: each stage's; --ep: each routed expert's
// on one EP group).
void ClipToGlobalNorm(const std::vector<torch::Tensor>& params, const std::vector<torch::Tensor>& counted,
                      Group& world);

// Rank 0: the parts' adapters (`dirs`, PEFT folders: the stages' and, under --ep, the EP ranks'
// routed experts) as one PEFT adapter in `out`, modules sorted.
[[nodiscard]] Status MergeStageAdapters(const std::vector<std::string>& dirs, const std::string& out);

}  // namespace onboard::backends
