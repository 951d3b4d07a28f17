// Co-activation-aware placement on synthetic routings with a planted structure: experts of one
// cluster are chosen together, and the contiguous placement scatters every cluster over all nodes.
// Controls: the load-only placement (no co-activation) must not find the reduction, and routings
// without structure must not show one either.
#include <gtest/gtest.h>

#include <numeric>
#include <random>
#include <set>

#include "search/coactivation_placement.h"

namespace onboard {
namespace {

constexpr int64_t kExperts = 64, kTopK = 4, kClusters = 4;

// Tokens choose kTopK distinct experts; with probability `structured` all from one cluster
// (cluster c = experts e with e % kClusters == c), chosen with probabilities `cluster_p`.
std::vector<std::vector<int64_t>> Routings(int64_t tokens, double structured, std::vector<double> cluster_p,
                                           uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::discrete_distribution<int> pick_cluster(cluster_p.begin(), cluster_p.end());
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<std::vector<int64_t>> out;
  for (int64_t t = 0; t < tokens; ++t) {
    std::set<int64_t> chosen;
    const bool planted = u(rng) < structured;
    const int c = pick_cluster(rng);
    while (static_cast<int64_t>(chosen.size()) < kTopK) {
      const int64_t e = planted ? c + kClusters * static_cast<int64_t>(rng() % (kExperts / kClusters))
                                : static_cast<int64_t>(rng() % kExperts);
      chosen.insert(e);
    }
    out.emplace_back(chosen.begin(), chosen.end());
  }
  return out;
}

CoactivationPlacementRequest Request(const std::vector<std::vector<int64_t>>& routings, int64_t spare) {
  CoactivationPlacementRequest req;
  req.base.expert_load.assign(kExperts, 0);
  for (const auto& tok : routings)
    for (int64_t e : tok) req.base.expert_load[e] += 1;
  req.base.ep_ranks = 8;
  req.base.ranks_per_node = 2;  // 4 nodes of 16 experts
  req.base.spare_slots_per_rank = spare;
  req.token_experts = routings;
  req.bytes_per_copy = 7168 * 2;  // hidden 7168 in bf16
  return req;
}

TEST(CoactivationPlacement, GroupsCoSelectedExpertsOnANode) {
  auto req = Request(Routings(4000, 0.9, {1, 1, 1, 1}, 3), 0);
  auto r = PlaceExpertsByCoactivation(req);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::printf("nodes/token: contiguous %.2f, load-only %.2f, co-activation %.2f; slow-tier KiB/token %.1f -> %.1f\n",
              r->before.nodes_per_token, r->load_only.nodes_per_token, r->after.nodes_per_token,
              r->before.slow_tier_bytes_per_token / 1024, r->after.slow_tier_bytes_per_token / 1024);
  EXPECT_GT(r->before.nodes_per_token, 2.3);  // the planted clusters are scattered at the start
  EXPECT_LT(r->after.cross_node_copies_per_token, 0.5 * r->before.cross_node_copies_per_token);
  EXPECT_LT(r->after.slow_tier_bytes_per_token, 0.5 * r->before.slow_tier_bytes_per_token);
  EXPECT_GT(r->intra_node_pairs_after, 2 * r->intra_node_pairs_before);
  // Control: packing by load alone does not find the structure.
  EXPECT_GT(r->load_only.cross_node_copies_per_token, 0.8 * r->before.cross_node_copies_per_token);
  // Every expert on exactly one node, each node full.
  std::vector<int64_t> per_node(4, 0);
  for (int64_t n : r->expert_node) ++per_node[n];
  EXPECT_EQ(per_node, (std::vector<int64_t>{16, 16, 16, 16}));
}

TEST(CoactivationPlacement, NoStructureNoReduction) {
  auto req = Request(Routings(4000, 0.0, {1, 1, 1, 1}, 5), 0);
  auto r = PlaceExpertsByCoactivation(req);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_GT(r->after.cross_node_copies_per_token, 0.9 * r->before.cross_node_copies_per_token);
}

TEST(CoactivationPlacement, NodeLoadCapHoldsAndReplicasBalanceRanks) {
  // Cluster 0 carries 40% of the tokens: grouping it whole onto one node would overload that node.
  auto req = Request(Routings(4000, 0.9, {4, 2, 2, 2}, 7), 1);
  req.max_node_imbalance = 1.05;
  auto r = PlaceExpertsByCoactivation(req);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const auto& nl = r->placement.node_load_after;
  const double mean = std::accumulate(nl.begin(), nl.end(), 0.0) / nl.size();
  auto lo = PlaceExperts(req.base);
  ASSERT_TRUE(lo.ok());
  const auto& lnl = lo->node_load_after;
  const double lo_imb = *std::max_element(lnl.begin(), lnl.end()) / mean;
  EXPECT_LE(*std::max_element(nl.begin(), nl.end()) / mean, std::max(1.05, lo_imb) + 1e-6);
  EXPECT_LT(r->after.cross_node_copies_per_token, r->before.cross_node_copies_per_token);
  // Inside the nodes, replicas keep the ranks close to balanced.
  EXPECT_LT(r->placement.max_over_mean_after, 1.10);
}

TEST(CoactivationPlacement, RejectsAnExpertIdOutOfRange) {
  auto req = Request(Routings(10, 0.5, {1, 1, 1, 1}, 1), 0);
  req.token_experts[3][0] = kExperts;
  auto r = PlaceExpertsByCoactivation(req);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("token_experts[3]"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("64"), std::string::npos);
}

TEST(ExpertPlacementOnNodes, RejectsAnAssignmentThatIsNotAPartition) {
  ExpertPlacementRequest base;
  base.expert_load.assign(8, 1.0);
  base.ep_ranks = 4;
  base.ranks_per_node = 2;
  auto r = PlaceExpertsOnNodes(base, {{0, 1, 2, 3}, {3, 4, 5, 6}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("node_experts"), std::string::npos);
  EXPECT_TRUE(PlaceExpertsOnNodes(base, {{0, 2, 4, 6}, {1, 3, 5, 7}}).ok());
}

}  // namespace
}  // namespace onboard
