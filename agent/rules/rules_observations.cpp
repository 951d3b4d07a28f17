// Observations the rules and the reports share: loss trend, expert loads, comm share, peak memory.
// Units: loss in nats, seconds, bytes, tokens.
#include <algorithm>
#include <cmath>
#include <numeric>

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

std::vector<double> MeasuredExpertLoad(const ProbeResult& p) {
  std::vector<double> load;
  for (const auto& st : p.steps)
    for (const auto& layer : st.expert_load) {
      if (load.size() < layer.size()) load.resize(layer.size(), 0.0);
      for (size_t e = 0; e < layer.size(); ++e) load[e] += static_cast<double>(layer[e]);
    }
  return load;
}

std::vector<double> RankLoads(const std::vector<double>& expert_load, int64_t ep,
                              const std::vector<int64_t>& placement) {
  ONBOARD_ASSERT(ep >= 1, "ep must be >= 1");
  std::vector<double> ranks(static_cast<size_t>(ep), 0.0);
  const int64_t n = static_cast<int64_t>(expert_load.size());
  const int64_t per_rank = std::max<int64_t>(1, (n + ep - 1) / ep);
  for (int64_t e = 0; e < n; ++e) {
    int64_t r = placement.size() == expert_load.size() ? placement[e] : e / per_rank;
    ONBOARD_ASSERT(r >= 0 && r < ep, "placement rank out of range");
    ranks[r] += expert_load[e];
  }
  return ranks;
}

double MaxOverMean(const std::vector<double>& v) {
  if (v.empty()) return 1.0;
  double sum = std::accumulate(v.begin(), v.end(), 0.0);
  if (sum <= 0) return 1.0;
  double mean = sum / static_cast<double>(v.size());
  return *std::max_element(v.begin(), v.end()) / mean;
}

CommShare ComputeCommShare(const ProbeResult& p) {
  CommShare c;
  size_t begin = p.steps.size() > 1 ? 1 : 0;  // step 0 pays one-off set-up costs
  int n = 0;
  for (size_t i = begin; i < p.steps.size(); ++i) {
    const auto& st = p.steps[i];
    if (st.step_s <= 0) continue;
    c.step_s += st.step_s;
    c.comm_s += st.comm.total();
    c.compute_s += st.compute_s;
    ++n;
  }
  if (n == 0) return c;
  c.step_s /= n;
  c.comm_s /= n;
  c.compute_s /= n;
  c.share = c.step_s > 0 ? c.comm_s / c.step_s : 0;
  return c;
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
