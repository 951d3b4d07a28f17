// ApplyPlanToProbe: scale the chosen plan down to the probe's ranks, keeping its structure where the
// probe can run it, and saying for every factor it could not keep what it did instead and why.
//
// Order (one step per factor family, each independent of the later ones):
//   Step 1: factors the probe does not run yet (sequence parallelism): run as off, with its
//           reason.
//   Step 1b: tensor parallelism: the largest tp <= the plan's that divides the ranks and every
//           proxy size TP splits (heads, MLP widths, vocab), at most ranks/2 when the plan also
//           has data or expert parallelism (tp=4 x ep=128 on 128 devices -> tp=2 x ep=2 on 4
//           ranks); a tp the proxy's heads rule out is lowered with that reason.
//   Step 1c: pipeline, over the ranks / tp left (the probe's rank order, backends/probe.h: pp
//           outermost, data ranks, tp innermost): the largest pp <= the plan's that divides
//           ranks / tp, at most half of them when the plan also has data or expert parallelism
//           and ranks / tp >= 4 (the same rule as tp), and <= the proxy's layers; the plan's
//           interleave while pp*interleave <= layers (and, after Step 4, the micro-batches are a
//           multiple of pp); the plan's split points scaled to the proxy's layers when
//           model_layers is given and they stay distinct, else a balanced split. Data and
//           expert parallelism (Steps 2, 3) then divide the data ranks, ranks / (tp * pp).
//   Step 2: data parallelism: pure replication stays pure (every rank a replica); HSDP keeps 2
//           replicas x ranks/2 shards when ranks >= 4; otherwise every rank is an FSDP shard. A
//           sharded plan with zero_stage < 3 runs as FSDP, and says so.
//   Step 3: expert parallelism: the largest ep <= the plan's that divides the ranks and the proxy's
//           experts (ep = 1 when the plan has none).
//   Step 4: micro-batches: the plan's accumulation, capped by the sequences each rank gets per step
//           and by kMaxProbeMicroSteps (the probe's work per step stays the same; it is split into
//           more micro-steps).
//   Step 5: recompute per block kind: the plan's policies onto the proxy's kinds (KDA, MLA, DSA,
//           MoE, MLP kept as named; GatedDeltaNet / LinearAttention -> KDA and MHA / GQA /
//           SlidingWindow -> MLA, the proxy's mixers for them, with that reason); kinds the plan
//           leaves out recompute none there ("*" = none unless the plan names "*").
// Units: ranks, sequences.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backends/probe.h"
#include "core/plan.h"
#include "core/status.h"

namespace onboard::agent {

// Most micro-steps a probe step is split into. Two already run the gradient accumulation path
// (sum over micro-batches, one optimizer step); each more costs a whole forward/backward with its
// collectives on a smaller batch. Measured (flagship proxy, 2 ranks, 16 sequences per rank, 20
// steps, shared 2 cores at load ~9): 1 micro-step 179 ms/step, 4 micro-steps 551 ms, 16 (the demo
// plan's 32 capped by the sequences) 1624 ms: 9x, which a 550-step probe round cannot afford.
inline constexpr int64_t kMaxProbeMicroSteps = 2;

struct ProbeFactor {
  std::string factor;   // "tp", "pp", "ep", "fsdp", "replicas", "micro_batches", "recompute", ...
  std::string plan;     // the plan's value, as text ("4", "selective")
  std::string probe;    // what the probe runs
  std::string reason;   // empty when kept as a scaled-down copy of the plan's structure
};

struct ProbeLayout {
  int64_t ranks = 1;
  int64_t tp = 1;               // tensor-parallel degree (TP groups of consecutive ranks)
  bool sequence_parallel = false;  // Megatron SP over the TP group (the plan's, when tp > 1)
  int64_t etp = 1;                 // expert TP: 1 or tp (the plan's etp > 1 runs as tp)
  int64_t ep = 1;               // expert-parallel degree
  int64_t fsdp = 1;             // FSDP shard degree (ranks / replicas)
  int64_t replicas = 1;         // HSDP replicas
  int64_t micro_steps = 1;      // micro-batches per data rank per step
  int64_t micro_batch = 1;      // sequences per micro-batch on each data rank
  // ---- pipeline parallelism (issue 17) ----
  int64_t pp = 1;                           // pipeline stages (ranks = pp x data ranks x tp)
  int64_t interleave = 1;                   // virtual stages per rank
  std::vector<int64_t> stage_layer_starts;  // first proxy layer of each model chunk; empty = balanced
  // ---- end pipeline parallelism ----
  std::map<std::string, Recompute> recompute;  // ProbeConfig::recompute: block kind -> policy
  std::vector<ProbeFactor> factors;  // every factor, kept or adjusted
  nlohmann::json ToJson() const;
};

// `sequences_per_rank`: sequences each rank trains on per step (the probe's work, kept fixed: the
// global batch is sequences_per_rank * ranks); `proxy_experts`: routed experts of the proxy (0 =
// dense); `proxy`: the proxy, for the sizes tensor parallelism must divide and the layers pipeline
// stages split (null: only the ranks limit tp, and pp runs as 1 with that reason); `model_layers`:
// the model's layers the plan's split points count (0 = unknown: balanced split). Errors: ranks or
// sequences_per_rank < 1.
Expected<ProbeLayout> ApplyPlanToProbe(const Plan& plan, int64_t ranks, int64_t sequences_per_rank,
                                       int64_t proxy_experts, const ProxySpec* proxy = nullptr,
                                       int64_t model_layers = 0);

}  // namespace onboard::agent
