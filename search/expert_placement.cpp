// Hierarchical expert placement (our own code, after the idea of DeepSeek EPLB):
//   Step 1: pack expert groups onto nodes, heaviest group first onto the lightest node with room
//           (each node takes experts/nodes base experts).
//   Step 2: per node, hand its spare slots (spare_slots_per_rank * ranks_per_node) to the experts
//           with the highest load per copy, one copy at a time (load splits evenly among copies).
//   Step 3: per node, pack the copies onto its ranks: heaviest copy first onto the lightest rank
//           with a free slot (slots per rank = experts/ep_ranks + spare_slots_per_rank).
// Loads are tokens per expert; max/mean is over ranks.
#include "search/expert_placement.h"

#include "core/load_balance.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

namespace onboard {
namespace {

std::vector<size_t> HeaviestFirst(const std::vector<double>& w) {
  std::vector<size_t> idx(w.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return w[a] > w[b]; });
  return idx;
}

// The shapes every placement shares: experts per rank and per node, nodes.
struct PlacementShape {
  int64_t experts = 0, rpn = 0, nodes = 0, per_rank = 0, per_node = 0;
};

Expected<PlacementShape> CheckRequest(const ExpertPlacementRequest& req) {
  const std::string f = "expert placement";
  const int64_t E = static_cast<int64_t>(req.expert_load.size());
  if (E == 0) return BadInput(f, "expert_load", "needs at least one expert", "[]");
  for (int64_t e = 0; e < E; ++e)
    if (!(req.expert_load[e] >= 0) || !std::isfinite(req.expert_load[e]))
      return BadInput(f, "expert_load[" + std::to_string(e) + "]", "must be finite and >= 0",
                      std::to_string(req.expert_load[e]));
  if (req.ep_ranks < 1 || E % req.ep_ranks != 0)
    return BadInput(f, "ep_ranks", "must divide experts=" + std::to_string(E), std::to_string(req.ep_ranks));
  if (req.ranks_per_node < 1 || req.ep_ranks % std::min(req.ranks_per_node, req.ep_ranks) != 0)
    return BadInput(f, "ranks_per_node", "must divide ep_ranks=" + std::to_string(req.ep_ranks),
                    std::to_string(req.ranks_per_node));
  if (req.spare_slots_per_rank < 0 || req.spare_slots_per_rank > E)
    return BadInput(f, "spare_slots_per_rank", "must be in [0, experts]", std::to_string(req.spare_slots_per_rank));
  PlacementShape sh;
  sh.experts = E;
  sh.rpn = std::min(req.ranks_per_node, req.ep_ranks);
  sh.nodes = req.ep_ranks / sh.rpn;
  sh.per_rank = E / req.ep_ranks;
  sh.per_node = sh.per_rank * sh.rpn;
  return sh;
}

// Steps 2 and 3 for one node: replicas of its hottest experts into its spare slots, then the copies
// packed onto its ranks (copies of one expert on distinct ranks where possible).
void PackNode(const ExpertPlacementRequest& req, const PlacementShape& sh, int64_t n,
              const std::vector<int64_t>& ex, ExpertPlacement& out) {
  const int64_t rpn = sh.rpn;
  const int64_t slots = sh.per_rank + req.spare_slots_per_rank;
  // Step 2: replicas of the hottest experts into this node's spare slots.
  std::vector<int64_t> copies(ex.size(), 1);
  for (int64_t s = 0; s < req.spare_slots_per_rank * rpn; ++s) {
    size_t hot = 0;
    for (size_t i = 1; i < ex.size(); ++i)
      if (req.expert_load[ex[i]] / copies[i] > req.expert_load[ex[hot]] / copies[hot]) hot = i;
    if (copies[hot] >= rpn) break;  // a copy per rank already; more would not help
    ++copies[hot];
  }
  // Step 3: pack copies onto the node's ranks; copies of one expert go to distinct ranks.
  std::vector<int64_t> ids;
  std::vector<double> w;
  for (size_t i = 0; i < ex.size(); ++i)
    for (int64_t c = 0; c < copies[i]; ++c) {
      ids.push_back(ex[i]);
      w.push_back(req.expert_load[ex[i]] / static_cast<double>(copies[i]));
    }
  for (size_t k : HeaviestFirst(w)) {
    int64_t best = -1;
    for (int pass = 0; pass < 2 && best < 0; ++pass)  // pass 1 allows a second copy on one rank
      for (int64_t r = n * rpn; r < (n + 1) * rpn; ++r) {
        const auto& held = out.rank_experts[r];
        if (static_cast<int64_t>(held.size()) >= slots) continue;
        if (pass == 0 && std::find(held.begin(), held.end(), ids[k]) != held.end()) continue;
        if (best < 0 || out.rank_load_after[r] < out.rank_load_after[best]) best = r;
      }
    ONBOARD_ASSERT(best >= 0, "rank packing ran out of slots");
    out.rank_experts[best].push_back(ids[k]);
    out.rank_load_after[best] += w[k];
  }
  for (size_t i = 0; i < ex.size(); ++i) out.replicas[ex[i]] = copies[i];
}

// Baseline (contiguous), then steps 2-3 on every node of a given node assignment.
ExpertPlacement PackNodes(const ExpertPlacementRequest& req, const PlacementShape& sh,
                          const std::vector<std::vector<int64_t>>& node_experts) {
  ExpertPlacement out;
  out.rank_load_before.assign(req.ep_ranks, 0);
  for (int64_t e = 0; e < sh.experts; ++e) out.rank_load_before[e / sh.per_rank] += req.expert_load[e];
  out.max_over_mean_before = MaxOverMean(out.rank_load_before);
  out.replicas.assign(sh.experts, 1);
  out.rank_experts.assign(req.ep_ranks, {});
  out.rank_load_after.assign(req.ep_ranks, 0);
  for (int64_t n = 0; n < sh.nodes; ++n) PackNode(req, sh, n, node_experts[n], out);
  out.max_over_mean_after = MaxOverMean(out.rank_load_after);
  out.node_load_after.assign(sh.nodes, 0);
  for (int64_t r = 0; r < req.ep_ranks; ++r) out.node_load_after[r / sh.rpn] += out.rank_load_after[r];
  return out;
}

}  // namespace

