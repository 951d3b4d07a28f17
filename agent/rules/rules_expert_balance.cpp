// Rule family "expert_balance": the probe's routed tokens per EP rank are uneven (max/mean over
// the threshold) -> re-place experts from the measured loads (search/expert_placement.h), turn on
// aux-loss-free bias balancing in the plan, feed the measured imbalance to the planner, re-probe.
// Units: loads are tokens summed over MoE layers and probe steps; ratios dimensionless.
#include <cstdio>

#include "agent/rules/rules.h"
#include "search/expert_placement.h"

namespace onboard::agent {
namespace {
constexpr double kMinGain = 0.02;   // a new placement must cut max/mean by at least 2 %
}

std::optional<Decision> RuleExpertImbalance(const RoundEvidence& ev, const Thresholds& th, LoopKnobs& k) {
  if (!ev.probe) return std::nullopt;
  // Step 1: measured loads per expert and per EP rank under the placement the probe ran with.
  std::vector<double> load = MeasuredExpertLoad(*ev.probe);
  if (load.empty()) return std::nullopt;
  const int64_t ep = ev.probe->config.ep_degree();
  const std::vector<int64_t>& placed = ev.probe->config.expert_placement;
  const RankBalance bal = ObserveRankBalance(load, ep, placed, th);
  if (!bal.imbalanced) return std::nullopt;
  const std::vector<double>& ranks = bal.rank_load;
  const double expert_imb = bal.expert_max_over_mean, rank_imb = bal.rank_max_over_mean;

  Decision d;
  d.round = ev.round;
  d.rule = "expert_imbalance";
  d.family = "expert_balance";
  d.observed = {{"expert_load", load}, {"rank_load_before", ranks}, {"ep", ep},
                {"expert_max_over_mean", expert_imb}, {"rank_max_over_mean", rank_imb}};
  char thr[96];
  std::snprintf(thr, sizeof(thr), "max/mean routed tokens per EP rank > %.2f", th.expert_imbalance);
  d.threshold = thr;

  // Step 2: re-place from the measured loads (one node: every probe rank shares the loopback tier).
  bool reprobe = false;
  double after = rank_imb;
  if (ep > 1 && static_cast<int64_t>(load.size()) % ep == 0) {
    ExpertPlacementRequest req;
    req.expert_load = load;
    req.ep_ranks = ep;
    req.ranks_per_node = ep;
    auto placed_new = PlaceExperts(req);
    if (placed_new.ok()) {
      std::vector<int64_t> placement(load.size(), 0);
      for (size_t r = 0; r < placed_new->rank_experts.size(); ++r)
        for (int64_t e : placed_new->rank_experts[r]) placement[e] = static_cast<int64_t>(r);
      std::vector<double> ranks_after = RankLoads(load, ep, placement);
      after = MaxOverMean(ranks_after);
      if (after < rank_imb * (1 - kMinGain)) {
        d.changed["expert_placement"] = {k.expert_placement, placement};
        d.observed["rank_load_after_predicted"] = ranks_after;
        k.expert_placement = placement;
        reprobe = true;
      }
    } else {
      d.observed["placement_error"] = placed_new.status().message();
    }
  }
  // Step 3: plan-side changes: bias balancing and the imbalance the cost model should assume.
  if (!reprobe && k.bias_balancing && k.expert_imbalance >= after) return std::nullopt;  // nothing new
  d.changed["bias_balancing"] = {k.bias_balancing, true};
  d.changed["planner_expert_imbalance"] = {k.expert_imbalance, after};
  k.bias_balancing = true;
  k.expert_imbalance = std::max(1.0, after);
  k.replan = true;
  k.reprobe = k.reprobe || reprobe;
  d.observed["rank_max_over_mean_after_predicted"] = after;
  char act[256];
  if (reprobe)
    std::snprintf(act, sizeof(act),
                  "re-place experts from the measured loads (max/mean %.2f -> %.2f predicted), enable "
                  "bias-based balancing, re-plan with imbalance %.2f, re-probe to measure",
                  rank_imb, after, k.expert_imbalance);
  else
    std::snprintf(act, sizeof(act),
                  "no better placement (max/mean %.2f); enable bias-based balancing and re-plan with "
                  "imbalance %.2f",
                  rank_imb, k.expert_imbalance);
  d.action = act;
  return d;
}

}  // namespace onboard::agent
