// Observations of a training probe beyond its learning verdict, computed once here for both users:
// the probe's own report lines (backends/probe_report.cpp) and the loop's rules (agent/rules/,
// through rules_observations.cpp). Each takes its threshold from ObservationThresholds, passed in:
//   - divergence: a loss far above the running minimum (the curve check of validators/convergence.h);
//   - communication share of the step time (the first, warm-up step left out);
//   - expert load balance: max/mean tokens per expert (per MoE layer) or per EP rank;
//   - memory: measured vs predicted peak.
// Plain numbers in (backends/ fills them from its ProbeStep records; agent/ from ProbeResult).
// Units: seconds, bytes, tokens; shares and ratios are dimensionless.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <string>
#include <vector>

#include "core/load_balance.h"
#include "core/status.h"
#include "validators/convergence.h"

namespace onboard {

// The thresholds of these observations: the one home of their defaults. agent::Thresholds extends
// this struct, so the loop and the probe's report judge with the same numbers.
//   expert_imbalance 1.25: an EP step waits for its busiest rank, so at 1.25 a fifth of the expert
//     compute is idle on the others; the loop re-places experts above it.
//   comm_share 0.35: above it the probe is communication-bound enough that the cost model's
//     bandwidths are recalibrated from it.
//   divergence_factor: ConvergenceCriteria's (a loss > factor x the running minimum and
//     divergence_margin nats above it): it also catches a blow-up after the loss first fell,
//     which a last-window / first-window ratio misses.
struct ObservationThresholds {
  double expert_imbalance = 1.25;  // max/mean tokens per expert or EP rank above this = imbalanced
  double comm_share = 0.35;        // collective seconds / step seconds above this = comm-bound
  double divergence_factor =
      ConvergenceCriteria{}.divergence_factor;  // loss / running min above this = diverged
  Status Validate() const;                      // each in range; the message names "thresholds.<field>"
};

// One inclusive range per threshold field: the shared form of ObservationThresholds::Validate and
// agent::Thresholds::Validate ("thresholds: field 'thresholds.comm_share': must be in [0, 1] ...").
struct ThresholdRange {
  const char* field;
  double value, lo, hi;
};
Status CheckThresholdRanges(std::initializer_list<ThresholdRange> ranges);

// ---- Divergence ----
struct DivergenceReport {
  bool diverged = false;    // NaN/Inf loss, or a loss > factor x the running minimum
  ConvergenceReport curve;  // the curve check it came from (step, min_loss, message)
};
// losses[step] in nats. Errors: empty curve, bad factor.
Expected<DivergenceReport> ObserveDivergence(const std::vector<double>& losses,
                                             const ObservationThresholds& th);

// ---- Communication share ----
struct StepTimes {
  std::vector<double> step_s;     // wall time of each step (slowest rank)
  std::vector<double> compute_s;  // optional: step minus comm on the slowest rank
  std::map<std::string, std::vector<double>> seconds_by_kind;  // collective kind -> seconds per step
};
struct CommShareReport {
  int64_t steps = 0;                            // steps averaged (the first, warm-up step left out)
  double step_s = 0;                            // mean step time
  double comm_s = 0;                            // mean collective seconds (all kinds)
  double compute_s = 0;                         // mean compute seconds (step - comm when not given)
  double share = 0;                             // comm_s / step_s
  std::map<std::string, double> share_by_kind;  // kind -> mean seconds / mean step time
  std::string largest;                          // kind with the largest share ("" when none)
  bool comm_bound = false;                      // share > threshold
  std::string message;                          // "step 12 ms: compute 59%, all_to_all 41%; ..."
};
// Errors: no step, mismatched lengths, non-positive mean step time.
Expected<CommShareReport> ObserveCommShare(const StepTimes& times, const ObservationThresholds& th);

// ---- Memory: measured vs predicted ----
struct MemoryReport {
  double measured_bytes = 0;
  double predicted_bytes = 0;
  double ratio = 0;     // measured / predicted
  bool within = false;  // ratio in [1/tolerance, tolerance]
  std::string message;
};
// tolerance > 1 (e.g. 2: measured within 2x of predicted either way). Errors: non-positive inputs.
Expected<MemoryReport> CheckMemory(double measured_bytes, double predicted_bytes, double tolerance);

// ---- Expert balance ----
struct ExpertBalanceReport {
  std::vector<double> max_over_mean;  // per MoE layer (1.0 = perfectly even)
  double worst = 0;
  int64_t worst_layer = -1;           // index into the input vector
  std::vector<int64_t> dead_experts;  // per layer: experts that got no token
  bool balanced = true;               // worst <= threshold
  std::string message;
};
// tokens[layer][expert]. Errors: empty, ragged or negative counts.
Expected<ExpertBalanceReport> ObserveExpertBalance(const std::vector<std::vector<int64_t>>& tokens,
                                                   const ObservationThresholds& th);

// Tokens per EP rank for a placement (expert -> rank; empty = contiguous blocks). ep >= 1.
std::vector<double> RankLoads(const std::vector<double>& expert_load, int64_t ep,
                              const std::vector<int64_t>& placement);
struct RankBalance {
  std::vector<double> rank_load;    // tokens per EP rank
  double expert_max_over_mean = 1;  // over experts
  double rank_max_over_mean = 1;    // over EP ranks (= the experts' when ep == 1)
  bool imbalanced = false;          // rank_max_over_mean > threshold
};
// expert_load[e]: tokens per expert summed over layers and steps.
RankBalance ObserveRankBalance(const std::vector<double>& expert_load, int64_t ep,
                               const std::vector<int64_t>& placement, const ObservationThresholds& th);

}  // namespace onboard
