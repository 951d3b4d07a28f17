// PlaceExpertsByCoactivation (see coactivation_placement.h). Our own code, after the hierarchical
// steps of DeepSeek EPLB, with the node step driven by co-selection instead of load alone:
//   Step 1: count co-selected pairs W[i][j] over the sampled routings (tokens choosing both).
//   Step 2: group experts into nodes: greedy, most co-selected expert first, each onto the node with
//           room where its affinity (sum of W to the node's experts) is highest, within the node load
//           cap; then Kernighan-Lin style swaps between nodes while they raise the intra-node pair
//           weight and keep every node under the cap.
//   Step 3: per node, replicas and rank packing as PlaceExperts does (PlaceExpertsOnNodes).
//   Step 4: traffic before (contiguous), with load-only packing, and after, on the same samples.
// Shapes: E experts, N nodes, E/N experts per node; W is dense E x E (float), E <= 4096.
#include "search/coactivation_placement.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

namespace onboard {
namespace {

constexpr int64_t kMaxDenseExperts = 4096;  // W is E*E floats: 64 MiB at the cap

struct Grouping {
  std::vector<int64_t> node_of;          // expert -> node
  std::vector<double> node_load;         // tokens
  std::vector<std::vector<float>> aff;   // aff[e][n] = sum of W[e][j] over experts j on node n
};

double MeanOf(const std::vector<double>& v) {
  return v.empty() ? 0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

// Step 2a: greedy construction.
Grouping GreedyGroups(const std::vector<std::vector<float>>& W, const std::vector<double>& load,
                      int64_t nodes, int64_t per_node, double cap) {
  const int64_t E = static_cast<int64_t>(load.size());
  Grouping g;
  g.node_of.assign(E, -1);
  g.node_load.assign(nodes, 0);
  g.aff.assign(E, std::vector<float>(nodes, 0.f));
  std::vector<double> degree(E, 0);
  for (int64_t e = 0; e < E; ++e) degree[e] = std::accumulate(W[e].begin(), W[e].end(), 0.0);
  std::vector<int64_t> order(E);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return degree[a] != degree[b] ? degree[a] > degree[b] : load[a] > load[b];
  });
  std::vector<int64_t> count(nodes, 0);
  // A node keeps room under the cap for its remaining slots at the lightest expert's load.
  const double lightest = *std::min_element(load.begin(), load.end());
  for (int64_t e : order) {
    int64_t best = -1;
    for (int pass = 0; pass < 2 && best < 0; ++pass)  // pass 1 ignores the cap (no node fits it)
      for (int64_t n = 0; n < nodes; ++n) {
        const double reserve = static_cast<double>(per_node - count[n] - 1) * lightest;
        if (count[n] >= per_node || (pass == 0 && g.node_load[n] + load[e] + reserve > cap)) continue;
        if (best < 0 || g.aff[e][n] > g.aff[e][best] ||
            (g.aff[e][n] == g.aff[e][best] && g.node_load[n] < g.node_load[best]))
          best = n;
      }
    ONBOARD_ASSERT(best >= 0, "node grouping ran out of slots");
    g.node_of[e] = best;
    ++count[best];
    g.node_load[best] += load[e];
    for (int64_t j = 0; j < E; ++j) g.aff[j][best] += W[j][e];
  }
  return g;
}

// Step 2b: swaps between nodes; returns the passes run.
int RefineBySwaps(const std::vector<std::vector<float>>& W, const std::vector<double>& load, double cap,
                  int max_passes, Grouping& g) {
  const int64_t E = static_cast<int64_t>(load.size());
  int pass = 0;
  for (; pass < max_passes; ++pass) {
    bool improved = false;
    for (int64_t a = 0; a < E; ++a) {
      const int64_t A = g.node_of[a];
      double best_gain = 1e-9;
      int64_t best_b = -1;
      for (int64_t b = 0; b < E; ++b) {
        const int64_t B = g.node_of[b];
        if (B == A) continue;
        // A swap may not push either node over the cap, nor make an already-overloaded pair worse.
        const double limit = std::max(cap, std::max(g.node_load[A], g.node_load[B]));
        if (g.node_load[A] - load[a] + load[b] > limit || g.node_load[B] - load[b] + load[a] > limit) continue;
        const double gain = (g.aff[a][B] - W[a][b]) - g.aff[a][A] + (g.aff[b][A] - W[a][b]) - g.aff[b][B];
        if (gain > best_gain) best_gain = gain, best_b = b;
      }
      if (best_b < 0) continue;
      const int64_t b = best_b, B = g.node_of[b];
      for (int64_t j = 0; j < E; ++j) {
        g.aff[j][A] += W[j][b] - W[j][a];
        g.aff[j][B] += W[j][a] - W[j][b];
      }
      g.node_load[A] += load[b] - load[a];
      g.node_load[B] += load[a] - load[b];
      g.node_of[a] = B;
      g.node_of[b] = A;
      improved = true;
    }
    if (!improved) break;
  }
  return pass;
}

int64_t IntraNodePairs(const std::vector<std::vector<float>>& W, const std::vector<int64_t>& node_of) {
  double s = 0;
  for (size_t i = 0; i < W.size(); ++i)
    for (size_t j = i + 1; j < W.size(); ++j)
      if (node_of[i] == node_of[j]) s += W[i][j];
  return static_cast<int64_t>(std::llround(s));
}

std::vector<int64_t> NodeOfRanks(const std::vector<std::vector<int64_t>>& rank_experts, int64_t E,
                                 int64_t rpn) {
  std::vector<int64_t> node_of(E, -1);
  for (size_t r = 0; r < rank_experts.size(); ++r)
    for (int64_t e : rank_experts[r]) node_of[e] = static_cast<int64_t>(r) / rpn;
  return node_of;
}

// Step 1b: measured pair counts (dense, symmetric) into W.
Status AddPairCounts(const std::vector<std::vector<double>>& pc, std::vector<std::vector<float>>& W) {
  if (pc.empty()) return Status::Ok();
  const size_t E = W.size();
  const std::string f = "co-activation placement";
  if (pc.size() != E)
    return BadInput(f, "pair_counts", "needs one row per expert (" + std::to_string(E) + ")",
                    std::to_string(pc.size()));
  for (size_t i = 0; i < E; ++i)
    if (pc[i].size() != E)
      return BadInput(f, "pair_counts[" + std::to_string(i) + "]", "needs " + std::to_string(E) + " entries",
                      std::to_string(pc[i].size()));
  for (size_t i = 0; i < E; ++i) {
    for (size_t j = 0; j < E; ++j) {
      const double v = pc[i][j];
      if (!(v >= 0) || !std::isfinite(v) || v != pc[j][i] || (i == j && v != 0))
        return BadInput(f, "pair_counts[" + std::to_string(i) + "][" + std::to_string(j) + "]",
                        "must be finite, >= 0, symmetric, zero on the diagonal", std::to_string(v));
      W[i][j] += static_cast<float>(v);
    }
  }
  return Status::Ok();
}

}  // namespace

