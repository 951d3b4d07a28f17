// Co-activation-aware hierarchical expert placement: experts that the same tokens select are put
// on the same node (the fast tier), so a token's top-k copies cross the slow tier to fewer nodes;
// then each node is balanced with replicas as in DeepSeek EPLB (search/expert_placement.h).
//
// Traffic model (DeepEP internode dispatch, our reading of its normal kernels): a token is sent
// over the slow tier (RDMA) once per remote node that holds at least one of its top-k experts, and
// fanned out to that node's ranks over the fast tier (NVLink); the combine returns the same way.
// The token's source rank is uniform over the EP ranks (data-parallel input), so the expected
// number of slow-tier copies per token is  nodes_hit * (1 - 1/nodes).
//
// Units: loads in tokens; pair counts in tokens that chose both experts; bytes per token copy =
// hidden * bytes per element of the dispatched activation; traffic per routed token.
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "search/expert_placement.h"

namespace onboard {

struct CoactivationPlacementRequest {
  ExpertPlacementRequest base;   // loads, ep_ranks, ranks_per_node, spare slots (group_size unused)
  // Sampled routings: one top-k expert list per token (what the probe's router chose).
  std::vector<std::vector<int64_t>> token_experts;
  // Measured co-selection counts instead of (or besides) samples: dense [E][E], symmetric, >= 0
  // (tokens that chose both; the probe's ProbeCoactivation pairs). Empty = none. Traffic before /
  // after is computed from token_experts only (all zero without samples).
  std::vector<std::vector<double>> pair_counts;
  double bytes_per_copy = 0;     // bytes of one token's activation sent to one node (dispatch)
  double max_node_imbalance = 1.05;  // node max/mean load the grouping may not exceed (after the
                                     // load-only packing's own value, whichever is larger)
  int max_passes = 8;            // local-search passes (each tries every expert once)
};

// Slow/fast tier traffic of a placement over the sampled routings.
struct TierTraffic {
  double ranks_per_token = 0;         // distinct ranks holding a token's top-k (mean)
  double nodes_per_token = 0;         // distinct nodes holding a token's top-k (mean)
  double cross_node_copies_per_token = 0;  // expected slow-tier copies per token, dispatch only
  double slow_tier_bytes_per_token = 0;    // dispatch + combine, bytes
  double max_over_mean_rank_load = 0;      // over EP ranks (replica loads split evenly)
};

struct CoactivationPlacement {
  ExpertPlacement placement;          // ranks, replicas, loads (after = this placement)
  std::vector<int64_t> expert_node;   // expert -> node
  TierTraffic before;                 // contiguous placement, no replicas
  TierTraffic load_only;              // PlaceExperts (load packing, no co-activation)
  TierTraffic after;                  // this placement
  int64_t intra_node_pairs_before = 0, intra_node_pairs_after = 0;  // co-selected pairs sharing a node
  int passes = 0;
};

// Errors: those of PlaceExperts, a token expert id outside [0, experts), pair_counts not E x E or
// negative / not finite / not symmetric (field and value named).
Expected<CoactivationPlacement> PlaceExpertsByCoactivation(const CoactivationPlacementRequest& req);

// Traffic of a given placement (rank -> experts held) over sampled routings. A replicated expert's
// tokens are split round-robin among its copies.
TierTraffic MeasureTierTraffic(const std::vector<std::vector<int64_t>>& token_experts,
                               const std::vector<std::vector<int64_t>>& rank_experts, int64_t experts,
                               int64_t ranks_per_node, double bytes_per_copy);

}  // namespace onboard
