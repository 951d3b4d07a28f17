// INTERNAL to backends/ (includes LibTorch). Pipeline parallelism of the probe: one rank's
// micro-batches of a step, run in the order of backends/probe_pipeline_schedule.h, with
// activations sent forward and gradients sent backward over the pair groups of ProbeGroups
// (c10d point-to-point, Group::Send / Recv).
//
// Per op (local chunk c, micro-batch i; model chunk q = c*pp + stage, units ChunkUnits(q)):
//   forward   q == 0: the micro-batch's tokens; else receive the activation [mb, T, hidden] from
//             the previous stage (tag kPipeTagActivation) as a leaf that requires grad; run the
//             chunk's FSDP units (fsdp_unit.h: same units, same data ranks as without pp); last
//             chunk: the output is the micro-batch's loss share, else send it to the next stage.
//   backward  last chunk: backpropagate the loss; else receive the output's gradient (tag
//             kPipeTagGradient) and backpropagate it; q > 0: send the input's gradient back; the
//             chunk's unit gradients go to the step's accumulators (PushMicroBatchGrads).
// Data rank d's micro-batch i is global micro-batch i * (ranks/pp) + d on every stage, so each unit
// accumulates the same micro-batch gradients in the same order as one process does.
// Bubble: 1 - busy / span, with span from the first op's start until every stage is done (the
// rank's sends completed, then a world barrier) and busy the ops' wall time minus their
// point-to-point waits (steady_clock). Units: seconds.
#pragma once

#include "backends/probe_data.h"
#include "backends/probe_worker_state.h"

namespace onboard::backends {

inline constexpr int64_t kPipeTagActivation = 0;
inline constexpr int64_t kPipeTagGradient = 1;

struct PipelineStepResult {
  double local_loss = 0;  // sum of this rank's micro-batch losses (last stage; else 0)
  double bubble = 0;      // idle share of this rank's pipeline span, [0, 1]
};

// Step 1 of TrainStep when pp > 1 (probe_train_step.cpp): the rank's schedule for one step.
PipelineStepResult RunPipelineMicroSteps(WorkerState& st, ProbeGroups& g, const ProbeData& data,
                                         const ProbeConfig& phase, int64_t step, double scale,
                                         const UnitInputs& inputs, Accumulators& acc);

// Forward only of one batch through the stages (held-out loss, probe_train_step.cpp HeldOutEval):
// the model chunks in order, each stage running its chunks as their input arrives. Every rank
// calls it for the same batches. Returns the batch's loss share on the last chunk's stage, else 0.
double PipelineForwardLoss(WorkerState& st, ProbeGroups& g, Batch& batch, double scale, UnitInputs& inputs);

}  // namespace onboard::backends