TierTraffic MeasureTierTraffic(const std::vector<std::vector<int64_t>>& token_experts,
                               const std::vector<std::vector<int64_t>>& rank_experts, int64_t experts,
                               int64_t ranks_per_node, double bytes_per_copy) {
  TierTraffic t;
  const int64_t R = static_cast<int64_t>(rank_experts.size());
  const int64_t rpn = std::max<int64_t>(1, std::min(ranks_per_node, R));
  const int64_t nodes = std::max<int64_t>(1, R / rpn);
  std::vector<std::vector<int64_t>> copies(experts);
  for (int64_t r = 0; r < R; ++r)
    for (int64_t e : rank_experts[r]) copies[e].push_back(r);
  std::vector<int64_t> next(experts, 0);
  std::vector<double> rank_load(R, 0);
  double ranks_sum = 0, nodes_sum = 0;
  for (const auto& tok : token_experts) {
    std::set<int64_t> ranks, nds;
    for (int64_t e : tok) {
      ONBOARD_ASSERT(e >= 0 && e < experts && !copies[e].empty(), "routed expert has no copy");
      const int64_t r = copies[e][next[e]++ % static_cast<int64_t>(copies[e].size())];
      ranks.insert(r);
      nds.insert(r / rpn);
      rank_load[r] += 1;
    }
    ranks_sum += static_cast<double>(ranks.size());
    nodes_sum += static_cast<double>(nds.size());
  }
  const double n_tok = std::max<double>(1, static_cast<double>(token_experts.size()));
  t.ranks_per_token = ranks_sum / n_tok;
  t.nodes_per_token = nodes_sum / n_tok;
  t.cross_node_copies_per_token = t.nodes_per_token * (1.0 - 1.0 / static_cast<double>(nodes));
  t.slow_tier_bytes_per_token = 2.0 * t.cross_node_copies_per_token * bytes_per_copy;  // dispatch + combine
  const double mean = MeanOf(rank_load);
  t.max_over_mean_rank_load = mean > 0 ? *std::max_element(rank_load.begin(), rank_load.end()) / mean : 1.0;
  return t;
}