Expected<ExpertPlacement> PlaceExperts(const ExpertPlacementRequest& req) {
  ONBOARD_ASSIGN_OR_RETURN(PlacementShape sh, CheckRequest(req));
  const int64_t E = sh.experts;
  int64_t gsize = std::max<int64_t>(1, req.group_size);
  if (E % gsize != 0 || sh.per_node % gsize != 0) gsize = 1;  // groups that cannot tile nodes: place singly
  // Step 1: groups -> nodes, heaviest group first onto the lightest node with room.
  const int64_t G = E / gsize;
  std::vector<double> gload(G, 0);
  for (int64_t e = 0; e < E; ++e) gload[e / gsize] += req.expert_load[e];
  std::vector<std::vector<int64_t>> node_experts(sh.nodes);
  std::vector<double> node_load(sh.nodes, 0);
  for (size_t g : HeaviestFirst(gload)) {
    int64_t best = -1;
    for (int64_t n = 0; n < sh.nodes; ++n)
      if (static_cast<int64_t>(node_experts[n].size()) + gsize <= sh.per_node &&
          (best < 0 || node_load[n] < node_load[best]))
        best = n;
    ONBOARD_ASSERT(best >= 0, "node packing ran out of slots");
    for (int64_t k = 0; k < gsize; ++k) node_experts[best].push_back(static_cast<int64_t>(g) * gsize + k);
    node_load[best] += gload[g];
  }
  return PackNodes(req, sh, node_experts);
}

Expected<ExpertPlacement> PlaceExpertsOnNodes(const ExpertPlacementRequest& req,
                                              const std::vector<std::vector<int64_t>>& node_experts) {
  ONBOARD_ASSIGN_OR_RETURN(PlacementShape sh, CheckRequest(req));
  const std::string f = "expert placement";
  if (static_cast<int64_t>(node_experts.size()) != sh.nodes)
    return BadInput(f, "node_experts", "needs one list per node (" + std::to_string(sh.nodes) + ")",
                    std::to_string(node_experts.size()));
  std::vector<int> seen(sh.experts, 0);
  for (const auto& ex : node_experts) {
    if (static_cast<int64_t>(ex.size()) != sh.per_node)
      return BadInput(f, "node_experts", "each node holds " + std::to_string(sh.per_node) + " experts",
                      std::to_string(ex.size()));
    for (int64_t e : ex) {
      if (e < 0 || e >= sh.experts || seen[e]++)
        return BadInput(f, "node_experts", "every expert exactly once, ids in [0, experts)", std::to_string(e));
    }
  }
  return PackNodes(req, sh, node_experts);
}

std::vector<double> ZipfExpertLoads(int64_t num_experts, double s, double total_tokens, uint64_t seed) {
  std::vector<double> w(std::max<int64_t>(num_experts, 0));
  double H = 0;
  for (int64_t i = 0; i < num_experts; ++i) H += 1.0 / std::pow(static_cast<double>(i + 1), s);
  for (int64_t i = 0; i < num_experts; ++i) w[i] = total_tokens / std::pow(static_cast<double>(i + 1), s) / H;
  std::mt19937_64 rng(seed);
  std::shuffle(w.begin(), w.end(), rng);
  return w;
}

}  // namespace onboard
