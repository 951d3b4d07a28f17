// The probe's configuration (backends/probe.h): ranks, layout, task, schedule, controls and the
// probe-side recompute rules. Torch-free: the CLI, the agent and the job service fill it.
// Units: seconds (s), bytes, tokens; lr dimensionless.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "backends/proxy_spec.h"
#include "core/float_dtype.h"
#include "core/plan.h"
#include "core/probe_kernel.h"
#include "core/probe_task.h"
#include "core/status.h"
#include "validators/probe_observations.h"  // ObservationThresholds (issue 10)

namespace onboard {

// ---- Probe configuration ----

// ProbeTask (copy, text, lookup, image): core/probe_task.h; kLookup: probe_lookup.h; kImage: probe_image.h

struct ProbeConfig {
  int64_t ranks = 1;  // processes
  int64_t ep = 0;     // expert-parallel degree (0 = ranks); divides ranks and experts
  int64_t fsdp = 0;   // FSDP shard degree of non-expert params (0 = ranks); divides ranks
  // Defaults (steps, lr, warmup, seq, batch, base_steps) are the full-mode recipe that learns the
  // copy task within budget on every listed config (backends/README.md "Probe defaults");
  // DefaultProbeConfig(mode) gives each mode's recipe (LoRA: a higher lr on the adapters).
  int64_t steps = 400;
  FinetuneMode mode = FinetuneMode::kFull;
  int64_t lora_rank = 4;
  double lora_alpha = -1;  // adapter scale = alpha / rank; <= 0: DefaultLoraAlpha(rank)
  double lr = 1e-2;        // peak learning rate
  int64_t warmup = 20;     // linear warm-up steps, then cosine to min_lr_ratio * lr
  double min_lr_ratio = 0.1;
  double clip = 1.0;          // global grad-norm clip (0 = off)
  double weight_decay = 0.0;  // AdamW decoupled decay on matrices (not norms)
  double beta1 = 0.9, beta2 = 0.95, adam_eps = 1e-8;
  uint64_t seed = 1234;
  int64_t seq = 16;    // tokens per sequence (copy task: (seq-1)/2 = 7 copied symbols)
  int64_t batch = 32;  // global sequences per step; split evenly over ranks
  // Sequences per micro-batch on each rank (0 = batch/ranks: one micro-step per step). Each rank
  // runs batch/(ranks*micro_batch) micro-steps and accumulates their gradients (Megatron's
  // micro-batch size / gradient accumulation). Rank r's micro-step i takes global micro-batch
  // i*ranks + r. Every gradient is summed over micro-batches in the canonical pairwise order of
  // backends/ordered_sum.h, so for a fixed micro_batch the curve is bit-identical for every
  // power-of-two ranks / fsdp / ep layout when batch/micro_batch is a power of two.
  int64_t micro_batch = 0;
  ProbeTask task = ProbeTask::kCopy;
  int64_t copy_symbols = 32;  // copy task alphabet size (>= (seq-1)/2: symbols are distinct)
  std::string text_file;      // task == kText: byte-level tokens from this file
  // Compute dtype (core/float_dtype.h): fp32 (default) or fp64. With the default micro_batch, sharded
  // and 1-process fp32 curves agree to ~1e-7 until a near-tie top-k decision (MoE router, DSA indexer)
  // flips on a 1e-7 summation-order difference; fix micro_batch across layouts for exact agreement.
  FloatDtype dtype = FloatDtype::kFP32;
  std::vector<int64_t> expert_placement;  // expert -> EP rank; empty = contiguous blocks
  double timeout_s = 300;                 // whole probe; a rank that hangs or dies fails the probe
  double collective_timeout_s = 30;       // c10d/Gloo timeout on each collective
  std::string out_dir;                    // per-rank logs and JSON; empty = a temp dir
  std::string worker_binary;              // `onboard` binary for the workers; empty = this executable
  // "local": fork/exec here | "slurm": one srun step (backends/slurm_launch.h)
  std::string launcher = "local";
  int64_t threads_per_rank = 1;  // intra-op threads in each worker
  // Where each rank's tensors live: "cpu" (default) or "cuda" (rank r on cuda:(local rank % GPUs);
  // several ranks need ONBOARD_PROBE_BACKEND=nccl: Gloo's all-to-all takes CPU tensors). With
  // "cuda" the KDA layers run the LibTorch-ops form (the generated kernel here is the CPU one).
  std::string device = "cpu";
  // Fault injection for tests: rank `die_rank` SIGKILLs itself at step `die_step` (-1 = off).
  int64_t die_rank = -1;
  int64_t die_step = -1;
  // Convergence criteria (validators/convergence.h): final loss < converge_fraction * start.
  double converge_fraction = 0.6;
  // LoRA base phase: full training of the base for this many steps on a related source task before
  // the `steps` recorded adapter steps (backends/README.md); -1 = ceil(0.6 * steps), 0 = none.
  int64_t base_steps = -1;
  // KDA forward: generated (codegen's CPU kernel, torch-ops fallback with a logged reason) | torch.
  ProbeKernel kda_kernel = ProbeKernel::kGenerated;
  // DSA core (indexer + top-k + attention over the selected keys) of the MLA layers that have an
  // indexer: torch (LibTorch ops, the default) | generated (codegen's fused CPU DSA kernel as the
  // forward, LibTorch-ops recompute as the backward; torch ops with a logged reason where it cannot
  // serve: tp > 1, not fp32, not CPU). backends/dsa_generated.h.
  ProbeKernel dsa_kernel = ProbeKernel::kTorch;
  // Negative control (backends/probe_controls.h): "" (none) | kControlNoLookback |
  // kControlRandomRouter | kControlFrozenLora. A control run must fail the learning verdict.
  std::string control;
  // ---- Tensor parallelism (issue 17; backends/probe_tp.h) ----
  // Megatron-style TP degree: groups of tp consecutive ranks split the attention heads (KDA, MLA,
  // DSA indexer), the dense / shared-expert MLP widths and the vocabulary; each TP group is one
  // data-parallel rank. 0 or 1 = no TP.
  int64_t tp = 1;
  int64_t tp_degree() const { return tp > 1 ? tp : 1; }
  // Megatron sequence parallelism over the TP group (needs tp > 1 and seq % tp == 0): outside the
  // column ... row-parallel regions (norms, residuals) each TP rank holds seq/tp tokens; a region
  // all-gathers its input along the sequence and reduce-scatters its output (probe_tp.h).
  bool sequence_parallel = false;
  // Expert tensor parallelism (Megatron --expert-tensor-parallel-size): 0 or 1 = each TP rank
  // holds the routed experts whole (replicated over TP); = tp: every routed expert's FFN width is
  // split over the TP group (column / row parallel). Other values are refused.
  int64_t etp = 0;
  int64_t etp_degree() const { return etp > 1 ? etp : 1; }
  // ---- end tensor parallelism ----
  // ---- Pipeline parallelism (issue 17, backends/probe_pipeline.h) ----
  // pp stages; each rank holds `interleave` virtual stages (model chunk c*pp + s on stage s,
  // Megatron's interleaved 1F1B; 1 = plain 1F1B). The micro-steps of a data rank are the
  // schedule's micro-batches.
  int64_t pp = 1;
  int64_t interleave = 1;
  // First proxy layer of each model chunk (pp*interleave entries, ascending, first 0); empty =
  // balanced (backends/probe_pipeline_schedule.h). The embedding goes with chunk 0, the head with the last.
  std::vector<int64_t> stage_layer_starts;
  // Fault injection for tests (never set by the CLI): kPipeFaultSwapBackward = stage 0 runs its
  // first two backward ops on each other's micro-batches (the schedule check is skipped), so the
  // exactness test must fail.
  std::string pp_fault;
  int64_t pp_degree() const { return pp > 0 ? pp : 1; }
  // ---- end pipeline parallelism ----
  // ---- Rank order (the one home of it): pp outermost, then the data ranks, then tp innermost ----
  // rank r = (s * D + d) * T + t, T = tp_degree(), D = data_ranks() = ranks / (tp * pp): pipeline
  // stage s, data rank d (the FSDP / EP / micro-batch layout runs over the D data ranks of one
  // (stage, TP rank)), TP rank t (tp consecutive ranks, as in Megatron). ep, fsdp and the
  // micro-batches count data ranks, not ranks.
  int64_t data_ranks() const { return ranks / (tp_degree() * pp_degree()); }
  int64_t stage_ranks() const { return ranks / pp_degree(); }  // ranks of one stage: D * T
  int64_t stage_of(int64_t r) const { return r / stage_ranks(); }
  int64_t data_rank_of(int64_t r) const { return (r / tp_degree()) % data_ranks(); }
  int64_t tp_rank_of(int64_t r) const { return r % tp_degree(); }
  // ---- end rank order ----
  // ---- Recompute per block kind (issue 17; backends/probe_recompute.cpp) ----
  // Block kind as the plan names it (Plan::recompute keys: "KDA", "MLA", "DSA", "MoE", "MLP";
  // "*" = every kind not named) -> policy. A kind absent, with no "*", recomputes "full" (FSDP +
  // full activation checkpointing per layer, the probe's behaviour before policies existed).
  std::map<std::string, Recompute> recompute;
  Recompute recompute_for(const std::string& kind) const;
  // Issue 18 (expert communication): which ranks share a node (consecutive global ranks, this many
  // per node; 0 = all on one node), so a localhost probe acts as nodes x ranks_per_node and measures
  // its slow-tier (cross-node) traffic (backends/probe_coactivation.h).
  int64_t ranks_per_node = 0;
  // Node-limited routing (DeepSeek-V3): each token's top-k experts come from at most this many
  // nodes: the nodes with the highest sum of their top max(1, top_k / M) selection scores, then the
  // top-k inside them. Nodes = where the placement puts each expert (ranks_per_node); 0 = off. It
  // changes the routing, so curves are compared against the same run without it.
  int64_t max_route_nodes = 0;
  int64_t nodes() const { return ranks_per_node > 0 ? ranks / ranks_per_node : 1; }
  int64_t node_of(int64_t rank) const { return ranks_per_node > 0 ? rank / ranks_per_node : 0; }
  // Redundant experts (DeepSeek EPLB's phy2log; backends/probe_replicas.h): physical slot p sits on
  // EP rank p / (size / ep) and holds logical expert expert_phy2log[p]; a logical expert has one or
  // two copies. Empty = none (expert_placement). Overrides expert_placement when set.
  std::vector<int64_t> expert_phy2log;
  // Fault injection for tests: true = each source's log2phy sends a replicated expert's tokens to
  // the physical slot after the right one (a wrong map; the curve must then change).
  bool fault_log2phy = false;
  // Communication-computation overlap (issue 18; backends/proxy_moe.cpp): the EP dispatch and
  // combine all-to-alls are posted asynchronously; the shared expert's up-projection runs while
  // the dispatch is in flight and its down-projection (with its TP all-reduce) while the combine
  // is (Megatron's --moe-shared-expert-overlap). false = each is waited as soon as it is posted.
  // The same ops are built in the same order either way: the curve is bit-identical.
  bool moe_overlap = false;
  // EP dispatch (issue 18; names as the plan's ep_dispatcher): "alltoall" = one all-to-all, a row
  // per (token, expert rank); "deepep" = node-deduplicated (backends/probe_node_dedup.h): a token
  // crosses to each remote node once, to the rank there with its sender's local index, which
  // forwards it inside the node; the combine sums per node there and comes back the same way.
  // deepep needs >= 2 nodes in every EP group, each holding the same number of its ranks, and no
  // moe_overlap. Same maths; the combine's per-node sums reorder a token's top-k sum: bit-exact for top_k = 2
  // (two-term sums commute), ~1e-6 relative for top_k = 4 (tests/backends/probe_node_dedup_test.cpp).
  std::string ep_dispatcher = "alltoall";
  // Node of each EP rank of world rank r's EP group (node_of of its world ranks), in EP rank order.
  std::vector<int64_t> ep_group_nodes(int64_t r) const;
  Status Validate(const ProxySpec& spec) const;  // names every factor ("ep=3 must divide ranks=4")
  int64_t ep_degree() const { return ep > 0 ? ep : data_ranks(); }
  int64_t fsdp_degree() const { return fsdp > 0 ? fsdp : data_ranks(); }
  int64_t micro_batch_size() const { return micro_batch > 0 ? micro_batch : batch / data_ranks(); }
  int64_t micro_steps() const { return batch / (data_ranks() * micro_batch_size()); }  // per data rank / step
  // ---- Observation thresholds (issue 10) ----
  // What the probe's own report judges divergence, comm share and expert balance against. One
  // home: validators/probe_observations.h. `onboard probe` runs the defaults; `onboard run` passes
  // the run's (agent::Thresholds, agent/probe_recipe.cpp), so its probe.txt and its rules agree.
  // Read by the launcher (FinishProbeResult), not sent to the workers.
  ObservationThresholds thresholds;
  // ---- end observation thresholds ----
  // ---- Lookup task (issue 12; backends/probe_lookup.h) ----
  // task == kLookup: keys x keys table cells, each holding one of `values` symbols (16 x 16 cells
  // of 16 values by default). Measured (backends/README.md "Lookup task"): on the 2-layer proxy the
  // random_router control slows this task down but does not stop it; on the routed-memory proxy with
  // RouterControlProbeConfig (probe_schedule.h) the router converges and random routing does not.
  int64_t lookup_keys = 16;
  int64_t lookup_values = 16;
  // ---- end lookup task ----
  // ---- Kernel loss parity (issue 12; backends/probe_loss_parity.h, validators/loss_parity.h) ----
  // > 0: after the probe the launcher trains the parity proxy (this spec's KDA layers on dense
  // MLPs, 1 rank, full mode) for this many steps twice, once with the generated KDA kernel (with
  // this config's control, so perturbed_kda_gate perturbs it) and once on the LibTorch reference
  // ops, and compares the two loss curves (ProbeResult::loss_parity). 0 = off.
  int64_t loss_parity_steps = 0;
  // ---- end kernel loss parity ----
};

inline constexpr const char* kPipeFaultSwapBackward = "swap_backward";

// Recompute per block kind (backends/probe_recompute.cpp): the plan's kind names of proxy layer
// `layer` ("KDA" | "MLA" | "DSA"; "MoE" | "MLP"), the `--recompute KIND=POLICY,...` list (kinds
// case-insensitive, canonicalised) and the check of ProbeConfig::recompute's keys.
std::string ProxyMixerKind(const ProxySpec& spec, size_t layer);
std::string ProxyChannelKind(const ProxySpec& spec, size_t layer);
Expected<Recompute> ParseRecomputePolicy(const std::string& text, const std::string& where,
                                         const std::string& field);
Status ParseRecomputeList(const std::string& text, std::map<std::string, Recompute>* out);
Status ValidateRecompute(const ProbeConfig& config);

inline constexpr const char* kControlNoLookback = "no_lookback";
inline constexpr const char* kControlRandomRouter = "random_router";
inline constexpr const char* kControlFrozenLora = "frozen_lora";
inline constexpr const char* kControlPerturbedKdaGate = "perturbed_kda_gate";  // issue 12
inline constexpr const char* kControlPerturbedDsaTopk = "perturbed_dsa_topk";  // issue 12 (DSA parity)
inline constexpr const char* kControlNoImage = "no_image";  // issue 12 item 6: blank images (probe_image.h)

// The tuned defaults of `mode` (backends/probe_schedule.cpp): ProbeConfig's own defaults for full
// training; for LoRA the adapter phase's steps and learning rate and the base phase's length.
ProbeConfig DefaultProbeConfig(FinetuneMode mode);

}  // namespace onboard
