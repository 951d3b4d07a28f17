// Parallel-layout planner: analytical step-time / memory cost model and the search over
// FSDP/HSDP x TP x PP x EP x recompute on a tiered topology.
//
// Units everywhere in this header: seconds (s), bytes, tokens, FLOPs (multiply-add = 2),
// FLOP/s, GB/s = 1e9 bytes/s. Memory is reported in bytes (GiB = 2^30 bytes when printed).
//
// Entry points:
//   SearchPlans(req)          -> best plan, runners-up, Pareto front, rejected summary
//   EvaluatePlan(req, plan)   -> PlanEstimate for one given layout (no search)
//   SmallestFittingWorld(req) -> smallest device count of the same topology family that fits
//   BuildAllExports / WriteAllExports (search/plan_export.h) -> engine exports + launchers of a Plan
//   LoadLayoutFile (search/layout_file.h) -> layouts / published runs for `--evaluate`
//   PlaceExperts (search/expert_placement.h) -> hierarchical expert placement with replicas
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/model_ir.h"
#include "core/plan.h"
#include "core/status.h"
#include "core/topology.h"
#include "search/cross_entropy_cost.h"
#include "search/plan_export.h"

namespace onboard {

// Multipliers the agent derives from probe measurements (measured / predicted). 1.0 = datasheet
// model as shipped. Every field is dimensionless.
struct CostCalibration {
  double compute_efficiency = 1.0;       // scales achieved FLOP/s of dense GEMMs and attention
  double grouped_gemm_efficiency = 1.0;  // scales achieved FLOP/s of grouped (per-expert) GEMMs
  double memory_bound_efficiency = 1.0;  // scales achieved HBM bandwidth for elementwise ops
  std::vector<double> tier_bandwidth;    // per topology tier, scales bw (missing entries = 1.0)
  double latency = 1.0;                  // scales every tier's per-message latency
  std::string source;                    // "probe job 17, 2026-11-30", shown in reports
  Status Validate() const;               // every factor finite and in (0, 10]
};

// Optional constraints on the search: 0 (or empty) = free. A fixed factor that the model or the
// topology rejects makes the search report that reason for every candidate.
struct PlanConstraints {
  int64_t tp = 0, pp = 0, ep = 0, dp_shard = 0, dp_replicate = 0;
  int64_t cp = 0;                        // context parallel (searched only when seq/cp >= 4096)
  int64_t interleave = 0;
  int64_t micro_batch = 0;
  int64_t max_tp = 0;                    // 0 = size of the fastest tier
  int64_t etp = 0;                       // expert tensor parallel: 0 = searched (MoE models), else fixed
  // Pipeline schedules searched: "1f1b", "dualpipe", or "any" (both; DualPipe where it can run).
  // Default 1f1b: no engine onboard exports to (Megatron-LM, Bridge, MindSpeed, torchtitan) runs DualPipe.
  std::string schedule = "1f1b";
  // Optimizer sharding searched: 0 = both FSDP (zero 3: Megatron-FSDP, torch FSDP2) and Megatron's
  // distributed optimizer (zero 1: weights and grads replicated over the data ranks, the optimizer
  // state sharded) where there is more than one data rank; 1 or 3 = that one only.
  int64_t zero_stage = 0;
  std::optional<Recompute> recompute;    // nullopt = searched; else this policy for every block
  double memory_margin = 0.08;           // fraction of HBM kept free (allocator fragmentation, NCCL)
  double reserved_gib = 2.0;             // fixed per-device reservation (CUDA/CANN context, workspace)
};

struct PlanRequest {
  ModelIR model;
  Topology topology;
  FinetuneMode mode = FinetuneMode::kFull;
  int64_t lora_rank = 16;                // LoRA rank r (mode == kLoRA)
  Precision base_dtype = Precision::kBF16;     // frozen base weights in LoRA: bf16 | fp8 | mxfp4
  Precision compute_dtype =
      Precision::kBF16;                  // GEMM inputs: bf16 | fp16 | fp8 | mxfp8 | nvfp4 (core/precision.h)
  int64_t bf16_layers_first = 0;         // decoder layers at the start / end kept in bf16 under a quantised
  int64_t bf16_layers_last = 0;          // compute_dtype (core/plan.h Plan::bf16_layers_first); every plan
                                         // of the search carries them
  int64_t seq = 4096;                    // tokens per sequence
  int64_t global_batch = 0;              // sequences per optimizer step; 0 = ~4M tokens rounded
  double expert_imbalance = 1.0;         // max/mean routed tokens per EP rank after placement (>= 1)
  double dropout = 0.0;                  // training dropout probability (> 0 keeps 1-byte masks)
  std::string attention_kernel = "flash";// flash (fused, scores never stored) | unfused (s x s scores
                                         // materialised: Megatron-LM 2022 and earlier)
  std::string cross_entropy =
      kDefaultCrossEntropy;              // the loss over the logits, what it holds and moves per logit
                                         // (search/cross_entropy_cost.h): megatron (Megatron-LM's
                                         // default) | te | te_inplace (TE <= 2.17.1) | torch (torchtitan)
  bool unfused_framework = false;        // cost the framework-level fusion chains (norm+linear / norm+
                                         // quantise, SwiGLU, router+top-k+permute, residual adds, rotary,
                                         // MoE combine) unfused; default: fused, as the calibrated engines
                                         // run them (search/fusion_cost.h)
  bool overlap_ep_comm = false;          // framework overlaps EP all-to-all with another micro-batch's
                                         // compute (DualPipe, Megatron --overlap-moe-expert-parallel-comm)
  // Interleaved PP (vp > 1) sends/recvs posted async and waited on when the next chunk needs them:
  // Megatron-Core overlap_p2p_comm (Megatron-LM's default with vp > 1, --no-overlap-p2p-communication;
  // Megatron-Bridge CommOverlapConfig and NeMo 2's MegatronCommOverlapCallback set it when pp > 1, vp > 1).
  bool overlap_pp_p2p = false;
  // Expert all-to-all routing, split by tier (issue 18; search/ep_a2a_traffic.h; limits checked once by
  // CheckExpertRouting, search/plan_request_checks.h):
  double expert_nodes_per_token = 0;  // measured mean distinct nodes a token's top-k experts span (the
                                      // co-activation placement's TierTraffic::nodes_per_token);
                                      // 0 = not given: the uniform-random expectation over the EP
                                      // group's nodes. Moves node-deduplicating dispatchers only: a
                                      // plain all-to-all sends every top-k copy
  int64_t max_route_nodes = 0;        // node-limited routing M (DeepSeek-V3 report sec. 2.1.2): at most
                                      // M nodes per token; 0 = off
  // Dispatcher of the plans SearchPlans builds (EvaluatePlan costs the given Plan::ep_dispatcher):
  // deepep / hybridep send a token once per remote node, alltoall (the default) every top-k copy.
  EpDispatcher ep_dispatcher = EpDispatcher::kAllToAll;
  // How the zero-3 plans SearchPlans builds meet PP (core/plan.h FsdpPipelining): per_micro_batch
  // (Megatron-FSDP, the default) or per_step (torch FSDP2 under pipelining: torchtitan).
  FsdpPipelining fsdp_pipelining = FsdpPipelining::kPerMicroBatch;
  // Framework memory techniques beside the per-block recompute policies (issue 13; memory_model.cpp):
  bool recompute_norms = false;      // RMSNorm outputs recomputed in backward, not kept (DeepSeek-V3
                                     // report sec. 3.2.3; Megatron --recompute-modules layernorm)
  bool fp8_act_input_store = false;  // routed experts' SwiGLU input kept in fp8 (DeepSeek-V3 report
                                     // sec. 3.3.3; Megatron --activation-func-fp8-input-store)
  int64_t cpu_offload_layers = 0;    // activations of the first N decoder layers kept in host memory
                                     // (Megatron --cpu-offloading-num-layers, activations only; TE
                                     // get_cpu_offload_context): plans with pp 1 and no recompute,
                                     // devices with a host-link figure; 0 = off
  // Megatron-Core TEGroupedMLP pads each local expert's rows to the fp8 alignment itself (TE Fp8Padding /
  // Fp8Unpadding) where neither the router (moe_router_padding_for_quantization) nor the dispatcher
  // (HybridEP) did: costed for fp8 plans whose ep_dispatcher is not HybridEP (layer_time.cpp, "fp8 row
  // padding"). Set by the measured-runs reader for dropless Megatron-Core runs; the search keeps it off.
  bool fp8_expert_padding = false;
  PlanConstraints constraints;
  CostCalibration calibration;
  int threads = 2;                       // worker threads for the search (std::thread)
  int top_n = 5;                         // runners-up kept
  Status Validate() const;               // names the field and value on error
};

// One additive term of the step time. `exposed_s` is what lands on the critical path after
// overlap; `total_s` is the term's own duration.
struct TimeTerm {
  std::string name;                      // "compute.KDA", "comm.ep_a2a", "bubble", ...
  double total_s = 0;
  double exposed_s = 0;
  std::string tier;                      // tier a collective runs on ("" for compute)
  std::string formula;                   // one line, with the numbers plugged in
};

// Per-device memory, bytes. total = weights + grads + optimizer + activations + a2a_buffers +
// workspace; fits when total <= capacity - margin.
struct MemoryBreakdown {
  double weights = 0;
  double grads = 0;
  double optimizer = 0;                  // fp32 master + Adam m, v (sharded)
  double activations = 0;                // kept for backward, all in-flight micro-batches
  double a2a_buffers = 0;                // EP dispatch/combine buffers
  double workspace = 0;                  // reserved context + largest gathered (unsharded) layer
  double offloaded = 0;                  // activations of one micro-batch in host memory, not in `total`
                                         // (PlanRequest::cpu_offload_layers)
  double total = 0;
  double capacity = 0;                   // HBM per device
  double margin = 0;                     // kept free
  double usable() const { return capacity - margin; }
};

struct PlanEstimate {
  double step_s = 0;                     // optimizer step wall time
  double tokens_per_s = 0;               // global tokens / step_s
  double mfu = 0;                        // model FLOPs (6*N_active*tokens + attention) / (peak * world * step)
  double model_flops = 0;                // per step, whole cluster
  std::vector<TimeTerm> time_terms;      // one per line, sum of exposed_s == step_s
  std::map<std::string, double> compute_s_by_kind;  // block kind -> seconds per step (per device)
  double bubble_s = 0;
  double exposed_comm_s = 0;
  double overlapped_comm_s = 0;
  MemoryBreakdown memory;
  bool fits = false;
  std::vector<std::string> notes;        // explanations: why this EP, what limits, what was assumed
};

struct PlanCandidate {
  Plan plan;
  PlanEstimate estimate;
};

// Candidates dropped for one reason ("memory", "ep_divides_experts", ...).
struct RejectGroup {
  std::string reason;                    // short key
  int64_t count = 0;
  std::string example;                   // one full message: "tp=16 ... needs 162 GiB per device, has 144"
};

struct SearchResult {
  bool feasible = false;                 // false: `best` is the candidate closest to fitting
  PlanCandidate best;
  std::vector<PlanCandidate> runners_up; // next best distinct layouts, fastest first
  std::vector<PlanCandidate> pareto;     // time vs memory front over fitting plans, by memory
  std::vector<RejectGroup> rejected;     // by count, largest first
  int64_t candidates_enumerated = 0;
  int64_t candidates_evaluated = 0;      // fully costed (time + memory)
  double wall_s = 0;
  std::vector<std::string> explanation;  // why the best plan (EP/FSDP split, limits)
};

// Searches the plan space. Returns an error only for a bad request; "nothing fits" is a result
// with feasible == false (the CLI maps it to exit 4 = kInfeasible and prints the arithmetic).
Expected<SearchResult> SearchPlans(const PlanRequest& req);

// Costs one layout. Errors: the plan is invalid for this model/topology (message names factors).
Expected<PlanEstimate> EvaluatePlan(const PlanRequest& req, const Plan& plan);

// Smallest device count (multiples of the topology's first-tier group, same device and tiers,
// up to `max_world`) at which SearchPlans finds a fitting plan. kInfeasible when none up to max.
struct WorldSizeResult {
  int64_t world = 0;
  PlanCandidate best;
  std::vector<std::string> tried;        // "256: needs 151.2 GiB, has 132.5" lines
};
Expected<WorldSizeResult> SmallestFittingWorld(const PlanRequest& req, int64_t max_world);

// Copy of `t` resized to `world` devices (tiers clamped/extended to span it).
Topology ResizeTopology(const Topology& t, int64_t world);

// Human-readable report (the `onboard plan` text) and machine-readable JSON.
std::string FormatSearchResult(const PlanRequest& req, const SearchResult& r);
std::string FormatEstimate(const PlanRequest& req, const Plan& plan, const PlanEstimate& e);
std::string SearchResultToJson(const PlanRequest& req, const SearchResult& r);   // pretty, stable keys
std::string EstimateToJson(const Plan& plan, const PlanEstimate& e);
std::string PlanSummary(const Plan& plan);  // "dp_rep=1 fsdp=2 tp=1 pp=1 ep=64 efsdp=2 mb=1x8 rc=KDA:full,..."

}  // namespace onboard
