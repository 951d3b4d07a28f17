// Rule expert_overlap on probe results built here: 4 ranks declared as 2 nodes x 2, EP over all of
// them, a shared expert in the proxy, and a measured expert all-to-all that the host blocked on for a
// chosen share of the step. The rule turns the probe's overlap on (and the loop's next probe reads it).
#include <gtest/gtest.h>

#include "agent/rules/rules.h"

namespace onboard::agent {
namespace {

// 6 steps of 100 ms, `exposed_ms` of each spent waiting on the expert all-to-all.
ProbeResult TwoNodeProbe(double exposed_ms) {
  ProbeResult p;
  p.spec.num_experts = 8;
  p.spec.top_k = 2;
  p.spec.num_shared = 1;
  p.config.ranks = 4;
  p.config.ep = 4;
  p.config.ranks_per_node = 2;
  for (int i = 0; i < 6; ++i) {
    ProbeStep s;
    s.step = i;
    s.loss = 3.0 - 0.1 * i;
    s.grad_norm = 1.0;
    s.step_s = 0.1;
    s.comm.all_to_all_s = exposed_ms * 1e-3;
    s.compute_s = s.step_s - s.comm.total();
    p.steps.push_back(s);
  }
  return p;
}

std::optional<Decision> Fire(const ProbeResult& p, LoopKnobs& k, const Thresholds& th = Thresholds{}) {
  RoundEvidence ev;
  ev.round = 1;
  ev.probe = &p;
  return RuleExpertOverlap(ev, th, k);
}

TEST(RuleExpertOverlap, ExposedAllToAllOverItsShareTurnsTheOverlapOnAndReprobes) {
  const ProbeResult p = TwoNodeProbe(/*exposed_ms=*/30);  // 30% of the step
  LoopKnobs k;
  auto d = Fire(p, k);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->rule, "expert_overlap");
  EXPECT_EQ(d->family, "comm");
  EXPECT_NEAR(d->observed["a2a_exposed_s"].get<double>(), 0.03, 1e-12);
  EXPECT_NEAR(d->observed["a2a_exposed_share"].get<double>(), 0.3, 1e-9);
  EXPECT_TRUE(k.moe_overlap);
  EXPECT_TRUE(k.reprobe);
  EXPECT_FALSE(k.replan);  // the plan is not re-searched: the probe measures what the overlap hides
  // Once on, nothing is left to change.
  EXPECT_FALSE(Fire(p, k).has_value());
  // The threshold passed in decides: at 0.4 the same 30% does not fire.
  Thresholds lax;
  lax.expert_a2a_exposed_share = 0.4;
  LoopKnobs k2;
  EXPECT_FALSE(Fire(p, k2, lax).has_value());
  EXPECT_FALSE(k2.moe_overlap);
}

TEST(RuleExpertOverlap, UnderTheShareDoesNotFire) {
  LoopKnobs k;
  EXPECT_FALSE(Fire(TwoNodeProbe(/*exposed_ms=*/5), k).has_value());  // 5% of the step
  EXPECT_FALSE(k.moe_overlap);
  EXPECT_FALSE(k.reprobe);
}

TEST(RuleExpertOverlap, NothingToOverlapOrNoSlowTierDoesNotFire) {
  LoopKnobs k;
  ProbeResult one_node = TwoNodeProbe(30);
  one_node.config.ranks_per_node = 0;  // one node: the exchange never crosses the slow tier
  EXPECT_FALSE(Fire(one_node, k).has_value());
  ProbeResult no_shared = TwoNodeProbe(30);
  no_shared.spec.num_shared = 0;  // no shared expert to run under the exchange
  EXPECT_FALSE(Fire(no_shared, k).has_value());
  ProbeResult deepep = TwoNodeProbe(30);
  deepep.config.ep_dispatcher = "deepep";  // the probe's node-dedup dispatch runs synchronously
  EXPECT_FALSE(Fire(deepep, k).has_value());
  ProbeResult overlapped = TwoNodeProbe(30);
  overlapped.config.moe_overlap = true;  // already overlapped
  EXPECT_FALSE(Fire(overlapped, k).has_value());
  ProbeResult no_ep = TwoNodeProbe(30);
  no_ep.config.ep = 1;  // no expert exchange
  EXPECT_FALSE(Fire(no_ep, k).has_value());
  EXPECT_FALSE(k.moe_overlap);
}

}  // namespace
}  // namespace onboard::agent
