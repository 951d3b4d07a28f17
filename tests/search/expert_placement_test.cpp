// Hierarchical expert placement on skewed (Zipf) loads: replicas of hot experts into spare slots
// must bring max/mean down; every expert is placed; bad input is rejected with field and value.
#include <numeric>
#include <set>

#include "search/expert_placement.h"
#include "search_test_util.h"

namespace onboard {
namespace {

TEST(ExpertPlacement, ZipfLoadsBalanceWithReplicas) {
  ExpertPlacementRequest req;
  req.expert_load = ZipfExpertLoads(896, 1.0, 1e6, 7);
  req.ep_ranks = 64;
  req.ranks_per_node = 8;
  req.spare_slots_per_rank = 2;
  auto r = PlaceExperts(req);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_GT(r->max_over_mean_before, 1.5);
  EXPECT_LT(r->max_over_mean_after, r->max_over_mean_before);
  EXPECT_LT(r->max_over_mean_after, 1.3);
  // Every expert placed, slots respected, total load conserved.
  std::set<int64_t> seen;
  for (const auto& rank : r->rank_experts) {
    EXPECT_LE(rank.size(), 896u / 64 + 2);
    seen.insert(rank.begin(), rank.end());
  }
  EXPECT_EQ(seen.size(), 896u);
  const double before = std::accumulate(r->rank_load_before.begin(), r->rank_load_before.end(), 0.0);
  const double after = std::accumulate(r->rank_load_after.begin(), r->rank_load_after.end(), 0.0);
  EXPECT_NEAR(before, after, 1e-6 * before);
  // The hottest expert got replicas; replicas match the rank lists.
  const auto hottest = std::max_element(req.expert_load.begin(), req.expert_load.end()) - req.expert_load.begin();
  EXPECT_GT(r->replicas[hottest], 1);
  int64_t copies = 0;
  for (const auto& rank : r->rank_experts) copies += std::count(rank.begin(), rank.end(), hottest);
  EXPECT_EQ(copies, r->replicas[hottest]);
}

TEST(ExpertPlacement, NoSpareSlotsStillPacksBetterThanContiguous) {
  ExpertPlacementRequest req;
  req.expert_load = ZipfExpertLoads(256, 0.8, 1e5, 3);
  req.ep_ranks = 32;
  req.ranks_per_node = 8;
  auto r = PlaceExperts(req);
  ASSERT_TRUE(r.ok());
  EXPECT_LE(r->max_over_mean_after, r->max_over_mean_before);
  for (int64_t c : r->replicas) EXPECT_EQ(c, 1);
}

TEST(ExpertPlacement, BadInputNamesFieldAndValue) {
  ExpertPlacementRequest req;
  req.expert_load = std::vector<double>(10, 1.0);
  req.ep_ranks = 3;
  auto r = PlaceExperts(req);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("ep_ranks"), std::string::npos);
  EXPECT_NE(r.status().message().find("(got 3)"), std::string::npos);
  req.ep_ranks = 2;
  req.expert_load[4] = -1;
  r = PlaceExperts(req);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("expert_load[4]"), std::string::npos);
}

}  // namespace
}  // namespace onboard
