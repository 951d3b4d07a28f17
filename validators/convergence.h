// Convergence check of a training loss curve: converged / not converged / diverged / NaN /
// plateau, with the step that decided it. Plain vectors in, so any trainer can use it (the probe
// in backends/, a real run's metrics).
// Units: loss in nats per token; steps are 0-based indices into the curve.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace onboard {

struct ConvergenceCriteria {
  double target_fraction = 0.6;   // converged: mean of the last `window` losses < fraction * start
  int64_t window = 3;             // losses averaged at the start and at the end
  double divergence_factor = 2.0; // diverged: loss > factor * running minimum (after min_steps)
  double divergence_margin = 0.5; //   ...and more than this many nats above it (noise at low loss)
  int64_t min_steps = 3;          // steps before divergence/plateau checks apply
  int64_t plateau_window = 10;    // plateau: best loss of the last W steps improved by less than...
  double plateau_tolerance = 0.01;//   ...this fraction of the best loss before them
  Status Validate() const;        // names the field and value
};

enum class ConvergenceVerdict { kConverged, kNotConverged, kDiverged, kNaN, kPlateau,
                                kNotLearned };  // kNotLearned: validators/learning_verdict.h
const char* ConvergenceVerdictName(ConvergenceVerdict v);  // "converged", "diverged", "nan", ...

struct ConvergenceReport {
  ConvergenceVerdict verdict = ConvergenceVerdict::kNotConverged;
  int64_t step = -1;              // step that decided it (first NaN, divergence, plateau start)
  double start_loss = 0;          // mean of the first `window` losses
  double final_loss = 0;          // mean of the last `window` losses
  double min_loss = 0;
  double ratio = 0;               // final / start
  std::string message;            // one line: "diverged at step 7: loss 41.2 > 2 x min 3.10"
};

// Order of precedence: NaN/Inf, divergence, converged, plateau, not converged.
// Errors: empty curve or invalid criteria.
Expected<ConvergenceReport> CheckConvergence(const std::vector<double>& losses,
                                             const ConvergenceCriteria& criteria);

}  // namespace onboard
