// PlaceFromProbeCoactivation (see probe_coactivation_placement.h).
//   Step 1: check the probe ran over several nodes with one EP group, and recorded co-activation.
//   Step 2: measured loads + pair counts -> PlaceExpertsByCoactivation (no replicas).
//   Step 3: expert -> EP rank, and the measured pairs that share a node before / after.
#include "backends/probe_coactivation_placement.h"

#include "backends/probe_step_series.h"
#include "core/load_balance.h"
#include "search/coactivation_placement.h"

namespace onboard {
namespace {

int64_t IntraNodePairs(const std::vector<std::vector<double>>& w, const std::vector<int64_t>& placement,
                       int64_t ranks_per_node) {
  double s = 0;
  for (size_t i = 0; i < w.size(); ++i)
    for (size_t j = i + 1; j < w.size(); ++j)
      if (placement[i] / ranks_per_node == placement[j] / ranks_per_node) s += w[i][j];
  return static_cast<int64_t>(s);
}

}  // namespace

Expected<ProbeCoactivationPlacement> PlaceFromProbeCoactivation(const ProbeResult& p) {
  const std::string f = "co-activation placement from the probe";
  // Step 1: the layout.
  const ProbeConfig& c = p.config;
  const int64_t E = p.spec.num_experts, ep = c.ep_degree();
  if (p.coactivation.empty()) return BadInput(f, "coactivation", "the probe recorded none (no MoE layer?)");
  if (c.ranks_per_node <= 0 || c.nodes() < 2)
    return BadInput(f, "ranks_per_node", "needs >= 2 nodes (ranks_per_node < ranks)",
                    std::to_string(c.ranks_per_node));
  if (ep != c.ranks)
    return BadInput(f, "ep", "needs one EP group over all ranks (ep = ranks)", std::to_string(ep));
  // Step 2: measured data -> the search.
  CoactivationPlacementRequest req;
  req.base.expert_load = MeasuredExpertLoad(p);
  req.base.ep_ranks = ep;
  req.base.ranks_per_node = c.ranks_per_node;
  req.base.spare_slots_per_rank = 0;
  req.pair_counts = SummedPairCounts(p.coactivation, E);
  ONBOARD_ASSIGN_OR_RETURN(CoactivationPlacement placed, PlaceExpertsByCoactivation(req));
  // Step 3: expert -> rank.
  ProbeCoactivationPlacement out;
  out.placement.assign(static_cast<size_t>(E), -1);
  for (size_t r = 0; r < placed.placement.rank_experts.size(); ++r)
    for (int64_t e : placed.placement.rank_experts[r]) {
      ONBOARD_ASSERT(out.placement[static_cast<size_t>(e)] < 0, "no replicas without spare slots");
      out.placement[static_cast<size_t>(e)] = static_cast<int64_t>(r);
    }
  std::vector<int64_t> run = c.expert_placement;
  if (run.empty())
    for (int64_t e = 0; e < E; ++e) run.push_back(e / (E / ep));
  for (const auto& row : req.pair_counts)
    for (double v : row) out.co_selected_pairs += static_cast<int64_t>(v);
  out.co_selected_pairs /= 2;
  out.intra_node_pairs_before = IntraNodePairs(req.pair_counts, run, c.ranks_per_node);
  out.intra_node_pairs_after = IntraNodePairs(req.pair_counts, out.placement, c.ranks_per_node);
  out.rank_max_over_mean_before = MaxOverMean(RankLoads(req.base.expert_load, ep, run));
  out.rank_max_over_mean_after = MaxOverMean(RankLoads(req.base.expert_load, ep, out.placement));
  return out;
}

}  // namespace onboard
