// Rule expert_coactivation on probe results built here: 4 ranks declared as 2 nodes x 2, 8 experts
// with even loads and planted co-selected pairs; the rule re-places so the pairs share a node.
#include <gtest/gtest.h>

#include "agent/rules/rules.h"

namespace onboard::agent {
namespace {

// Pairs (a, a+shift) for a = 0..3 chosen by 100 tokens each, plus a little uniform background.
ProbeResult TwoNodeProbe(int64_t shift, int64_t ranks_per_node) {
  ProbeResult p;
  p.spec.num_experts = 8;
  p.spec.top_k = 2;
  p.config.ranks = 4;
  p.config.ep = 4;
  p.config.ranks_per_node = ranks_per_node;
  ProbeStep s;
  s.expert_load = {std::vector<int64_t>(8, 110)};
  p.steps.push_back(s);
  ProbeCoactivationLayer l;
  l.layer = 1;
  l.tokens = 440;
  for (int64_t a = 0; a < 4; ++a) l.pairs.push_back({a, a + shift, 100});
  for (int64_t a = 0; a < 8; ++a)
    for (int64_t b = a + 1; b < 8; ++b)
      if (b != a + shift) l.pairs.push_back({a, b, 1});
  l.ranks_hist = {0, 0, 440};
  l.nodes_hist = {0, 0, 440};
  p.coactivation.ranks_per_node = ranks_per_node;
  p.coactivation.nodes = 4 / ranks_per_node;
  p.coactivation.top_k = 2;
  p.coactivation.layers = {l};
  return p;
}

TEST(RuleExpertCoactivation, PutsCoSelectedExpertsOnOneNode) {
  ProbeResult p = TwoNodeProbe(/*shift=*/4, /*ranks_per_node=*/2);  // contiguous splits every pair
  RoundEvidence ev;
  ev.round = 1;
  ev.probe = &p;
  LoopKnobs k;
  auto d = RuleExpertCoactivation(ev, Thresholds{}, k);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->rule, "expert_coactivation");
  ASSERT_EQ(k.expert_placement.size(), 8u);
  for (int64_t a = 0; a < 4; ++a) EXPECT_EQ(k.expert_placement[a] / 2, k.expert_placement[a + 4] / 2) << a;
  std::vector<int64_t> per_rank(4, 0);
  for (int64_t r : k.expert_placement) ++per_rank[r];
  EXPECT_EQ(per_rank, (std::vector<int64_t>{2, 2, 2, 2}));
  EXPECT_TRUE(k.reprobe);
  EXPECT_LT(d->observed["pairs_split_over_nodes_after_predicted"].get<double>(),
            d->observed["pairs_split_over_nodes"].get<double>());
  // Under the new placement the rule has nothing left to gain.
  p.config.expert_placement = k.expert_placement;
  LoopKnobs k2 = k;
  EXPECT_FALSE(RuleExpertCoactivation(ev, Thresholds{}, k2).has_value());
}

TEST(RuleExpertCoactivation, OneNodeOrPairsAlreadyTogetherDoNotFire) {
  ProbeResult one = TwoNodeProbe(4, /*ranks_per_node=*/4);  // all ranks on one node
  RoundEvidence ev;
  ev.probe = &one;
  LoopKnobs k;
  EXPECT_FALSE(RuleExpertCoactivation(ev, Thresholds{}, k).has_value());
  ProbeResult together = TwoNodeProbe(/*shift=*/1, 2);  // then only pairs inside the contiguous nodes
  together.coactivation.layers[0].pairs = {{0, 1, 100}, {2, 3, 100}, {4, 5, 100}, {6, 7, 100}};
  ev.probe = &together;
  EXPECT_FALSE(RuleExpertCoactivation(ev, Thresholds{}, k).has_value());
  EXPECT_TRUE(k.expert_placement.empty());
}

}  // namespace
}  // namespace onboard::agent
