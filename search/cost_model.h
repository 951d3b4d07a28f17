// Internal interface of the analytical cost model (search/cost_model.cpp: time,
// search/memory_model.cpp: memory, search/collectives.cpp: alpha-beta collectives on tiers,
// search/pipeline_split.cpp: balanced stage split). Public entry points are in search/planner.h.
//
// Units: seconds, bytes, FLOPs, FLOP/s, tokens. T = tokens per micro-batch = micro_batch * seq.
#pragma once

#include <string>
#include <vector>

#include "search/model_profile.h"
#include "search/planner.h"

namespace onboard {

// Physical constants of the model (documented in search/README.md). Not per-run factors.
struct CostConstants {
  double gemm_eff_max = 0.80;        // best achieved fraction of peak for large GEMMs
  double gemm_dim0 = 64;             // efficiency halves-ish when a GEMM dim is this small: eff = max/(1+d0/m+d0/n+d0/k)
  double flash_attn_eff = 0.55;      // fused softmax attention, fraction of peak
  double sparse_attn_eff = 0.40;     // DSA top-k attention + indexer
  double linear_attn_eff = 0.35;     // chunked KDA / gated DeltaNet / linear attention kernels
  double attn_bwd_ratio = 2.5;       // fused attention backward / forward (recomputes P inside)
  double hbm_eff = 0.80;             // achieved fraction of HBM bandwidth for elementwise kernels
  double elementwise_passes = 2.0;   // HBM bytes moved by elementwise ops per byte of saved activation (fwd)
  double unfused_score_passes = 8.0; // HBM bytes per score element fwd: write QK^T, read+write softmax, read for AV (+5 with dropout)
  double adam_bytes_per_param = 30;  // optimizer step HBM traffic per local parameter
  double a2a_buffers = 4.0;          // dispatch+combine send/recv buffers, in units of one dispatch volume
};

// Everything derived once per request; shared read-only by search threads.
struct CostContext {
  const PlanRequest* req = nullptr;
  ModelProfile prof;
  CostConstants k;
  double peak_flops = 0;             // FLOP/s per device at the compute dtype
  double hbm_bps = 0;                // bytes/s per device
  double base_weight_bytes = 2;      // bytes per frozen base parameter (LoRA) / working weight
  int64_t global_batch_target = 0;   // sequences per step requested (0 = 4M tokens)
};

CostContext MakeCostContext(const PlanRequest& req);

// --- collectives.cpp ---
enum class Collective { kAllReduce, kAllGather, kReduceScatter, kAllToAll, kP2P };
struct CommCost {
  double seconds = 0;
  std::string tier;                  // slowest tier crossed
};
// `bytes`: all-reduce / p2p / all-to-all: bytes each rank holds/sends; all-gather / reduce-scatter:
// the full (gathered) size. Group of n ranks with stride `stride` in the rank order (tp innermost).
// `beyond_first_tier` scales all-to-all traffic on tiers past the first (group-limited routing:
// a token reaches at most topk_groups nodes, so top_k copies become topk_groups across nodes).
CommCost CollectiveCost(const Topology& t, const CostCalibration& cal, Collective kind, int64_t n,
                        int64_t stride, double bytes, double beyond_first_tier = 1.0);

// --- pipeline_split.cpp ---
// Contiguous split of per-layer costs into `chunks` parts minimising the largest part.
// Returns the first layer index of each chunk (chunks entries; layers >= chunks).
std::vector<int64_t> BalancedSplit(const std::vector<double>& layer_cost, int64_t chunks);

// --- memory_model.cpp ---
struct StageMemoryInput {
  std::vector<int64_t> layers;       // layers on this device's stage (all virtual chunks)
  int64_t stage = 0;                 // 0-based pipeline stage
  bool first = false, last = false;  // holds embeddings / head
};
// Memory of the worst pipeline stage; `stage_out` = that stage's index.
MemoryBreakdown EstimateMemory(const CostContext& c, const Plan& p, const std::vector<int64_t>& chunk_starts,
                               int* stage_out);
// Activation bytes per token of layer `l` kept under plan p's recompute and TP/SP (dense part),
// and the routed-expert part per token on an EP rank.
double LayerActBytesPerToken(const CostContext& c, const Plan& p, size_t l, double* routed_out);
Recompute PolicyFor(const Plan& p, const std::string& kind);

// --- cost_model.cpp ---
// Full estimate (time terms + memory). Assumes ValidatePlan passed.
PlanEstimate EstimatePlan(const CostContext& c, const Plan& p);
// Memory only (cheap; used to prune before costing time).
MemoryBreakdown EstimatePlanMemory(const CostContext& c, const Plan& p);
// Stage split the time model uses (balanced by per-layer time unless the plan fixes it).
std::vector<int64_t> PlanStageStarts(const CostContext& c, const Plan& p);
// Extra forward seconds per micro-batch on the whole model if every block of `kind` used `level`.
double RecomputeSeconds(const CostContext& c, const Plan& p, const std::string& kind, Recompute level);
// Plan-level checks beyond ValidatePlan that need the model (heads per kind, layers, batch).
Status CheckPlanAgainstModel(const CostContext& c, const Plan& p);

}  // namespace onboard
