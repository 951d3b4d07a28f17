// The expert all-to-all split by tier (issue 18 item 2, search/ep_a2a_traffic.h): what the
// co-activation placement measures (nodes per token) and node-limited routing feed the slow-tier
// copies of a node-deduplicating dispatcher; a plain all-to-all sends every copy; the request's
// routing fields are range-checked, naming field and value.
#include <cmath>
#include <limits>

#include "core/plan.h"
#include "search/ep_a2a_traffic.h"
#include "search/layout_file.h"
#include "search/plan_request_checks.h"
#include "search_test_util.h"

namespace onboard {
namespace {

using test::Term;

EpRouting Routing(EpDispatcher d, double nodes_per_token = 0, int64_t max_route_nodes = 0) {
  EpRouting r;
  r.dispatcher = d;
  r.nodes_per_token = nodes_per_token;
  r.max_route_nodes = max_route_nodes;
  return r;
}

// 4 nodes of 8 ranks (ep 32), k = 8: deduplicated slow copies = D (1 - 1/4), plain = 8 (1 - 1/4) = 6
// whatever D is. Fails if the measured D were ignored (uniform D = 4(1 - 0.75^8) = 3.60 would give
// 2.70 for both) or if the plain all-to-all were deduplicated.
TEST(EpA2aTraffic, SlowTierCopiesFallWithMeasuredNodesPerToken) {
  const EpTierTraffic d3 = EpA2aTraffic(8, 32, 1, 8, 1.0, Routing(EpDispatcher::kDeepEP, 3));
  const EpTierTraffic d2 = EpA2aTraffic(8, 32, 1, 8, 1.0, Routing(EpDispatcher::kDeepEP, 2));
  EXPECT_DOUBLE_EQ(d3.nodes, 4);
  EXPECT_DOUBLE_EQ(d3.slow_copies, 3 * 0.75);
  EXPECT_DOUBLE_EQ(d2.slow_copies, 2 * 0.75);
  EXPECT_DOUBLE_EQ(d3.fast_copies, 8 * (8.0 / 32 - 1.0 / 32));  // the own node's other 7 ranks
  const EpTierTraffic uniform = EpA2aTraffic(8, 32, 1, 8, 1.0, Routing(EpDispatcher::kDeepEP));
  EXPECT_DOUBLE_EQ(uniform.nodes_per_token, 4 * (1 - std::pow(0.75, 8)));
  EXPECT_DOUBLE_EQ(EpA2aTraffic(8, 32, 1, 8, 1.0, Routing(EpDispatcher::kAllToAll, 3)).slow_copies, 6);
  EXPECT_DOUBLE_EQ(EpA2aTraffic(8, 32, 1, 8, 1.0, Routing(EpDispatcher::kAllToAll, 2)).slow_copies, 6);
  // A measured D above the EP group's nodes is capped at them.
  EXPECT_DOUBLE_EQ(EpA2aTraffic(8, 16, 1, 8, 1.0, Routing(EpDispatcher::kDeepEP, 3)).nodes_per_token, 2);
}

// Node-limited routing M = 1: a deduplicated token crosses at most once, with P = 1 - 1/N (its node
// is the own one with 1/N); the plain all-to-all still sends its k copies to that one node: k(1-1/N).
// Fails if max_route_nodes were not applied (deepep would read 2.70 at N = 4).
TEST(EpA2aTraffic, OneRouteNodeLeavesOneCopyToCross) {
  for (int64_t ep : {16, 32, 64}) {
    const double N = static_cast<double>(ep) / 8;
    const EpTierTraffic d = EpA2aTraffic(8, ep, 1, 8, 1.0, Routing(EpDispatcher::kHybridEP, 0, 1));
    EXPECT_DOUBLE_EQ(d.nodes_per_token, 1) << ep;
    EXPECT_DOUBLE_EQ(d.slow_copies, 1 - 1 / N) << ep;
    EXPECT_DOUBLE_EQ(EpA2aTraffic(8, ep, 1, 8, 1.0, Routing(EpDispatcher::kAllToAll, 0, 1)).slow_copies,
                     8 * (1 - 1 / N))
        << ep;
  }
  // M above the uniform expectation changes nothing.
  EXPECT_DOUBLE_EQ(EpA2aTraffic(8, 32, 1, 8, 1.0, Routing(EpDispatcher::kDeepEP, 0, 8)).slow_copies,
                   EpA2aTraffic(8, 32, 1, 8, 1.0, Routing(EpDispatcher::kDeepEP)).slow_copies);
}

// The EP group inside one node: no slow tier; the collective's scale is the model's group-limited
// share, as before (fails if the new inputs leaked into a one-node group).
TEST(EpA2aTraffic, OneNodeGroupHasNoSlowTier) {
  const EpTierTraffic t = EpA2aTraffic(8, 8, 1, 8, 0.5, Routing(EpDispatcher::kDeepEP, 1, 1));
  EXPECT_DOUBLE_EQ(t.nodes, 1);
  EXPECT_DOUBLE_EQ(t.slow_copies, 0);
  EXPECT_DOUBLE_EQ(t.beyond_first_tier, 0.5);
}

// Qwen3-235B-A22B (128 experts, top-8) with ep 16 over 2 nodes of 8 B200s.
PlanRequest TwoNodeRequest() {
  PlanRequest req;
  auto m = LoadModel(std::string(ONBOARD_TEST_DATA) + "/hf/qwen3-235b-a22b.config.json");
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  req.model = *m;
  req.topology = test::ShippedTopology("b200-32x8");
  return req;
}

Plan TwoNodePlan(EpDispatcher d) {
  Plan p = test::MakePlan(ParallelDegrees{1, 32, 1, 8, 16, 2, 1, false, 1}, 4096, 1, 8);
  p.ep_dispatcher = d;
  return p;
}

double A2a(const PlanRequest& req, const Plan& p) {
  auto e = EvaluatePlan(req, p);
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  const TimeTerm* t = e.ok() ? Term(*e, "comm.ep_a2a") : nullptr;
  return t ? t->total_s : -1;
}

// In the plan: deepep < alltoall on a 2-node EP group; deepep's a2a falls with the measured nodes per
// token, linearly (the slow tier, 50 GB/s IB, is the longer one: t = latency + c x D), and the
// alltoall's does not move; D given as the uniform expectation reproduces the default exactly. Fails
// if the plan ignored expert_nodes_per_token (all deepep values equal) or deduplicated the alltoall.
TEST(EpA2aTraffic, PlanA2aTermUsesTheMeasuredNodesPerToken) {
  PlanRequest req = TwoNodeRequest();
  const Plan nccl = TwoNodePlan(EpDispatcher::kAllToAll), deepep = TwoNodePlan(EpDispatcher::kDeepEP);
  const double nccl_default = A2a(req, nccl), deepep_default = A2a(req, deepep);
  EXPECT_LT(deepep_default, nccl_default);
  req.expert_nodes_per_token = 2 * (1 - std::pow(0.5, 8));  // the uniform expectation at N = 2
  EXPECT_DOUBLE_EQ(A2a(req, deepep), deepep_default);
  std::vector<double> t;
  for (double D : {2.0, 1.5, 1.0}) {
    req.expert_nodes_per_token = D;
    t.push_back(A2a(req, deepep));
    EXPECT_DOUBLE_EQ(A2a(req, nccl), nccl_default) << D;
  }
  EXPECT_GT(t[0], t[1]);
  EXPECT_GT(t[1], t[2]);
  EXPECT_NEAR((t[0] - t[1]) / (t[1] - t[2]), 1.0, 1e-9);
  // max_route_nodes = 1 is D = 1.
  req.expert_nodes_per_token = 0;
  req.max_route_nodes = 1;
  EXPECT_DOUBLE_EQ(A2a(req, deepep), t[2]);
  // The term says the split when routing is given.
  auto e = EvaluatePlan(req, deepep);
  ASSERT_TRUE(e.ok());
  EXPECT_NE(Term(*e, "comm.ep_a2a")->formula.find("deepep, 1 nodes/token of 2: slow tier 0.5 copies"),
            std::string::npos)
      << Term(*e, "comm.ep_a2a")->formula;
}

// Bad values: BadInput naming the field and the value (PlanRequest::Validate and the layout file).
// Each case passes once its value is made valid (0.5 -> 1.5, 9 -> 8, -1 -> 1, nccl -> deepep).
TEST(EpA2aTraffic, BadRoutingInputsNameFieldAndValue) {
  struct Case {
    double nodes;
    int64_t route;
    const char* want_field;
    const char* want_value;
  } cases[] = {
      {0.5, 0, "expert_nodes_per_token", "0.5"},
      {9, 0, "expert_nodes_per_token", "top_k=8"},
      {-1, 0, "expert_nodes_per_token", "-1"},
      {std::numeric_limits<double>::quiet_NaN(), 0, "expert_nodes_per_token", "nan"},
      {0, -1, "max_route_nodes", "-1"},
      {0, kMaxRouteNodes + 1, "max_route_nodes", "65537"},
  };
  for (const Case& c : cases) {
    PlanRequest req = TwoNodeRequest();
    req.expert_nodes_per_token = c.nodes;
    req.max_route_nodes = c.route;
    const Status s = req.Validate();
    ASSERT_EQ(s.code(), ErrorCode::kBadInput) << c.want_field << " " << c.want_value;
    EXPECT_NE(s.message().find(c.want_field), std::string::npos) << s.message();
    EXPECT_NE(s.message().find(c.want_value), std::string::npos) << s.message();
  }
  PlanRequest ok = TwoNodeRequest();
  ok.expert_nodes_per_token = 8;
  ok.max_route_nodes = 1;
  EXPECT_TRUE(ok.Validate().ok()) << ok.Validate().ToString();
  // A dense model takes no nodes per token.
  auto dense =
      ModelFromDims(R"({"hidden":256,"ffn":1024,"heads":4,"layers":2,"vocab":1000,"gated":true})", "dense");
  ASSERT_TRUE(dense.ok());
  ok.model = *dense;
  ok.max_route_nodes = 0;
  ok.expert_nodes_per_token = 2;
  EXPECT_EQ(ok.Validate().code(), ErrorCode::kBadInput);
  // The layout file (a): read into the request, or refused naming the field.
  const std::string base = R"({"tp":1,"pp":1,"dp":8,"ep":8,"micro_batch":1,"global_batch":8)";
  auto good = ParseLayoutJson(
      base + R"(,"expert_nodes_per_token":1.5,"max_route_nodes":2,"ep_dispatcher":"deepep"})", "layout.json");
  ASSERT_TRUE(good.ok()) << good.status().ToString();
  PlanRequest from_file;
  ApplyRunOptions(good->front(), &from_file);
  EXPECT_EQ(from_file.expert_nodes_per_token, 1.5);
  EXPECT_EQ(from_file.max_route_nodes, 2);
  EXPECT_EQ(good->front().plan.ep_dispatcher, EpDispatcher::kDeepEP);
  for (const auto& [extra, want] : std::vector<std::pair<std::string, std::string>>{
           {R"(,"expert_nodes_per_token":0.5})", "expert_nodes_per_token"},
           {R"(,"max_route_nodes":-1})", "max_route_nodes"},
           {R"(,"ep_dispatcher":"nccl"})", "ep_dispatcher"}}) {
    auto r = ParseLayoutJson(base + extra, "layout.json");
    ASSERT_FALSE(r.ok()) << extra;
    EXPECT_EQ(r.status().code(), ErrorCode::kBadInput);
    EXPECT_NE(r.status().message().find("layout.json"), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find(want), std::string::npos) << r.status().message();
  }
}

// SearchPlans builds its candidates with the request's dispatcher.
TEST(EpA2aTraffic, SearchUsesTheRequestsDispatcher) {
  PlanRequest req = TwoNodeRequest();
  req.ep_dispatcher = EpDispatcher::kDeepEP;
  req.constraints.ep = 16;
  req.constraints.pp = 8;
  req.top_n = 0;
  req.threads = 1;
  auto r = SearchPlans(req);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->best.plan.ep_dispatcher, EpDispatcher::kDeepEP);
}

}  // namespace
}  // namespace onboard
