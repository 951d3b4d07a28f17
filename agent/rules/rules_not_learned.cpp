// Rule family "learning": the probe's loss did not reach the learning bar of its task
// (validators/learning_verdict.h: not_learned, plateau or not_converged) -> train longer and, from
// the second time on, raise the learning rate, then re-probe. Bounded: the step scale doubles at
// most kMaxDoublings times in a run, after which the rule no longer fires (the report says the
// probe did not learn). Units: lr dimensionless; steps are optimizer steps.
#include <cstdio>

#include "agent/rules/rules.h"

namespace onboard::agent {
namespace {
constexpr double kStepsFactor = 2.0;   // next round trains 2x the steps (a longer schedule)
constexpr int kMaxDoublings = 2;       // at most 4x the requested steps
constexpr double kLrFactor = 1.5;      // second firing: lr * 1.5 (the schedule was too slow)

bool FailedToLearn(const std::string& verdict) {
  return verdict == "not_learned" || verdict == "plateau" || verdict == "not_converged";
}
}  // namespace

std::optional<Decision> RuleProbeNotLearned(const RoundEvidence& ev, const Thresholds&, LoopKnobs& k) {
  if (!ev.probe || ev.probe->steps.empty() || !FailedToLearn(ev.probe->convergence)) return std::nullopt;
  if (k.probe_step_doublings >= kMaxDoublings) return std::nullopt;  // bounded: give up, report it
  // Step 1: what was observed.
  const ProbeResult& p = *ev.probe;
  Decision d;
  d.round = ev.round;
  d.rule = "probe_not_learned";
  d.family = "learning";
  d.observed = {{"validator", p.convergence}, {"final_loss", p.final_loss}, {"loss_target", p.loss_target},
                {"skill_metric", p.skill_metric}, {"skill", p.skill}, {"skill_target", p.skill_target},
                {"steps", static_cast<int64_t>(p.steps.size())}};
  d.threshold = "final loss <= loss_target and skill >= skill_target (validators/learning_verdict.h)";
  // Step 2: longer schedule; from the second firing also a higher learning rate.
  const double old_scale = k.probe_steps_scale, old_lr = k.learning_rate;
  k.probe_steps_scale = old_scale * kStepsFactor;
  ++k.probe_step_doublings;
  if (k.probe_step_doublings > 1) k.learning_rate = old_lr * kLrFactor;
  k.reprobe = true;
  d.changed = {{"probe_steps_scale", {old_scale, k.probe_steps_scale}}};
  if (k.learning_rate != old_lr) d.changed["learning_rate"] = {old_lr, k.learning_rate};
  char buf[160];
  std::snprintf(buf, sizeof buf, "train %.3gx the probe steps%s, re-probe", k.probe_steps_scale,
                k.learning_rate != old_lr ? " at 1.5x the learning rate" : "");
  d.action = buf;
  return d;
}

}  // namespace onboard::agent
