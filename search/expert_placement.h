// Expert placement: put routed experts on EP ranks so the hottest rank carries as little as
// possible, hierarchically (cf. DeepSeek EPLB): expert groups to nodes, replicas of the hottest
// experts into spare slots, then packing onto the ranks of each node.
// Units: loads are tokens (or any non-negative rate) per expert; dimensionless ratios.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace onboard {

struct ExpertPlacementRequest {
  std::vector<double> expert_load;   // tokens routed to each expert (measured or synthetic), >= 0
  int64_t ep_ranks = 0;              // ranks holding experts; experts % ep_ranks == 0
  int64_t ranks_per_node = 8;        // ranks sharing the fast tier; divides ep_ranks
  int64_t spare_slots_per_rank = 0;  // extra expert slots per rank for replicas
  int64_t group_size = 1;            // experts that must stay together on one node (router groups)
};

struct ExpertPlacement {
  // rank -> the expert ids it holds (base experts + replicas; a replicated expert appears on
  // several ranks and its load is split evenly among its copies).
  std::vector<std::vector<int64_t>> rank_experts;
  std::vector<int64_t> replicas;      // expert -> number of copies (>= 1)
  std::vector<double> rank_load_before;  // contiguous placement (expert e on rank e / per_rank)
  std::vector<double> rank_load_after;
  double max_over_mean_before = 0;
  double max_over_mean_after = 0;
  std::vector<double> node_load_after;   // per node, after
};

// Errors: empty loads, negative/NaN load, ep_ranks not dividing experts, ranks_per_node not
// dividing ep_ranks (messages name field and value).
Expected<ExpertPlacement> PlaceExperts(const ExpertPlacementRequest& req);

// Steps 2-3 of PlaceExperts on a node assignment chosen elsewhere (search/coactivation_placement.h):
// node_experts[n] lists the experts/nodes experts of node n, each expert exactly once.
Expected<ExpertPlacement> PlaceExpertsOnNodes(const ExpertPlacementRequest& req,
                                              const std::vector<std::vector<int64_t>>& node_experts);

// Synthetic skewed loads: expert i (after a seeded shuffle) gets total * (1/(rank^s)) / H.
std::vector<double> ZipfExpertLoads(int64_t num_experts, double s, double total_tokens,
                                    uint64_t seed);

}  // namespace onboard
