// Rule family "divergence": the probe's loss blew up (non-finite, or the last window's mean loss
// is well above the first window's) -> lower the learning rate, tighten gradient clipping, keep
// the router in fp32, and re-probe. Units: loss in nats, lr dimensionless.
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
  // Step 1: the verdict, from the curve itself and from the probe's validator.
  LossTrend t = ComputeLossTrend(*ev.probe);
  const std::string& verdict = ev.probe->convergence;
  bool diverged = t.nonfinite || t.ratio > th.divergence_loss_ratio || verdict == "diverged" || verdict == "nan";
  if (!diverged) return std::nullopt;
  // Step 2: adjust.
  Decision d;
  d.round = ev.round;
  d.rule = "probe_diverged";
  d.family = "divergence";
  d.observed = {{"first_window_loss", t.nonfinite && !std::isfinite(t.first_mean) ? nullptr : nlohmann::json(t.first_mean)},
                {"last_window_loss", std::isfinite(t.last_mean) ? nlohmann::json(t.last_mean) : nlohmann::json("non-finite")},
                {"loss_ratio", std::isfinite(t.ratio) ? nlohmann::json(t.ratio) : nlohmann::json("non-finite")},
                {"nonfinite", t.nonfinite},
                {"max_grad_norm", t.max_grad_norm},
                {"window_steps", t.window},
                {"validator", verdict}};
  d.threshold = "non-finite loss, or last/first window loss > " + Fmt("%.2f", th.divergence_loss_ratio);
  double old_lr = k.learning_rate, old_clip = k.grad_clip;
  bool old_router = k.router_fp32;
  k.learning_rate = old_lr * kLrFactor;
  k.grad_clip = old_clip > 0 ? std::max(kClipFloor, old_clip * kClipFactor) : 1.0;
  k.router_fp32 = true;
  k.reprobe = true;
  d.changed = {{"learning_rate", {old_lr, k.learning_rate}},
               {"grad_clip", {old_clip, k.grad_clip}},
               {"router_fp32", {old_router, true}}};
  d.action = "lower the learning rate " + Fmt("%.3g", old_lr) + " -> " + Fmt("%.3g", k.learning_rate) +
             ", clip gradients at " + Fmt("%.3g", k.grad_clip) + ", keep the router in fp32, re-probe";
  return d;
}

}  // namespace onboard::agent
