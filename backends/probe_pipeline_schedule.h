// Pipeline schedules of the probe, pure (no LibTorch, no processes): which forward / backward op a
// pipeline rank runs in which order, the check that a set of per-rank orders is consistent, and the
// split of the proxy's units into contiguous model chunks. backends/probe_pipeline.cpp runs them.
//
// Legend: p = pipeline stages (ranks along the pipeline), v = virtual stages per rank (interleave),
// m = micro-batches per step. Model chunk q in [0, p*v) lives on rank q % p as its local chunk
// q / p (Megatron-LM's interleaved layout). Units: embed = 0, layer l = l + 1, head = layers + 1.
//
// Schedules (Megatron-LM's forward_backward_pipelining_{without,with}_interleaving, facts only):
//   1F1B (v = 1):     rank r runs min(p - r - 1, m) warm-up forwards, then alternates one forward and
//                     one backward, then the remaining backwards. Forwards and backwards both go in
//                     micro-batch order 0..m-1.
//   interleaved (v > 1, m % p == 0): the k-th forward of a rank is local chunk (k / p) % v on
//                     micro-batch (k / (p*v)) * p + k % p; the k-th backward is local chunk
//                     v - 1 - (k / p) % v on the same micro-batch formula; warm-up
//                     min((p - r - 1) * 2 + (v - 1) * p, m*v) forwards, then 1F1B, then cool-down.
// Messages: activations go from chunk q to q+1, gradients from q+1 to q, each over the link between
// their two ranks, one FIFO per (sender, receiver, kind) that carries no micro-batch ids: the order
// of receives must equal the order of sends, which CheckPipelineSchedule verifies.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace onboard {

enum class PipeOpKind { kForward, kBackward };

struct PipeOp {
  PipeOpKind kind = PipeOpKind::kForward;
  int64_t chunk = 0;        // local (virtual) chunk on this rank, 0..v-1
  int64_t micro_batch = 0;  // 0..m-1
  bool operator==(const PipeOp& o) const {
    return kind == o.kind && chunk == o.chunk && micro_batch == o.micro_batch;
  }
};

// The op order of pipeline rank `rank` (0..p-1). Requires p, v, m >= 1 and, for v > 1, m % p == 0.
std::vector<PipeOp> PipelineSchedule(int64_t p, int64_t v, int64_t m, int64_t rank);

// "F0.1" = forward of local chunk 0 on micro-batch 1, "B1.0" = backward; ops joined by spaces.
std::string PipeOpsString(const std::vector<PipeOp>& ops);

// Executes the per-rank orders (ops[r] for rank r) on an abstract machine with unbounded async
// sends and blocking FIFO receives. Errors (kInternal, naming rank, op and what went wrong): an op
// repeated or missing (every rank must run F and B of each of its chunks on every micro-batch
// once), a backward before its forward, a receive that would get another micro-batch's message
// than the op's, or a deadlock (no rank can proceed).
Status CheckPipelineSchedule(int64_t p, int64_t v, int64_t m, const std::vector<std::vector<PipeOp>>& ops);

// First layer of each of `chunks` contiguous chunks of `layers` layers, as even as possible
// (the first layers % chunks chunks one layer longer). Requires 1 <= chunks <= layers.
std::vector<int64_t> BalancedStageStarts(int64_t layers, int64_t chunks);

// Units [begin, end) of model chunk q given the chunks' first layers (starts, ascending, starts[0]
// == 0): chunk 0 also holds the embedding, the last chunk also the head.
struct UnitRange {
  int64_t begin = 0, end = 0;
};
UnitRange ChunkUnits(const std::vector<int64_t>& starts, int64_t layers, int64_t q);

// Problems of a pipeline layout apart from the ranks (probe_layout_check.cpp checks those), one
// message each ("interleave=2 needs pp > 1"); empty = fine. layers: the proxy's (or the real-weights
// probe's loaded) layers; micro_batches: the schedule's m (micro-steps per data rank); starts:
// ProbeConfig::stage_layer_starts (empty = balanced).
std::vector<std::string> PipelineLayoutProblems(int64_t pp, int64_t interleave, int64_t layers,
                                                int64_t micro_batches, const std::vector<int64_t>& starts);

}  // namespace onboard
