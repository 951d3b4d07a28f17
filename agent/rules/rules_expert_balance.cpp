// Rule family "expert_balance": the probe's routed tokens per EP rank are uneven in some MoE layer
// (worst layer's max/mean over the threshold) -> re-place experts from the measured loads, per MoE
// layer (search/expert_placement.h, as EPLB places each layer), or give the hottest experts
// replicas (backends/probe_replicas.h) when that evens the ranks more; turn on aux-loss-free bias
// balancing in the plan, feed the predicted imbalance to the planner, re-probe.
// Units: loads are tokens summed over probe steps (per MoE layer); ratios dimensionless.
#include <algorithm>
#include <cstdio>

#include "agent/rules/rules.h"
#include "backends/probe_replicas.h"
#include "core/load_balance.h"
#include "search/expert_placement.h"

namespace onboard::agent {
namespace {
constexpr double kMinGain = 0.02;          // a new layout must cut the worst layer's max/mean by at least 2 %
constexpr int64_t kSpareSlotsPerRank = 1;  // replica slots per EP rank the rule may add

// [MoE layer][expert]: tokens summed over the probe's steps.
std::vector<std::vector<double>> LayerLoads(const ProbeResult& p) {
  std::vector<std::vector<double>> out;
  for (const ProbeStep& s : p.steps) {
    if (out.size() < s.expert_load.size()) out.resize(s.expert_load.size());
    for (size_t l = 0; l < s.expert_load.size(); ++l) {
      out[l].resize(std::max(out[l].size(), s.expert_load[l].size()), 0.0);
      for (size_t e = 0; e < s.expert_load[l].size(); ++e)
        out[l][e] += static_cast<double>(s.expert_load[l][e]);
    }
  }
  return out;
}

// A layout of the experts over EP ranks: per-layer placement blocks (expert -> rank; one block =
// the same for every layer; empty = contiguous), or a replica map (phy2log) for every layer.
struct Layout {
  std::vector<int64_t> placement;
  std::vector<int64_t> phy2log;
};

// The worst MoE layer's tokens-per-EP-rank max/mean under `lay`.
double WorstLayer(const std::vector<std::vector<double>>& loads, int64_t ep, const Layout& lay) {
  double worst = 1.0;
  for (size_t l = 0; l < loads.size(); ++l) {
    const size_t E = loads[l].size();
    std::vector<double> ranks;
    if (!lay.phy2log.empty()) {
      Expected<ReplicaMap> m = BuildReplicaMap(lay.phy2log, static_cast<int64_t>(E), ep);
      ONBOARD_ASSERT(m.ok(), m.status().message());  // the probe ran it, or ReplicasFromLoads built it
      ranks = ReplicaRankLoads(*m, loads[l], ep);
    } else {
      std::vector<int64_t> placed = lay.placement;
      if (placed.size() >= (l + 1) * E && placed.size() > E)
        placed.assign(lay.placement.begin() + static_cast<int64_t>(l * E),
                      lay.placement.begin() + static_cast<int64_t>((l + 1) * E));
      if (placed.size() != E) placed.clear();
      ranks = RankLoads(loads[l], ep, placed);
    }
    worst = std::max(worst, MaxOverMean(ranks));
  }
  return worst;
}

// Step 2a: one EPLB placement per MoE layer from its own loads (one node: the probe's ranks share
// the loopback tier); empty when a layer cannot be placed.
std::vector<int64_t> PerLayerFromLoads(const std::vector<std::vector<double>>& loads, int64_t ep) {
  std::vector<int64_t> out;
  for (const std::vector<double>& load : loads) {
    ExpertPlacementRequest req;
    req.expert_load = load;
    req.ep_ranks = ep;
    req.ranks_per_node = ep;
    Expected<ExpertPlacement> placed = PlaceExperts(req);
    if (!placed.ok()) return {};
    std::vector<int64_t> block(load.size(), 0);
    for (size_t r = 0; r < placed->rank_experts.size(); ++r)
      for (int64_t e : placed->rank_experts[r]) block[static_cast<size_t>(e)] = static_cast<int64_t>(r);
    out.insert(out.end(), block.begin(), block.end());
  }
  return out;
}

// Step 2b: replicas of the hottest experts (kSpareSlotsPerRank per rank; one map for every layer,
// as the probe holds them), where the probe can run them (one EP group over the data ranks).
std::vector<int64_t> ReplicasFromLoads(const ProbeResult& p, const std::vector<std::vector<double>>& loads,
                                       int64_t ep) {
  if (loads.empty() || ep != p.config.data_ranks()) return {};
  std::vector<double> sum(loads[0].size(), 0.0);
  for (const std::vector<double>& l : loads)
    for (size_t e = 0; e < l.size() && e < sum.size(); ++e) sum[e] += l[e];
  std::vector<int64_t> phy2log = Phy2LogFromLoads(sum, ep, kSpareSlotsPerRank);
  if (!BuildReplicaMap(phy2log, static_cast<int64_t>(sum.size()), ep).ok()) return {};
  return phy2log;
}

}  // namespace

std::optional<Decision> RuleExpertImbalance(const RoundEvidence& ev, const Thresholds& th, LoopKnobs& k) {
  if (!ev.probe) return std::nullopt;
  // Step 1: measured loads per MoE layer and the worst layer's tokens per EP rank under the layout
  // the probe ran with (its per-layer placement or replicas).
  const std::vector<double> load = MeasuredExpertLoad(*ev.probe);
  const std::vector<std::vector<double>> loads = LayerLoads(*ev.probe);
  if (load.empty() || loads.empty()) return std::nullopt;
  const int64_t ep = ev.probe->config.ep_degree();
  const Layout ran{ev.probe->config.expert_placement, ev.probe->config.expert_phy2log};
  const double expert_imb = MaxOverMean(load);
  const double rank_imb = ep > 1 ? WorstLayer(loads, ep, ran) : expert_imb;
  if (!(rank_imb > th.expert_imbalance)) return std::nullopt;

  Decision d;
  d.round = ev.round;
  d.rule = "expert_imbalance";
  d.family = "expert_balance";
  d.observed = {{"expert_load", load},
                {"ep", ep},
                {"moe_layers", loads.size()},
                {"expert_max_over_mean", expert_imb},
                {"rank_max_over_mean", rank_imb}};
  char thr[112];
  std::snprintf(thr, sizeof(thr), "max/mean routed tokens per EP rank (worst MoE layer) > %.2f",
                th.expert_imbalance);
  d.threshold = thr;

  // Step 2: per-layer placement or replicas, whichever the measured loads predict evens the ranks
  // more (placement on a tie: no extra memory); applied when it cuts the worst layer by kMinGain.
  bool reprobe = false;
  double after = rank_imb;
  if (ep > 1 && static_cast<int64_t>(load.size()) % ep == 0) {
    const Layout per_layer{PerLayerFromLoads(loads, ep), {}};
    const Layout replicas{{}, ReplicasFromLoads(*ev.probe, loads, ep)};
    const double a = per_layer.placement.empty() ? rank_imb : WorstLayer(loads, ep, per_layer);
    const double b = replicas.phy2log.empty() ? rank_imb : WorstLayer(loads, ep, replicas);
    d.observed["rank_max_over_mean_per_layer_placement_predicted"] = a;
    d.observed["rank_max_over_mean_replicas_predicted"] = b;
    const bool use_replicas = b < a * (1 - kMinGain);
    after = use_replicas ? b : a;
    if (after < rank_imb * (1 - kMinGain)) {
      const Layout& next = use_replicas ? replicas : per_layer;
      d.changed["expert_placement"] = {k.expert_placement, next.placement};
      d.changed["expert_phy2log"] = {k.expert_phy2log, next.phy2log};
      k.expert_placement = next.placement;
      k.expert_phy2log = next.phy2log;
      reprobe = true;
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
    std::snprintf(
        act, sizeof(act),
        "%s from the measured loads (worst layer max/mean %.2f -> %.2f predicted), enable "
        "bias-based balancing, re-plan with imbalance %.2f, re-probe to measure",
        k.expert_phy2log.empty() ? "re-place experts per MoE layer" : "replicate the hottest experts",
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
