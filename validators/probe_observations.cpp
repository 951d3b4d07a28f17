// Probe observations, computed once for the probe report and the loop (see probe_observations.h).
#include "validators/probe_observations.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "core/number_text.h"

namespace onboard {
namespace {

// The observations' digits: 3 significant.
std::string Num(double v) { return FormatSignificant(v, 3); }
std::string Pct(double share) { return Num(100.0 * share) + "%"; }

}  // namespace

Status CheckThresholdRanges(std::initializer_list<ThresholdRange> ranges) {
  for (const ThresholdRange& r : ranges)
    ONBOARD_RETURN_IF_ERROR(CheckRange("thresholds", r.field, r.value, r.lo, r.hi));
  return Status::Ok();
}

Status ObservationThresholds::Validate() const {
  ONBOARD_RETURN_IF_ERROR(CheckThresholdRanges({
      {"thresholds.expert_imbalance", expert_imbalance, 1.0, 100},
      {"thresholds.comm_share", comm_share, 0.0, 1.0},
      {"thresholds.divergence_factor", divergence_factor, 1.0, 100},
  }));
  if (!(divergence_factor > 1))  // a factor of 1 would call every loss above the minimum diverged
    return BadInput("thresholds", "thresholds.divergence_factor", "must be > 1", Num(divergence_factor));
  return Status::Ok();
}

Expected<DivergenceReport> ObserveDivergence(const std::vector<double>& losses,
                                             const ObservationThresholds& th) {
  ONBOARD_RETURN_IF_ERROR(th.Validate());
  ConvergenceCriteria c;  // the curve check's own margin and warm-up steps
  c.divergence_factor = th.divergence_factor;
  DivergenceReport r;
  ONBOARD_ASSIGN_OR_RETURN(r.curve, CheckConvergence(losses, c));
  r.diverged =
      r.curve.verdict == ConvergenceVerdict::kNaN || r.curve.verdict == ConvergenceVerdict::kDiverged;
  return r;
}

Expected<CommShareReport> ObserveCommShare(const StepTimes& t, const ObservationThresholds& th) {
  const std::string f = "probe steps";
  ONBOARD_RETURN_IF_ERROR(th.Validate());
  const size_t n = t.step_s.size();
  if (n == 0) return BadInput(f, "step_s", "is empty", "0");
  if (!t.compute_s.empty() && t.compute_s.size() != n)
    return BadInput(f, "compute_s", "needs one time per step (" + std::to_string(n) + ")",
                    std::to_string(t.compute_s.size()));
  for (const auto& [kind, secs] : t.seconds_by_kind)
    if (secs.size() != n)
      return BadInput(f, kind, "needs one time per step (" + std::to_string(n) + ")",
                      std::to_string(secs.size()));
  // Step 1: the steps averaged: the first pays one-off set-up costs (rendezvous, first allocations,
  // kernel builds), so it is left out when there are more; steps without a time are skipped.
  CommShareReport r;
  std::map<std::string, double> by_kind;
  for (size_t i = n > 1 ? 1 : 0; i < n; ++i) {
    if (!(t.step_s[i] > 0)) continue;
    double comm = 0;
    for (const auto& [kind, secs] : t.seconds_by_kind) {
      by_kind[kind] += secs[i];
      comm += secs[i];
    }
    r.step_s += t.step_s[i];
    r.comm_s += comm;
    r.compute_s += t.compute_s.empty() ? std::max(0.0, t.step_s[i] - comm) : t.compute_s[i];
    ++r.steps;
  }
  if (r.steps == 0) return BadInput(f, "step_s", "mean step time must be > 0", "0");
  // Step 2: means and shares.
  const double k = static_cast<double>(r.steps);
  r.step_s /= k;
  r.comm_s /= k;
  r.compute_s /= k;
  r.share = r.comm_s / r.step_s;
  double largest = 0;
  for (const auto& [kind, secs] : by_kind) {
    const double sh = secs / k / r.step_s;
    r.share_by_kind[kind] = sh;
    if (sh > largest) {
      largest = sh;
      r.largest = kind;
    }
  }
  r.comm_bound = r.share > th.comm_share;
  std::ostringstream os;
  os << "step " << Num(r.step_s * 1e3) << " ms: compute " << Pct(std::max(0.0, 1.0 - r.share));
  for (const auto& [kind, sh] : r.share_by_kind) os << ", " << kind << " " << Pct(sh);
  if (r.comm_bound)
    os << "; communication " << Pct(r.share) << " above " << Pct(th.comm_share) << " (largest " << r.largest
       << "): communication-bound";
  r.message = os.str();
  return r;
}

Expected<MemoryReport> CheckMemory(double measured, double predicted, double tolerance) {
  const std::string f = "probe memory";
  if (!(measured > 0)) return BadInput(f, "measured_bytes", "must be > 0", Num(measured));
  if (!(predicted > 0)) return BadInput(f, "predicted_bytes", "must be > 0", Num(predicted));
  if (!(tolerance > 1)) return BadInput(f, "tolerance", "must be > 1", Num(tolerance));
  MemoryReport r;
  r.measured_bytes = measured;
  r.predicted_bytes = predicted;
  r.ratio = measured / predicted;
  r.within = r.ratio <= tolerance && r.ratio >= 1.0 / tolerance;
  r.message = "peak memory " + Num(measured / 1048576.0) + " MiB measured vs " + Num(predicted / 1048576.0) +
              " MiB predicted (ratio " + Num(r.ratio) + ", " + (r.within ? "within " : "outside ") +
              Num(tolerance) + "x)";
  return r;
}

Expected<ExpertBalanceReport> ObserveExpertBalance(const std::vector<std::vector<int64_t>>& tokens,
                                                   const ObservationThresholds& th) {
  const std::string f = "expert load";
  ONBOARD_RETURN_IF_ERROR(th.Validate());
  const double threshold = th.expert_imbalance;
  if (tokens.empty()) return BadInput(f, "layers", "is empty", "0");
  ExpertBalanceReport r;
  const size_t experts = tokens[0].size();
  for (size_t l = 0; l < tokens.size(); ++l) {
    if (tokens[l].size() != experts || experts == 0)
      return BadInput(f, "layer " + std::to_string(l), "needs " + std::to_string(experts) + " expert counts",
                      std::to_string(tokens[l].size()));
    int64_t dead = 0;
    for (int64_t c : tokens[l]) {
      if (c < 0) return BadInput(f, "layer " + std::to_string(l), "negative count", std::to_string(c));
      dead += c == 0;
    }
    const double ratio = MaxOverMean(std::vector<double>(tokens[l].begin(), tokens[l].end()));
    r.max_over_mean.push_back(ratio);
    r.dead_experts.push_back(dead);
    if (ratio > r.worst) {
      r.worst = ratio;
      r.worst_layer = static_cast<int64_t>(l);
    }
  }
  r.balanced = r.worst <= threshold;
  r.message = "expert load max/mean: worst " + Num(r.worst) + " (MoE layer " + std::to_string(r.worst_layer) +
              ")" + (r.balanced ? " <= " : " > ") + Num(threshold) +
              (r.balanced ? ": balanced" : ": imbalanced");
  return r;
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

RankBalance ObserveRankBalance(const std::vector<double>& expert_load, int64_t ep,
                               const std::vector<int64_t>& placement, const ObservationThresholds& th) {
  RankBalance b;
  b.rank_load = RankLoads(expert_load, ep, placement);
  b.expert_max_over_mean = MaxOverMean(expert_load);
  b.rank_max_over_mean = ep > 1 ? MaxOverMean(b.rank_load) : b.expert_max_over_mean;
  b.imbalanced = b.rank_max_over_mean > th.expert_imbalance;
  return b;
}

}  // namespace onboard
