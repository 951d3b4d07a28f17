// Training probe: a scaled-down proxy of a model, trained for real across N processes on this
// machine (or several, torchrun-style) with the planned layout (FSDP sharding + expert
// parallelism) over LibTorch c10d. This header is torch-free on purpose: agent code includes it.
//
// Entry points:
//   ProxyFromModel(model)        -> ProxySpec (same block pattern, scaled to fit this machine)
//   RunProbe(model, config)      -> ProbeResult (launches worker processes, gathers their JSON)
//   RunProbeWorker(args)         -> one rank's training loop (the hidden `onboard probe-worker`)
//   ProbeResultToJson / FormatProbeResult
//
// Units: seconds (s), bytes, tokens, FLOPs; loss in nats per predicted token; lr dimensionless.
//
// The types live in three headers, included here: backends/proxy_spec.h (the proxy model),
// backends/probe_config.h (ProbeConfig) and backends/probe_result.h (ProbeResult).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "backends/probe_config.h"
#include "backends/probe_result.h"
#include "backends/proxy_spec.h"
#include "core/model_ir.h"
#include "core/status.h"

namespace onboard {

// What a caller sees of a running probe. OnStep: rank 0's record of each recorded step, in order
// (steps 0, 1, ...; not the LoRA base phase), called on the launcher's thread as the step ends
// (read from <out_dir>/steps.jsonl). Its loss, grad_norm, lr and accuracy are the global values
// (the same as ProbeResult::steps); step_s, comm, compute_s, peak_rss_bytes, expert_load and
// indexer_kl are rank 0's own (the result merges the ranks). cancelled(): polled while the workers
// run; once true the launcher sends them SIGTERM, SIGKILL after kProbeCancelGraceS, and returns a
// "cancelled" error.
class ProbeObserver {
 public:
  virtual ~ProbeObserver() = default;
  virtual void OnStep(const ProbeStep& /*step*/) {}
  virtual bool cancelled() const { return false; }
};
inline constexpr double kProbeCancelGraceS = 2.0;  // seconds between SIGTERM and SIGKILL on cancel

// Launches config.ranks worker processes (fork/exec `<worker_binary> probe-worker ...`), a TCPStore
// on loopback (free port) for rendezvous, watches them, and gathers their JSON. A rank that exits
// non-zero or is killed ends the probe: the others are killed and the error names the rank and why.
// Errors: bad config (kBadInput), a rank died / timed out (kNetwork), workers missing (kNotFound).
// Each worker gets a parent-death signal (SIGKILL): it cannot outlive the launching thread.
Expected<ProbeResult> RunProbe(const ModelIR& model, const ProbeConfig& config, ProbeObserver* observer = nullptr);
// Same, from an explicit proxy spec.
Expected<ProbeResult> RunProbeSpec(const ProxySpec& spec, const ProbeConfig& config,
                                   ProbeObserver* observer = nullptr);

// One rank. Rendezvous: master_addr/master_port (TCPStore client; rank 0 serves when
// serve_store). Writes `<out_dir>/rank<r>.json` on success.
struct ProbeWorkerArgs {
  std::string spec_file;             // JSON written by RunProbe: {"spec":..., "config":...}
  int64_t rank = 0;
  int64_t world = 1;
  std::string master_addr = "127.0.0.1";
  int64_t master_port = 0;
  bool serve_store = false;          // rank 0 hosts the TCPStore (torchrun-style launch)
  std::string out_file;              // result JSON of this rank
  // Rank 0 only: its record of each recorded step, one ProbeStep line (backends/probe_step_codec.h)
  // appended and flushed per step; the launcher follows it for ProbeObserver::OnStep. Empty = none.
  std::string steps_file;
};
Status RunProbeWorker(const ProbeWorkerArgs& args);

// JSON (de)serialisation used between launcher and workers and by `--json`.
std::string ProbeSpecConfigToJson(const ProxySpec& spec, const ProbeConfig& config);
Status ProbeSpecConfigFromJson(const std::string& text, ProxySpec* spec, ProbeConfig* config);
std::string ProbeResultToJson(const ProbeResult& result);
// The prediction's measured-beside-predicted part: {collectives: [{kind, term, measured_s, predicted_s,
// ratio}], pp_bubble, memory: {per-term bytes, predicted_bytes, measured_live_peak_bytes, ratio,
// dtype_note}}.
nlohmann::json PredictionComparisonToJson(const ProbePrediction& prediction);
// The measured pipeline bubble: the mean over the steps after the first of each step's max-over-ranks
// idle share of the pipeline span (0 without a pipeline).
double MeasuredPpBubble(const ProbeResult& result);
// The EP all-to-all per step, seconds, mean over the steps after the first of each step's max over
// ranks: exposed (the host blocked on it; without ProbeConfig::moe_overlap all of it) and hidden
// (in flight under compute) (issue 18).
struct MeasuredExpertAllToAll {
  double exposed_s = 0, hidden_s = 0;
};
MeasuredExpertAllToAll MeasuredExpertExchange(const ProbeResult& result);
// A round's expert communication (issue 18), report.json's "expert_comm": {nodes, ranks_per_node,
// placement ("contiguous" | "set"), physical_slots (replicas; 0 = none), overlap, the co-activation's
// per-token tier traffic over all MoE layers (TotalTraffic: nodes_per_token,
// cross_node_rows_per_token, cross_node_copies_per_token, slow_tier_bytes_per_token,
// rank_max_over_mean), a2a_exposed_s, a2a_hidden_s}; null without MoE routing.
nlohmann::json ExpertCommToJson(const ProbeResult& result);
nlohmann::json LossParityToJson(const ProbeLossParity& parity);  // one kernel's, with both curves
std::string FormatProbeResult(const ProbeResult& result);   // the `onboard probe` text report

}  // namespace onboard
