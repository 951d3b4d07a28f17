// Rule family "kernels": a generated kernel failed its numerical check against the reference (the
// kernel stage's rows), or round 1's kernel loss parity (the probe trained with the generated
// kernel and with the reference ops, validators/loss_parity.h) found the two loss curves apart ->
// run the template's reference operator for that module instead, and say so in the report. A
// parity failure also re-probes: the next round runs that family on the reference ops
// (ProbeConfig::kda_kernel / dsa_kernel = "torch", agent/orchestrator_probe.cpp), which its
// kda_calls / dsa_calls show.
#include <cstdio>

#include "agent/rules/rules.h"

namespace onboard::agent {
namespace {

// The template's reference operator for a kernel name ("kda_hq2_k16" -> kda's), else "reference".
std::string ReferenceOp(const RoundEvidence& ev, const std::string& kernel) {
  std::string ref = "reference";
  for (const auto& [prefix, op] : ev.kernel_reference_ops)
    if (kernel.rfind(prefix, 0) == 0) ref = op;
  return ref;
}

// Step 1: failed check rows per kernel not yet on a fallback.
void FailedRows(const RoundEvidence& ev, LoopKnobs& k, nlohmann::json& failed, nlohmann::json& changed) {
  if (!ev.kernel_rows) return;
  for (const auto& row : *ev.kernel_rows) {
    if (row.pass || k.kernel_fallbacks.count(row.kernel)) continue;
    failed.push_back({{"kernel", row.kernel}, {"shape", row.shape}, {"rel_err", row.rel_err},
                      {"tol", row.tol}, {"nonfinite_match", row.nonfinite_match}, {"note", row.note}});
    k.kernel_fallbacks[row.kernel] = ReferenceOp(ev, row.kernel);
    changed[row.kernel] = {{"from", "generated"}, {"to", k.kernel_fallbacks[row.kernel]}};
  }
}

// Step 2: failed loss parity of the probe (round 1) per kernel family not yet on a fallback.
bool FailedParity(const RoundEvidence& ev, LoopKnobs& k, nlohmann::json& failed, nlohmann::json& changed) {
  bool any = false;
  if (!ev.probe) return any;
  for (const ProbeLossParity& p : ev.probe->loss_parity) {
    const std::string name = p.kernel + "_loss_parity";
    if (p.pass || k.kernel_fallbacks.count(name)) continue;
    failed.push_back({{"kernel", name},
                      {"steps", p.steps},
                      {"max_rel", p.max_rel},
                      {"worst_step", p.worst_step},
                      {"tol", p.tolerance},
                      {"note", p.message}});
    k.kernel_fallbacks[name] = ReferenceOp(ev, p.kernel);
    changed[name] = {{"from", "generated"}, {"to", k.kernel_fallbacks[name]}};
    k.reprobe = true;  // the next round must show the probe on the reference ops
    any = true;
  }
  return any;
}

}  // namespace

std::optional<Decision> RuleKernelFallback(const RoundEvidence& ev, const Thresholds&, LoopKnobs& k) {
  nlohmann::json failed = nlohmann::json::array();
  nlohmann::json changed = nlohmann::json::object();
  FailedRows(ev, k, failed, changed);
  const bool parity = FailedParity(ev, k, failed, changed);
  if (failed.empty()) return std::nullopt;
  // Step 3: the decision.
  Decision d;
  d.round = ev.round;
  d.rule = "kernel_check_failed";
  d.family = "kernels";
  d.observed = {{"failed_rows", failed}};
  d.threshold =
      "relative error above the row's tolerance, or NaN/Inf mismatch; loss parity: relative loss difference "
      "per step above validators/loss_parity.h kLossParityRelTol";
  d.changed = changed;
  std::string names;
  for (const auto& [kernel, ref] : changed.items()) names += (names.empty() ? "" : ", ") + kernel;
  d.action = "fall back to the reference operator for " + names +
             " (the generated kernel is not used; training runs at reference speed for that module)" +
             (parity ? "; re-probe on the reference ops" : "");
  return d;
}

}  // namespace onboard::agent
