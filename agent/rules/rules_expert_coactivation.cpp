// Rule "expert_coactivation" (family expert_balance): the probe ran over several nodes
// (ProbeConfig::ranks_per_node) and recorded which experts the same tokens choose -> re-place the
// experts so co-selected ones share a node (backends/probe_coactivation_placement.h), when that cuts
// the measured co-selected pairs split over nodes by at least kMinCrossNodeCut; re-probe to measure.
// One placement per MoE layer, each from its own pairs and loads (as EPLB places each layer).
// Runs after expert_imbalance: the co-activation placement balances ranks inside each node too;
// when that rule gave the experts replicas (one phy2log for every layer), this one stands aside.
// Units: pairs = tokens choosing both experts (summed over MoE layers and steps); ratios dimensionless.
#include <cstdio>

#include "agent/rules/rules.h"
#include "backends/probe_coactivation_placement.h"

namespace onboard::agent {
namespace {
constexpr double kMinCrossNodeCut = 0.05;  // the new placement must split >= 5 % fewer co-selected pairs
}

std::optional<Decision> RuleExpertCoactivation(const RoundEvidence& ev, const Thresholds& /*th*/,
                                               LoopKnobs& k) {
  if (!ev.probe || ev.probe->coactivation.empty() || ev.probe->config.nodes() < 2) return std::nullopt;
  if (!k.expert_phy2log.empty()) return std::nullopt;  // replicas: the probe's phy2log is one for all layers
  // Step 1: placement from the measured pairs and loads.
  Expected<ProbeCoactivationPlacement> p = PlaceFromProbeCoactivation(*ev.probe);
  if (!p.ok()) return std::nullopt;  // e.g. an EP group that is not all ranks: nothing to re-place
  const double split_before = static_cast<double>(p->co_selected_pairs - p->intra_node_pairs_by_layer_before);
  const double split_after = static_cast<double>(p->co_selected_pairs - p->intra_node_pairs_by_layer_after);
  if (!(split_before > 0) || split_after > split_before * (1 - kMinCrossNodeCut)) return std::nullopt;
  // Step 2: the decision.
  Decision d;
  d.round = ev.round;
  d.rule = "expert_coactivation";
  d.family = "expert_balance";
  const ProbeTierTraffic t = TotalTraffic(ev.probe->coactivation);
  d.observed = {{"co_selected_pairs", p->co_selected_pairs},
                {"pairs_split_over_nodes", split_before},
                {"pairs_split_over_nodes_after_predicted", split_after},
                {"nodes_per_token", t.nodes_per_token},
                {"slow_tier_bytes_per_token", t.slow_tier_bytes_per_token},
                {"rank_max_over_mean_before", p->rank_max_over_mean_before},
                {"rank_max_over_mean_after_predicted", p->rank_max_over_mean_after}};
  char thr[96];
  std::snprintf(thr, sizeof(thr), "co-selected pairs split over nodes cut by >= %.0f%%",
                100 * kMinCrossNodeCut);
  d.threshold = thr;
  const std::vector<int64_t> placement = PerLayerPlacement(p->placement_by_layer);
  d.changed["expert_placement"] = {k.expert_placement, placement};
  k.expert_placement = placement;
  k.reprobe = true;
  char act[200];
  std::snprintf(act, sizeof(act),
                "place co-selected experts on one node, per MoE layer (pairs split over nodes %.0f -> %.0f "
                "predicted), "
                "re-probe to measure the cross-node traffic",
                split_before, split_after);
  d.action = act;
  return d;
}

}  // namespace onboard::agent
