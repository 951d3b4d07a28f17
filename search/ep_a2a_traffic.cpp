// Expert all-to-all traffic split by tier (formulas in ep_a2a_traffic.h).
#include "search/ep_a2a_traffic.h"

#include <algorithm>
#include <cmath>

namespace onboard {

double UniformNodesPerToken(double nodes, int64_t top_k) {
  if (top_k <= 0) return 0;
  if (nodes <= 1) return 1;
  return nodes * (1 - std::pow(1 - 1 / nodes, static_cast<double>(top_k)));
}

EpTierTraffic EpA2aTraffic(int64_t top_k, int64_t ep_ranks, int64_t stride, int64_t ranks_per_node,
                           double group_limited, const EpRouting& routing) {
  EpTierTraffic t;
  const double kk = static_cast<double>(top_k);
  const double n = static_cast<double>(ep_ranks);
  const double span = n * static_cast<double>(std::max<int64_t>(stride, 1));
  const double g = std::min(span, static_cast<double>(std::max<int64_t>(ranks_per_node, 1)));
  // Step 1: nodes the EP group spans; one node = no slow tier, the model's share unchanged.
  t.nodes = span / g;
  t.beyond_first_tier = group_limited;
  t.fast_copies = kk * (g / span - 1 / n);
  if (t.nodes <= 1 || top_k <= 0) {
    t.nodes_per_token = top_k > 0 ? 1 : 0;
    return t;
  }
  const double N = t.nodes;
  // Step 2: D = distinct nodes a token reaches: measured, else uniform k picks; capped by min(N, k)
  // and node-limited routing M.
  const double uniform = UniformNodesPerToken(N, top_k);
  double D = routing.nodes_per_token > 0 ? std::min({routing.nodes_per_token, N, kk}) : uniform;
  if (routing.max_route_nodes > 0) D = std::min(D, static_cast<double>(routing.max_route_nodes));
  t.nodes_per_token = D;
  // Step 3: the slow-tier share. Plain all-to-all: every copy (D does not enter); node-deduplicated:
  // D/k of the plain all-to-all's copies (min with the group-limited share, as before).
  if (routing.dispatcher != EpDispatcher::kAllToAll) t.beyond_first_tier = std::min(group_limited, D / kk);
  t.slow_copies = t.beyond_first_tier * kk * (1 - g / span);
  return t;
}

}  // namespace onboard
