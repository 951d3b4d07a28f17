// Rule family "memory": the probe's measured peak memory is above the cost model's prediction for
// the same proxy layout -> scale the chosen plan's predicted memory by the same ratio; when it no
// longer fits, recompute more (every block full) or, when already full, keep more HBM free so the
// search shards further; re-plan. Units: bytes; ratios dimensionless.
#include <algorithm>
#include <cstdio>

#include "agent/rules/rules.h"

namespace onboard::agent {
namespace {
constexpr double kMarginStep = 0.10;   // extra fraction of HBM kept free per firing
constexpr double kMaxMargin = 0.45;
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
}  // namespace

std::optional<Decision> RuleMemoryOverPrediction(const RoundEvidence& ev, const Thresholds& th, LoopKnobs& k) {
  if (!ev.probe || !ev.probe->prediction.available || ev.probe->prediction.memory_bytes <= 0)
    return std::nullopt;
  // Step 1: measured / predicted on the proxy.
  double measured = MeasuredPeakBytes(*ev.probe);
  double predicted = ev.probe->prediction.memory_bytes;
  double ratio = measured / predicted;
  if (measured <= 0 || ratio <= th.memory_over_prediction) return std::nullopt;

  Decision d;
  d.round = ev.round;
  d.rule = "memory_over_prediction";
  d.family = "memory";
  d.observed = {{"measured_peak_bytes", measured}, {"predicted_peak_bytes", predicted}, {"ratio", ratio}};
  char buf[256];
  std::snprintf(buf, sizeof(buf), "measured / predicted peak memory > %.2f", th.memory_over_prediction);
  d.threshold = buf;

  // Step 2: a tiny prediction is mostly fixed overhead (allocator, runtime): not evidence for the plan.
  if (predicted < th.memory_min_predicted_bytes) {
    std::snprintf(buf, sizeof(buf),
                  "prediction %.1f MiB is below %.0f MiB: the ratio is dominated by runtime and allocator "
                  "overheads of the small proxy, so it is not applied to the plan",
                  predicted / (1024.0 * 1024), th.memory_min_predicted_bytes / (1024.0 * 1024));
    d.action = buf;
    d.changed = nlohmann::json::object();
    return d;
  }
  // Step 3: does the full-model plan still fit with the same under-prediction?
  if (ev.plan) {
    const MemoryBreakdown& m = ev.plan->estimate.memory;
    double scaled = m.total * ratio;
    d.observed["plan_memory_bytes"] = m.total;
    d.observed["plan_memory_scaled_bytes"] = scaled;
    d.observed["plan_usable_bytes"] = m.usable();
    if (scaled <= m.usable()) {
      std::snprintf(buf, sizeof(buf),
                    "the chosen plan still fits with the measured ratio applied (%.1f of %.1f GiB); keep it",
                    scaled / kGiB, m.usable() / kGiB);
      d.action = buf;
      d.changed = nlohmann::json::object();
      return d;
    }
  }
  // Step 4: recompute more, then shard further.
  if (k.plan_constraints.recompute != Recompute::kFull) {
    d.changed = {
        {"recompute",
         {k.plan_constraints.recompute ? RecomputeName(*k.plan_constraints.recompute) : "searched", "full"}}};
    k.plan_constraints.recompute = Recompute::kFull;
    d.action = "measured memory is over the prediction and the plan would not fit: recompute every block "
               "fully, re-plan";
  } else {
    double old = k.plan_constraints.memory_margin;
    k.plan_constraints.memory_margin = std::min(kMaxMargin, old + kMarginStep);
    if (k.plan_constraints.memory_margin <= old) return std::nullopt;  // nothing left to change
    d.changed = {{"memory_margin", {old, k.plan_constraints.memory_margin}}};
    std::snprintf(buf, sizeof(buf),
                  "already recomputing fully: keep %.0f%% of HBM free so the search shards further, re-plan",
                  k.plan_constraints.memory_margin * 100);
    d.action = buf;
  }
  k.replan = true;
  return d;
}

}  // namespace onboard::agent
