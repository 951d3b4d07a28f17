// Kernel loss parity (see loss_parity.h).
#include "validators/loss_parity.h"

#include <cmath>
#include <cstdio>

namespace onboard {

Expected<LossParityReport> CheckLossParity(const std::vector<double>& gen, const std::vector<double>& ref,
                                           double rel_tol) {
  // Step 1: the inputs.
  if (!(rel_tol > 0)) return BadInput("loss parity", "rel_tol", "must be > 0", std::to_string(rel_tol));
  if (ref.empty()) return BadInput("loss parity", "reference", "needs at least one step", "0 steps");
  if (gen.size() != ref.size())
    return BadInput("loss parity", "generated",
                    "must have one loss per reference step (" + std::to_string(ref.size()) + ")",
                    std::to_string(gen.size()) + " steps");
  // Step 2: the largest relative difference per step (a non-finite loss is a failure to name).
  LossParityReport r;
  r.steps = static_cast<int64_t>(ref.size());
  for (size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(gen[i]) || !std::isfinite(ref[i]))
      return BadInput("loss parity", "loss", "step " + std::to_string(i) + " is not finite",
                      std::to_string(gen[i]) + " vs " + std::to_string(ref[i]));
    const double rel = std::abs(gen[i] - ref[i]) / std::max(std::abs(ref[i]), 1e-30);
    if (rel > r.max_rel || r.worst_step < 0) {
      r.max_rel = rel;
      r.worst_step = static_cast<int64_t>(i);
    }
  }
  // Step 3: the verdict.
  r.pass = r.max_rel <= rel_tol;
  char line[200];
  std::snprintf(line, sizeof line,
                "loss parity %s: max relative difference %.3g at step %lld of %lld (tolerance %.3g)",
                r.pass ? "ok" : "FAILED", r.max_rel, static_cast<long long>(r.worst_step),
                static_cast<long long>(r.steps), rel_tol);
  r.message = line;
  return r;
}

}  // namespace onboard
