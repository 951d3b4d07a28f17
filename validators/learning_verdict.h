// Learning verdict of a probe task: did the model learn what the task needs, measured against the
// task's own baselines? The loss curve alone (validators/convergence.h) only says the loss fell;
// a copy model that predicts symbol frequencies falls from ln(256) to ln(symbols) without copying.
// This is the ONE home of the learning thresholds (documented below; never tuned to pass a run).
//
// Verdicts, in order of precedence:
//   nan / diverged           from the curve (CheckConvergence); a divergence spike that stays at or
//                            below the no-learning baseline is not one (then the rules below decide)
//   converged                copy: final loss <= max_loss_over_baseline x no-learning baseline AND
//                            the skill metric met (final exact-match accuracy >= min_accuracy);
//                            "final" = the held-out evaluation of the final weights when given
//                            (the probe's copy task: 1024 sequences never trained on), else the
//                            mean of the last `window` training steps
//                            text (a held-out bigram baseline given): the held-out loss strictly
//                            below max_loss_over_bigram x the held-out bigram cross-entropy
//   not_learned              the loss fell (curve converged, or final loss below the no-learning
//                            baseline) but the bar above is not met: no skill
//   plateau / not_converged  from the curve
// Units: loss in nats per counted token; accuracy is a fraction of counted tokens in [0, 1].
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "core/status.h"
#include "validators/convergence.h"

namespace onboard {

// What a task's losses are measured against.
struct TaskBaselines {
  double no_learning_nats = 0;  // unigram entropy of the targets: a model that ignores the context
  double floor_nats = 0;        // best achievable (0 for an exact copy)
  bool has_accuracy = true;     // the task has an exact-match skill metric (copy: the copied half)
  // Text: cross-entropy of the best interpolated bigram on the held-out split
  // (backends/probe_text_split.h); finite = the held-out bar decides. NaN = none (copy).
  double bigram_nats = std::numeric_limits<double>::quiet_NaN();
};

struct LearningCriteria {
  // Copy: at most half the no-learning loss. Chosen as "clearly below": a model that copies only
  // the easy part of the sequence (e.g. the first symbol after the cue) stays above it.
  double max_loss_over_baseline = 0.5;
  // Copy: exact-match accuracy on the copied half. 90% = the task's answer is mostly right; a
  // frequency model scores 1/symbols (3% at 32 symbols).
  double min_accuracy = 0.9;
  // Text: the held-out loss must be below this x the held-out bigram cross-entropy. 1.0 = "below
  // the bigram": the model predicts from more than the previous byte, on text it never saw.
  double max_loss_over_bigram = 1.0;
  int64_t window = 5;           // final loss / accuracy = mean over the last `window` steps
  ConvergenceCriteria curve;    // NaN, divergence and plateau of the loss curve
  Status Validate() const;      // names the field and value
};

struct LearningReport {
  ConvergenceVerdict verdict = ConvergenceVerdict::kNotConverged;
  int64_t step = -1;            // step that decided it
  double final_loss = 0;        // mean of the last `window` losses (held-out loss when given)
  double final_accuracy = 0;    // mean of the last `window` accuracies (held-out when given; 0 when none)
  bool held_out = false;        // final_* are the held-out evaluation's
  double window_accuracy = 0;   // mean of the last `window` accuracies, held out or not (0 when none)
  double loss_target = 0;       // max_loss_over_baseline x no_learning_nats (text: x bigram, strict)
  std::string message;          // one line with the numbers
};

// losses[step]; accuracies[step] (same length, or empty when !baselines.has_accuracy);
// held_out_loss: the text task's loss on its held-out split (used when baselines.bigram_nats is
// finite; NaN there = not measured, never converged). held_out_accuracy (tasks with accuracy): with
// a finite held_out_loss, the final weights' held-out evaluation decides instead of the last steps'
// means. Errors: empty curve, mismatched lengths, invalid criteria.
Expected<LearningReport> CheckLearning(const std::vector<double>& losses,
                                       const std::vector<double>& accuracies, const TaskBaselines& baselines,
                                       const LearningCriteria& criteria,
                                       double held_out_loss = std::numeric_limits<double>::quiet_NaN(),
                                       double held_out_accuracy = std::numeric_limits<double>::quiet_NaN());

}  // namespace onboard
