// INTERNAL to backends/ (torch-free). Turning the ranks' JSON into one ProbeResult, and the
// verdicts and cost-model comparison that go with it.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backends/probe.h"
#include "core/topology.h"
#include "search/planner.h"

namespace onboard::backends {

// One rank's result file (rank<r>.json, written by RunProbeWorker) and where it was read from.
struct RankFile {
  std::string path;
  nlohmann::json j;
};

// Loss / grad norm / lr / accuracy from rank 0 (all ranks hold the same reduced values); step time,
// compute time, per-collective time and peak RSS: max over ranks; expert load and indexer KL: sum
// over ranks. Every step record is decoded by probe_step_codec.h; a record it refuses, or ranks
// whose records disagree (step number, MoE/MLA layers, expert count), is kBadInput naming the file.
Status MergeRankResults(const std::vector<RankFile>& ranks, ProbeResult* result);

// Task floor, validator verdicts (convergence, comm share, expert balance, memory) and the cost
// model's prediction for the same layout on a topology of this machine.
void FinishProbeResult(ProbeResult* result);

// Text task: the held-out baselines from the file (probe_text_split.h) into result's baseline_nats
// and bigram_nats (NaN, as its floor, when the file cannot be read again), and the line that says so.
std::string TextTaskFloor(const ProbeConfig& config, ProbeResult* result);

// "copy task: floor 0 nats ..." and the two reference levels (floor, no-copy baseline).
std::string TaskFloor(const ProxySpec& spec, const ProbeConfig& config, double* floor_nats,
                      double* baseline_nats);

// This machine as a Topology: one "device" = one probe rank (threads_per_rank cores) with the
// measured fp32 GEMM rate and memcpy bandwidth, one loopback tier with the measured TCP loopback
// bandwidth and latency (machine_topology.cpp). Takes ~0.5 s.
Topology MeasureThisMachine(int64_t ranks, int64_t threads_per_rank);

// search/planner.h EvaluatePlan for the proxy layout (dp_shard = fsdp, dp_replicate = ranks/fsdp,
// ep, the config's recompute per block kind, its micro-batch and micro-steps) on `topo`.
ProbePrediction PredictProbe(const ProxySpec& spec, const ProbeConfig& config, const Topology& topo);
// The request and plan PredictProbe hands the cost model for the probe's layout (the one home of
// that mapping; bench_probe_memory sets the memory model's terms beside the measured ones with it).
void ProbePlanRequest(const ProxySpec& spec, const ProbeConfig& config, const Topology& topo,
                      PlanRequest* req, Plan* plan);
// Per proxy layer: the memory model's kept activation bytes of one micro-batch on one rank
// (memory_model.cpp LayerActBytesPerToken x tokens per rank, dense + routed part; model dtype, bf16).
std::vector<double> LayerActivationBytes(const PlanRequest& req, const Plan& plan);

// Measured beside predicted (probe_comparison.cpp). PredictedCollectives: one row per collective
// kind the probe times, with the cost model's term for it; MeasureCollectives fills the measured
// side and the ratio from the merged steps. PredictedMemory: the memory model's breakdown in the
// probe's dtype; MeasureMemory: the max over ranks of their live-tensor peaks, and the ratio.
// Issue 17 item 7's target: the live-tensor peak within 15% of the memory model (either way).
inline constexpr double kLiveMemoryTolerance = 1.15;
std::vector<CollectiveComparison> PredictedCollectives(const std::vector<TimeTerm>& terms);
void MeasureCollectives(const std::vector<ProbeStep>& steps, std::vector<CollectiveComparison>* rows);
MemoryComparison PredictedMemory(const MemoryBreakdown& model, const ProbeConfig& config, int64_t vocab);
void MeasureMemory(const std::vector<int64_t>& rank_peaks, MemoryComparison* memory);

}  // namespace onboard::backends
