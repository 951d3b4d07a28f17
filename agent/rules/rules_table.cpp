// The rule table (see agent/rules/rules.h): data + the function that evaluates it, in evaluation order.
#include "agent/rules/rules.h"

namespace onboard::agent {

const std::vector<Rule>& RuleTable() {
  static const std::vector<Rule> kRules = {
      {"kernel_check_failed", "kernels",
       "generated kernel vs reference, per checked shape; round 1 probe loss parity", "(row tolerance)",
       RuleKernelFallback},
      {"probe_diverged", "divergence", "probe loss curve: non-finite, or far above its running minimum",
       "divergence_factor", RuleProbeDiverged},
      {"probe_not_learned", "learning", "probe loss and skill vs the task's baselines",
       "(validators/learning_verdict.h)", RuleProbeNotLearned},
      {"expert_imbalance", "expert_balance", "routed tokens per expert / EP rank in the probe",
       "expert_imbalance", RuleExpertImbalance},
      {"expert_coactivation", "expert_balance", "experts co-selected by one token, split over nodes (probe)",
       "(rules_expert_coactivation.cpp kMinCrossNodeCut)", RuleExpertCoactivation},
      {"expert_routing", "comm", "nodes a token's top-k experts span in a multi-node probe, vs the plan's",
       "expert_nodes_change", RuleExpertRouting},
      {"expert_overlap", "comm", "exposed expert all-to-all seconds / step seconds in the probe",
       "expert_a2a_exposed_share", RuleExpertOverlap},
      {"comm_share", "comm", "collective seconds / step seconds in the probe", "comm_share", RuleCommShare},
      {"memory_over_prediction", "memory", "probe peak memory vs cost-model prediction",
       "memory_over_prediction", RuleMemoryOverPrediction},
  };
  return kRules;
}

std::vector<Decision> ApplyRules(const RoundEvidence& ev, const Thresholds& th, LoopKnobs& knobs) {
  std::vector<Decision> out;
  bool diverged = false;
  for (const auto& rule : RuleTable()) {
    // A diverged probe's loads, timings and memory are not evidence; only kernels and divergence run.
    if (diverged && rule.family != "kernels") continue;
    if (auto d = rule.fire(ev, th, knobs)) {
      if (rule.family == "divergence") diverged = true;
      out.push_back(std::move(*d));
    }
  }
  return out;
}

}  // namespace onboard::agent
