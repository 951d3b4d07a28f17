// Rule family "divergence": the probe's loss blew up (non-finite, or far above its running minimum:
// validators/probe_observations.h ObserveDivergence) -> lower the learning rate, tighten gradient
// clipping, re-probe. (The probe's router always runs in fp32: there is no router knob to turn.)
// Units: loss in nats, lr dimensionless.
#include <cmath>
#include <cstdio>

#include "agent/rules/rules.h"

namespace onboard::agent {
namespace {
constexpr double kLrFactor = 0.3;      // new lr = old lr * 0.3
constexpr double kClipFactor = 0.5;    // new clip = old clip * 0.5 (1.0 when clipping was off)
constexpr double kClipFloor = 0.05;

std::string Fmt(const char* f, double a) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), f, a);
  return buf;
}
}  // namespace

std::optional<Decision> RuleProbeDiverged(const RoundEvidence& ev, const Thresholds& th, LoopKnobs& k) {
  if (!ev.probe || ev.probe->steps.empty()) return std::nullopt;
  // Step 1: the verdict: the probe observation (a loss far above its running minimum, or NaN/Inf),
  // with this run's threshold; a non-finite grad norm counts too.
  Expected<DivergenceReport> div = ObserveDivergence(ProbeLosses(*ev.probe), th);
  LossTrend t = ComputeLossTrend(*ev.probe);
  if (!div.ok() || !(div->diverged || t.nonfinite)) return std::nullopt;
  // Step 2: adjust.
  Decision d;
  d.round = ev.round;
  d.rule = "probe_diverged";
  d.family = "divergence";
  const ConvergenceReport& c = div->curve;
  d.observed = {{"step", c.step},
                {"min_loss", c.min_loss},
                {"curve", c.message},
                {"first_window_loss",
                 std::isfinite(t.first_mean) ? nlohmann::json(t.first_mean) : nlohmann::json("non-finite")},
                {"last_window_loss",
                 std::isfinite(t.last_mean) ? nlohmann::json(t.last_mean) : nlohmann::json("non-finite")},
                {"nonfinite", t.nonfinite},
                {"max_grad_norm", t.max_grad_norm},
                {"validator", ev.probe->convergence}};
  d.threshold = "non-finite loss or grad norm, or a loss > " + Fmt("%.2f", th.divergence_factor) +
                " x the running minimum";
  double old_lr = k.learning_rate, old_clip = k.grad_clip;
  k.learning_rate = old_lr * kLrFactor;
  k.grad_clip = old_clip > 0 ? std::max(kClipFloor, old_clip * kClipFactor) : 1.0;
  k.reprobe = true;
  d.changed = {{"learning_rate", {old_lr, k.learning_rate}}, {"grad_clip", {old_clip, k.grad_clip}}};
  d.action = "lower the learning rate " + Fmt("%.3g", old_lr) + " -> " + Fmt("%.3g", k.learning_rate) +
             ", clip gradients at " + Fmt("%.3g", k.grad_clip) + ", re-probe";
  return d;
}

}  // namespace onboard::agent
