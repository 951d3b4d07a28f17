// The loss trend and peak memory the rules and the reports share (the probe observations
// themselves: validators/probe_observations.h, fed by backends/probe_step_series.h).
// Units: loss in nats, seconds, bytes, tokens.
#include <algorithm>
#include <cmath>

#include "agent/rules/rules.h"

namespace onboard::agent {

LossTrend ComputeLossTrend(const ProbeResult& p) {
  LossTrend t;
  const auto& s = p.steps;
  if (s.empty()) return t;
  // Step 1: windows of a quarter of the run (at least 1 step, at most 5).
  t.window = static_cast<int>(std::clamp<size_t>(s.size() / 4, 1, 5));
  double first = 0, last = 0;
  for (int i = 0; i < t.window; ++i) {
    first += s[i].loss;
    last += s[s.size() - 1 - i].loss;
  }
  t.first_mean = first / t.window;
  t.last_mean = last / t.window;
  // Step 2: any non-finite loss or grad norm means divergence.
  for (const auto& st : s) {
    if (!std::isfinite(st.loss) || !std::isfinite(st.grad_norm)) t.nonfinite = true;
    if (std::isfinite(st.grad_norm)) t.max_grad_norm = std::max(t.max_grad_norm, st.grad_norm);
  }
  t.ratio = t.first_mean > 0 ? t.last_mean / t.first_mean : (t.nonfinite ? INFINITY : 1.0);
  if (!std::isfinite(t.ratio)) t.nonfinite = true;
  return t;
}

CommShareReport ProbeCommShare(const ProbeResult& p, const ObservationThresholds& th) {
  Expected<CommShareReport> c = ObserveCommShare(ProbeStepTimes(p), th);
  return c.ok() ? *c : CommShareReport{};
}

double MeasuredPeakBytes(const ProbeResult& p) {
  double peak = 0;
  for (const auto& st : p.steps) peak = std::max(peak, static_cast<double>(st.peak_rss_bytes));
  return std::max(0.0, peak - static_cast<double>(p.baseline_rss_bytes));
}

nlohmann::json Decision::ToJson() const {
  return {{"round", round},         {"rule", rule},     {"family", family},
          {"observed", observed},   {"threshold", threshold},
          {"action", action},       {"changed", changed}};
}

}  // namespace onboard::agent
