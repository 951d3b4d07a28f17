// Expert all-to-all traffic split by tier (issue 18 item 2): how many of a token's top-k copies cross
// the slow tier (between nodes) and how many stay on the fast tier (NVLink inside the node), for the
// plain all-to-all and for a node-deduplicating dispatcher, from what the co-activation placement
// measured (search/coactivation_placement.h: TierTraffic::nodes_per_token) and node-limited routing.
//
// Per token, one direction (dispatch; the combine returns the same way), N = nodes the EP group spans,
// D = distinct nodes holding the token's top-k experts, the token's source node uniform (data-parallel
// input, independent of its routing), so P(own node holds one of its experts) = D / N:
//   plain all-to-all  : slow copies = k x (1 - 1/N)        every copy sent; 1/N of them land on the own
//                                                          node (Megatron-Core MoEAlltoAllTokenDispatcher)
//   DeepEP / HybridEP : slow copies = D - D/N = D (1 - 1/N) the token crosses once per remote node it
//                                                          reaches, then fans out over NVLink (DeepEP
//                                                          README, internode normal kernels; DeepSeek-V3
//                                                          report sec. 3.2.2)
//   D                 : expert_nodes_per_token if given, else the uniform-random expectation
//                       N (1 - (1 - 1/N)^k); capped at min(N, k) and at max_route_nodes M when set
//                       (DeepSeek-V3 report sec. 2.1.2, node-limited routing: at most M nodes a token)
//   group-limited     : the model's topk_groups / top_k (LayerProfile::cross_node_fraction) caps the
//                       share as the cost model always has (for the plain all-to-all too)
//   fast copies       = k x (g/span - 1/n): copies to the other ranks of the own node (n EP ranks
//                       spanning `span` ranks, g ranks per node); DeepEP's NVLink fan-out on the remote
//                       node runs concurrently on that node's links
//   bytes per token   = copies x width x 2 B (bf16; the fp8 dispatch halves the dispatch direction)
// The collective (search/collectives.cpp) charges each tier its bytes / bandwidth, the tiers' links
// working concurrently, plus (1 + log2 n) latencies; `beyond_first_tier` = slow copies / the plain
// all-to-all's k (1 - g/span) is the scale it applies to the slow tiers.
// With the EP group inside one node (N <= 1) there is no slow tier: the share is the model's, unchanged.
// Units: copies per token, nodes, bytes per token.
#pragma once

#include <cstdint>

#include "core/plan.h"

namespace onboard {

struct EpRouting {
  double nodes_per_token = 0;   // measured D (0 = not given: uniform-random expectation)
  int64_t max_route_nodes = 0;  // node-limited routing M (0 = off)
  EpDispatcher dispatcher = EpDispatcher::kAllToAll;
};

struct EpTierTraffic {
  double nodes = 0;              // N: nodes the EP group spans (EP span / ranks per node)
  double nodes_per_token = 0;    // D used (after the caps)
  double slow_copies = 0;        // copies per token over the slow tier, one direction
  double fast_copies = 0;        // copies per token to other ranks of the own node, one direction
  double beyond_first_tier = 1;  // slow-tier scale for CollectiveCost (1 = plain, uniform, no limit)
};

// One MoE layer's split. `top_k` routed copies per token, `ep_ranks` x `stride` ranks spanned by the
// EP group, `ranks_per_node` = the fast tier's group size, `group_limited` = the model's
// topk_groups/top_k share (1 = none).
EpTierTraffic EpA2aTraffic(int64_t top_k, int64_t ep_ranks, int64_t stride, int64_t ranks_per_node,
                           double group_limited, const EpRouting& routing);

// D for `top_k` uniform-random picks over `nodes` nodes: N (1 - (1 - 1/N)^k), nodes per token (1 when
// N <= 1). The one home of the uniform expectation (EpA2aTraffic, the agent's expert_routing rule).
double UniformNodesPerToken(double nodes, int64_t top_k);

}  // namespace onboard
