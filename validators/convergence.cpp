// Loss-curve verdicts (see convergence.h).
#include "validators/convergence.h"

#include <algorithm>
#include <cmath>

#include "core/number_text.h"

namespace onboard {
namespace {

double Mean(const std::vector<double>& v, size_t first, size_t count) {
  double s = 0;
  for (size_t i = first; i < first + count; ++i) s += v[i];
  return s / static_cast<double>(count);
}

std::string Fmt(double v) { return FormatSignificant(v, 4); }  // the verdicts' digits

}  // namespace

const char* ConvergenceVerdictName(ConvergenceVerdict v) {
  switch (v) {
    case ConvergenceVerdict::kConverged: return "converged";
    case ConvergenceVerdict::kNotConverged: return "not_converged";
    case ConvergenceVerdict::kDiverged: return "diverged";
    case ConvergenceVerdict::kNaN: return "nan";
    case ConvergenceVerdict::kPlateau: return "plateau";
    case ConvergenceVerdict::kNotLearned: return "not_learned";
  }
  return "unknown";
}

Status ConvergenceCriteria::Validate() const {
  const std::string f = "convergence criteria";
  if (!(target_fraction > 0 && target_fraction < 1))
    return BadInput(f, "target_fraction", "must be in (0, 1)", Fmt(target_fraction));
  if (window < 1) return BadInput(f, "window", "must be >= 1", std::to_string(window));
  if (!(divergence_factor > 1))
    return BadInput(f, "divergence_factor", "must be > 1", Fmt(divergence_factor));
  if (!(divergence_margin >= 0))
    return BadInput(f, "divergence_margin", "must be >= 0", Fmt(divergence_margin));
  if (min_steps < 0) return BadInput(f, "min_steps", "must be >= 0", std::to_string(min_steps));
  if (plateau_window < 2)
    return BadInput(f, "plateau_window", "must be >= 2", std::to_string(plateau_window));
  if (!(plateau_tolerance >= 0 && plateau_tolerance < 1))
    return BadInput(f, "plateau_tolerance", "must be in [0, 1)", Fmt(plateau_tolerance));
  return Status::Ok();
}

Expected<ConvergenceReport> CheckConvergence(const std::vector<double>& losses,
                                             const ConvergenceCriteria& c) {
  ONBOARD_RETURN_IF_ERROR(c.Validate());
  if (losses.empty()) return BadInput("loss curve", "steps", "is empty", "0");
  ConvergenceReport r;
  const size_t n = losses.size();
  // Step 1: the first non-finite loss ends everything.
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(losses[i])) {
      r.verdict = ConvergenceVerdict::kNaN;
      r.step = static_cast<int64_t>(i);
      r.message = "NaN/Inf loss at step " + std::to_string(i);
      return r;
    }
  }
  const size_t w = std::min<size_t>(static_cast<size_t>(c.window), n);
  r.start_loss = Mean(losses, 0, w);
  r.final_loss = Mean(losses, n - w, w);
  r.min_loss = *std::min_element(losses.begin(), losses.end());
  r.ratio = r.start_loss > 0 ? r.final_loss / r.start_loss : 1.0;
  // Step 2: divergence: a loss far above the running minimum (or far above the start).
  double run_min = losses[0];
  for (size_t i = 1; i < n; ++i) {
    if (static_cast<int64_t>(i) >= c.min_steps &&
        losses[i] > run_min + c.divergence_margin &&
        (losses[i] > c.divergence_factor * run_min || losses[i] > c.divergence_factor * r.start_loss)) {
      r.verdict = ConvergenceVerdict::kDiverged;
      r.step = static_cast<int64_t>(i);
      r.message = "diverged at step " + std::to_string(i) + ": loss " + Fmt(losses[i]) + " > " +
                  Fmt(c.divergence_factor) + " x running min " + Fmt(run_min);
      return r;
    }
    run_min = std::min(run_min, losses[i]);
  }
  // Step 3: converged when the tail mean is below the target fraction of the start.
  if (r.final_loss < c.target_fraction * r.start_loss) {
    r.verdict = ConvergenceVerdict::kConverged;
    r.step = static_cast<int64_t>(n - 1);
    r.message = "converged: loss " + Fmt(r.start_loss) + " -> " + Fmt(r.final_loss) + " (" +
                Fmt(r.ratio) + " of start < " + Fmt(c.target_fraction) + ")";
    return r;
  }
  // Step 4: plateau: the best loss of the last W steps barely beats the best before them.
  const size_t pw = static_cast<size_t>(c.plateau_window);
  if (n >= pw + static_cast<size_t>(std::max<int64_t>(1, c.min_steps))) {
    const double before = *std::min_element(losses.begin(), losses.end() - static_cast<long>(pw));
    const double recent = *std::min_element(losses.end() - static_cast<long>(pw), losses.end());
    if (recent > before * (1.0 - c.plateau_tolerance)) {
      r.verdict = ConvergenceVerdict::kPlateau;
      r.step = static_cast<int64_t>(n - pw);
      r.message = "plateau from step " + std::to_string(n - pw) + ": best loss of the last " +
                  std::to_string(pw) + " steps " + Fmt(recent) + " vs " + Fmt(before) +
                  " before (< " + Fmt(100 * c.plateau_tolerance) + "% better)";
      return r;
    }
  }
  r.verdict = ConvergenceVerdict::kNotConverged;
  r.step = static_cast<int64_t>(n - 1);
  r.message = "not converged: loss " + Fmt(r.start_loss) + " -> " + Fmt(r.final_loss) + " (" +
              Fmt(r.ratio) + " of start, target < " + Fmt(c.target_fraction) + ")";
  return r;
}

}  // namespace onboard
