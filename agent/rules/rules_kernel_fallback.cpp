// Rule family "kernels": a generated kernel failed its numerical check against the reference ->
// run the template's reference operator for that module instead, and say so in the report.
#include <cstdio>

#include "agent/rules/rules.h"

namespace onboard::agent {

std::optional<Decision> RuleKernelFallback(const RoundEvidence& ev, const Thresholds&, LoopKnobs& k) {
  if (!ev.kernel_rows) return std::nullopt;
  // Step 1: failed rows per kernel not yet on a fallback.
  nlohmann::json failed = nlohmann::json::array();
  nlohmann::json changed = nlohmann::json::object();
  for (const auto& row : *ev.kernel_rows) {
    if (row.pass || k.kernel_fallbacks.count(row.kernel)) continue;
    failed.push_back({{"kernel", row.kernel}, {"shape", row.shape}, {"rel_err", row.rel_err},
                      {"tol", row.tol}, {"nonfinite_match", row.nonfinite_match}, {"note", row.note}});
    // Step 2: the reference operator named by the module's template.
    std::string ref = "reference";
    for (const auto& [prefix, op] : ev.kernel_reference_ops)
      if (row.kernel.rfind(prefix, 0) == 0) ref = op;
    k.kernel_fallbacks[row.kernel] = ref;
    changed[row.kernel] = {{"from", "generated"}, {"to", ref}};
  }
  if (failed.empty()) return std::nullopt;
  Decision d;
  d.round = ev.round;
  d.rule = "kernel_check_failed";
  d.family = "kernels";
  d.observed = {{"failed_rows", failed}};
  d.threshold = "relative error above the row's tolerance, or NaN/Inf mismatch";
  d.changed = changed;
  std::string names;
  for (const auto& [kernel, ref] : changed.items()) names += (names.empty() ? "" : ", ") + kernel;
  d.action = "fall back to the reference operator for " + names +
             " (the generated kernel is not used; training runs at reference speed for that module)";
  return d;
}

}  // namespace onboard::agent
