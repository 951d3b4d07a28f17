// INTERNAL to backends/ (torch-free). Turning the ranks' JSON into one ProbeResult, and the
// verdicts and cost-model comparison that go with it.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backends/probe.h"
#include "core/topology.h"

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

// "copy task: floor 0 nats ..." and the two reference levels (floor, no-copy baseline).
std::string TaskFloor(const ProbeConfig& config, double* floor_nats, double* baseline_nats);

// This machine as a Topology: one "device" = one probe rank (threads_per_rank cores) with the
// measured fp32 GEMM rate and memcpy bandwidth, one loopback tier with the measured TCP loopback
// bandwidth and latency (machine_topology.cpp). Takes ~0.5 s.
Topology MeasureThisMachine(int64_t ranks, int64_t threads_per_rank);

// search/planner.h EvaluatePlan for the proxy layout (dp_shard = fsdp, dp_replicate = ranks/fsdp,
// ep, full recompute, micro batch = batch/ranks) on `topo`.
ProbePrediction PredictProbe(const ProxySpec& spec, const ProbeConfig& config, const Topology& topo);

}  // namespace onboard::backends
