// Rule family "comm": collectives take a large share of the measured probe step -> calibrate the
// cost model's bandwidths and compute rates from the probe's measurement against the cost model's
// prediction for the same proxy layout (ProbeResult::prediction), then re-plan the full model.
// Units: seconds; calibration factors are measured-rate / modelled-rate (dimensionless, (0, 10]).
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "agent/rules/rules.h"

namespace onboard::agent {
namespace {
constexpr double kMinFactor = 0.02;
constexpr double kMaxFactor = 10.0;
double Clamp(double f) { return std::clamp(std::isfinite(f) ? f : 1.0, kMinFactor, kMaxFactor); }
}  // namespace

std::optional<Decision> RuleCommShare(const RoundEvidence& ev, const Thresholds& th, LoopKnobs& k) {
  if (!ev.probe || k.calibrated) return std::nullopt;  // calibrate once per run
  // Step 1: measured share.
  CommShareReport c = ProbeCommShare(*ev.probe, th);
  if (c.steps == 0 || !c.comm_bound) return std::nullopt;
  const ProbePrediction& pred = ev.probe->prediction;

  Decision d;
  d.round = ev.round;
  d.rule = "comm_share";
  d.family = "comm";
  d.observed = {{"comm_share", c.share}, {"step_s", c.step_s}, {"comm_s", c.comm_s},
                {"compute_s", c.compute_s}, {"prediction_available", pred.available}};
  char thr[96];
  std::snprintf(thr, sizeof(thr), "collective time / step time > %.2f", th.comm_share);
  d.threshold = thr;

  // Step 2: factors = predicted time / measured time (time is inverse to rate).
  CostCalibration cal = k.calibration;
  std::string what;
  if (pred.available && pred.step_s > 0) {
    double pred_comm = pred.comm_s;
    double pred_compute = std::max(0.0, pred.step_s - pred.comm_s);
    d.observed["predicted_step_s"] = pred.step_s;
    d.observed["predicted_comm_s"] = pred_comm;
    double bw = pred_comm > 0 && c.comm_s > 0 ? Clamp(pred_comm / c.comm_s) : 1.0;
    double compute = pred_compute > 0 && c.compute_s > 0 ? Clamp(pred_compute / c.compute_s) : 1.0;
    if (std::fabs(bw - 1) > th.calibration_tolerance) {
      cal.tier_bandwidth.assign(std::max<size_t>(1, cal.tier_bandwidth.size()), bw);
      what += "bandwidth x" + std::to_string(bw).substr(0, 5);
    }
    if (std::fabs(compute - 1) > th.calibration_tolerance) {
      cal.compute_efficiency = compute;
      cal.grouped_gemm_efficiency = compute;
      what += std::string(what.empty() ? "" : ", ") + "compute x" + std::to_string(compute).substr(0, 5);
    }
  }
  k.calibrated = true;
  // Step 3: only transfer factors measured on the target's own hardware.
  const std::string& host = pred.topology;
  if (!what.empty() && !ev.target_device.empty() && host.find(ev.target_device) == std::string::npos) {
    d.observed["probe_host"] = host;
    d.observed["factors_not_applied"] = what;
    d.action = "keep the datasheet cost model for " + ev.target_device + ": the probe ran on " +
               (host.empty() ? std::string("another host") : host) +
               ", whose collectives say nothing about the target's links (" + what +
               " measured there); re-probe on the target (scripts/gpu-probe.sh) to calibrate";
    d.changed = nlohmann::json::object();
    return d;
  }
  if (what.empty()) {
    d.action = pred.available ? "measured times match the cost model within tolerance; keep the plan"
                              : "no cost-model prediction for the probe layout; keep the datasheet model";
    d.changed = nlohmann::json::object();
    return d;
  }
  cal.source = "probe round " + std::to_string(ev.round);
  if (!cal.Validate().ok()) return std::nullopt;
  d.changed = {{"calibration.tier_bandwidth", {k.calibration.tier_bandwidth, cal.tier_bandwidth}},
               {"calibration.compute_efficiency", {k.calibration.compute_efficiency, cal.compute_efficiency}}};
  k.calibration = cal;
  k.replan = true;
  d.action = "calibrate the cost model from the probe (" + what + ") and re-plan";
  return d;
}

}  // namespace onboard::agent
