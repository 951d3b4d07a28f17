// Probe measurement checks (see probe_checks.h).
#include "validators/probe_checks.h"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace onboard {
namespace {

std::string Pct(double share) {
  std::ostringstream os;
  os.precision(3);
  os << 100.0 * share << "%";
  return os.str();
}

std::string Num(double v) {
  std::ostringstream os;
  os.precision(3);
  os << v;
  return os.str();
}

double MeanOf(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0.0 : s / static_cast<double>(v.size());
}

}  // namespace

Expected<CommShareReport> CheckCommShare(const std::vector<double>& step_s,
                                         const std::map<std::string, std::vector<double>>& by_kind,
                                         double threshold) {
  const std::string f = "probe steps";
  if (step_s.empty()) return BadInput(f, "step_s", "is empty", "0");
  if (!(threshold > 0 && threshold <= 1))
    return BadInput(f, "threshold", "must be in (0, 1]", Num(threshold));
  CommShareReport r;
  r.step_s = MeanOf(step_s);
  if (!(r.step_s > 0)) return BadInput(f, "step_s", "mean step time must be > 0", Num(r.step_s));
  double total = 0, worst = 0;
  std::string worst_kind;
  for (const auto& [kind, secs] : by_kind) {
    if (secs.size() != step_s.size())
      return BadInput(f, kind, "needs one time per step (" + std::to_string(step_s.size()) + ")",
                      std::to_string(secs.size()));
    const double sh = MeanOf(secs) / r.step_s;
    r.share[kind] = sh;
    total += sh;
    if (sh > worst) { worst = sh; worst_kind = kind; }
  }
  r.compute_share = std::max(0.0, 1.0 - total);
  std::ostringstream os;
  os << "step " << Num(r.step_s * 1e3) << " ms: compute " << Pct(r.compute_share);
  for (const auto& [kind, sh] : r.share) os << ", " << kind << " " << Pct(sh);
  if (worst > threshold) {
    r.bottleneck = worst_kind;
    os << "; " << worst_kind << " above " << Pct(threshold) << ": communication-bound";
  }
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
  r.message = "peak memory " + Num(measured / 1048576.0) + " MiB measured vs " +
              Num(predicted / 1048576.0) + " MiB predicted (ratio " + Num(r.ratio) + ", " +
              (r.within ? "within " : "outside ") + Num(tolerance) + "x)";
  return r;
}

Expected<ExpertBalanceReport> CheckExpertBalance(const std::vector<std::vector<int64_t>>& tokens,
                                                 double threshold) {
  const std::string f = "expert load";
  if (tokens.empty()) return BadInput(f, "layers", "is empty", "0");
  if (!(threshold >= 1)) return BadInput(f, "threshold", "must be >= 1", Num(threshold));
  ExpertBalanceReport r;
  const size_t experts = tokens[0].size();
  for (size_t l = 0; l < tokens.size(); ++l) {
    if (tokens[l].size() != experts || experts == 0)
      return BadInput(f, "layer " + std::to_string(l), "needs " + std::to_string(experts) +
                      " expert counts", std::to_string(tokens[l].size()));
    int64_t sum = 0, mx = 0, dead = 0;
    for (int64_t c : tokens[l]) {
      if (c < 0) return BadInput(f, "layer " + std::to_string(l), "negative count", std::to_string(c));
      sum += c;
      mx = std::max(mx, c);
      dead += c == 0;
    }
    const double mean = static_cast<double>(sum) / static_cast<double>(experts);
    const double ratio = mean > 0 ? static_cast<double>(mx) / mean : 1.0;
    r.max_over_mean.push_back(ratio);
    r.dead_experts.push_back(dead);
    if (ratio > r.worst) { r.worst = ratio; r.worst_layer = static_cast<int64_t>(l); }
  }
  r.balanced = r.worst <= threshold;
  r.message = "expert load max/mean: worst " + Num(r.worst) + " (MoE layer " +
              std::to_string(r.worst_layer) + ")" + (r.balanced ? " <= " : " > ") + Num(threshold) +
              (r.balanced ? ": balanced" : ": imbalanced");
  return r;
}

}  // namespace onboard
