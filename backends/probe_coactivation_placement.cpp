// PlaceFromProbeCoactivation (see probe_coactivation_placement.h).
//   Step 1: check the probe ran over several nodes with one EP group, and recorded co-activation.
//   Step 2: measured loads + pair counts summed over the MoE layers -> PlaceExpertsByCoactivation
//           (no replicas): one placement for every layer.
//   Step 3: the same per MoE layer, from that layer's own loads and pairs (EPLB places each layer).
//   Step 4: the measured pairs that share a node before / after.
#include "backends/probe_coactivation_placement.h"

#include "backends/probe_step_series.h"
#include "core/load_balance.h"
#include "search/coactivation_placement.h"
#include "validators/probe_observations.h"

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

// One placement (expert -> EP rank) from loads and pair counts.
Expected<std::vector<int64_t>> PlaceOnce(const std::vector<double>& load,
                                         const std::vector<std::vector<double>>& w, int64_t ep,
                                         int64_t ranks_per_node) {
  CoactivationPlacementRequest req;
  req.base.expert_load = load;
  req.base.ep_ranks = ep;
  req.base.ranks_per_node = ranks_per_node;
  req.base.spare_slots_per_rank = 0;
  req.pair_counts = w;
  ONBOARD_ASSIGN_OR_RETURN(CoactivationPlacement placed, PlaceExpertsByCoactivation(req));
  std::vector<int64_t> out(load.size(), -1);
  for (size_t r = 0; r < placed.placement.rank_experts.size(); ++r)
    for (int64_t e : placed.placement.rank_experts[r]) {
      ONBOARD_ASSERT(out[static_cast<size_t>(e)] < 0, "no replicas without spare slots");
      out[static_cast<size_t>(e)] = static_cast<int64_t>(r);
    }
  return out;
}

// The i-th MoE layer's tokens per expert, summed over the recorded steps.
std::vector<double> LayerLoad(const ProbeResult& p, size_t i) {
  std::vector<double> load(static_cast<size_t>(p.spec.num_experts), 0);
  for (const ProbeStep& s : p.steps)
    if (i < s.expert_load.size())
      for (size_t e = 0; e < load.size() && e < s.expert_load[i].size(); ++e)
        load[e] += static_cast<double>(s.expert_load[i][e]);
  return load;
}

}  // namespace

Expected<ProbeCoactivationPlacement> PlaceFromProbeCoactivation(const ProbeResult& p) {
  const std::string f = "co-activation placement from the probe";
  // Step 1: the layout.
  const ProbeConfig& c = p.config;
  const int64_t E = p.spec.num_experts, ep = c.ep_degree(), rpn = c.ranks_per_node;
  if (p.coactivation.empty()) return BadInput(f, "coactivation", "the probe recorded none (no MoE layer?)");
  if (rpn <= 0 || c.nodes() < 2)
    return BadInput(f, "ranks_per_node", "needs >= 2 nodes (ranks_per_node < ranks)", std::to_string(rpn));
  if (ep != c.ranks)
    return BadInput(f, "ep", "needs one EP group over all ranks (ep = ranks)", std::to_string(ep));
  // Step 2: one placement for every layer, from the sums over layers.
  ProbeCoactivationPlacement out;
  const std::vector<double> load = MeasuredExpertLoad(p);
  const std::vector<std::vector<double>> w = SummedPairCounts(p.coactivation, E);
  ONBOARD_ASSIGN_OR_RETURN(out.placement, PlaceOnce(load, w, ep, rpn));
  const std::vector<int64_t> ran_all = c.expert_placement;
  std::vector<int64_t> run = ran_all;
  if (run.empty())
    for (int64_t e = 0; e < E; ++e) run.push_back(e / (E / ep));
  for (const auto& row : w)
    for (double v : row) out.co_selected_pairs += static_cast<int64_t>(v);
  out.co_selected_pairs /= 2;
  if (static_cast<int64_t>(run.size()) > E) run.resize(static_cast<size_t>(E));  // per layer: the first
  out.intra_node_pairs_before = IntraNodePairs(w, run, rpn);
  out.intra_node_pairs_after = IntraNodePairs(w, out.placement, rpn);
  out.rank_max_over_mean_before = MaxOverMean(RankLoads(load, ep, run));
  out.rank_max_over_mean_after = MaxOverMean(RankLoads(load, ep, out.placement));
  // Step 3: per MoE layer, from its own loads and pairs (the run's per-layer placement if it had one).
  for (size_t i = 0; i < p.coactivation.layers.size(); ++i) {
    ProbeCoactivation one = p.coactivation;
    one.layers = {p.coactivation.layers[i]};
    const std::vector<std::vector<double>> wl = SummedPairCounts(one, E);
    ONBOARD_ASSIGN_OR_RETURN(std::vector<int64_t> pl, PlaceOnce(LayerLoad(p, i), wl, ep, rpn));
    std::vector<int64_t> ran = run;  // a per-layer placement: this layer's block
    if (static_cast<int64_t>(ran_all.size()) > E)
      ran.assign(ran_all.begin() + i * E, ran_all.begin() + (i + 1) * E);
    out.intra_node_pairs_by_layer_before += IntraNodePairs(wl, ran, rpn);
    out.intra_node_pairs_by_layer_after += IntraNodePairs(wl, pl, rpn);
    out.placement_by_layer.push_back(std::move(pl));
  }
  return out;
}

std::vector<int64_t> PerLayerPlacement(const std::vector<std::vector<int64_t>>& by_layer) {
  std::vector<int64_t> out;
  for (const std::vector<int64_t>& l : by_layer) out.insert(out.end(), l.begin(), l.end());
  return out;
}

}  // namespace onboard