Expected<CoactivationPlacement> PlaceExpertsByCoactivation(const CoactivationPlacementRequest& req) {
  const std::string f = "co-activation placement";
  // Step 1: validate, the load-only placement (it also checks the shared fields), pair counts.
  ONBOARD_ASSIGN_OR_RETURN(ExpertPlacement load_only, PlaceExperts(req.base));
  const auto& load = req.base.expert_load;
  const int64_t E = static_cast<int64_t>(load.size());
  if (E > kMaxDenseExperts)
    return BadInput(f, "expert_load", "at most " + std::to_string(kMaxDenseExperts) + " experts", std::to_string(E));
  if (!(req.bytes_per_copy >= 0) || !std::isfinite(req.bytes_per_copy))
    return BadInput(f, "bytes_per_copy", "must be finite and >= 0", std::to_string(req.bytes_per_copy));
  if (!(req.max_node_imbalance >= 1) || !std::isfinite(req.max_node_imbalance))
    return BadInput(f, "max_node_imbalance", "must be >= 1", std::to_string(req.max_node_imbalance));
  std::vector<std::vector<float>> W(E, std::vector<float>(E, 0.f));
  for (size_t t = 0; t < req.token_experts.size(); ++t) {
    const auto& tok = req.token_experts[t];
    for (int64_t e : tok)
      if (e < 0 || e >= E)
        return BadInput(f, "token_experts[" + std::to_string(t) + "]", "expert id outside [0, experts)",
                        std::to_string(e));
    for (size_t i = 0; i < tok.size(); ++i)
      for (size_t j = i + 1; j < tok.size(); ++j)
        if (tok[i] != tok[j]) W[tok[i]][tok[j]] += 1.f, W[tok[j]][tok[i]] += 1.f;
  }
  ONBOARD_RETURN_IF_ERROR(AddPairCounts(req.pair_counts, W));
  const int64_t rpn = std::min(req.base.ranks_per_node, req.base.ep_ranks);
  const int64_t nodes = req.base.ep_ranks / rpn;
  const int64_t per_node = E / nodes;
  // Step 2: group into nodes under the load cap.
  std::vector<double> lo_node_load(nodes, 0);
  for (int64_t r = 0; r < req.base.ep_ranks; ++r) lo_node_load[r / rpn] += load_only.rank_load_after[r];
  const double mean_node = MeanOf(lo_node_load);
  const double lo_imb = mean_node > 0 ? *std::max_element(lo_node_load.begin(), lo_node_load.end()) / mean_node : 1;
  const double cap = std::max(req.max_node_imbalance, lo_imb) * mean_node + 1e-9;
  Grouping g = GreedyGroups(W, load, nodes, per_node, cap);
  CoactivationPlacement out;
  out.passes = RefineBySwaps(W, load, cap, req.max_passes, g);
  // Step 3: replicas and ranks inside each node.
  std::vector<std::vector<int64_t>> node_experts(nodes);
  for (int64_t e = 0; e < E; ++e) node_experts[g.node_of[e]].push_back(e);
  ONBOARD_ASSIGN_OR_RETURN(out.placement, PlaceExpertsOnNodes(req.base, node_experts));
  out.expert_node = g.node_of;
  // Step 4: traffic on the same samples.
  std::vector<std::vector<int64_t>> contiguous(req.base.ep_ranks);
  for (int64_t e = 0; e < E; ++e) contiguous[e / (E / req.base.ep_ranks)].push_back(e);
  out.before = MeasureTierTraffic(req.token_experts, contiguous, E, rpn, req.bytes_per_copy);
  out.load_only = MeasureTierTraffic(req.token_experts, load_only.rank_experts, E, rpn, req.bytes_per_copy);
  out.after = MeasureTierTraffic(req.token_experts, out.placement.rank_experts, E, rpn, req.bytes_per_copy);
  out.intra_node_pairs_before = IntraNodePairs(W, NodeOfRanks(contiguous, E, rpn));
  out.intra_node_pairs_after = IntraNodePairs(W, g.node_of);
  return out;
}

}  // namespace onboard
