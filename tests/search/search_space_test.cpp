// Expert tensor parallelism and the DualPipe schedule in the layout search (issue 13): the search
// picks each where the cost model says it pays, keeps etp = 1 / 1F1B where it does not, and never
// offers DualPipe where ValidatePlan refuses it. etp is searched by default, DualPipe with
// constraints.schedule = "any" (the default "1f1b" keeps plans the exported engines can run). Each
// "pays" is checked against the search with the option taken away (etp = 1, schedule "1f1b"), each
// "does not" against the search forced to use it.
#include <set>

#include "search/cost_model.h"
#include "search/plan_export.h"
#include "search_test_util.h"

namespace onboard {
namespace {

PlanRequest Full(const std::string& model, int64_t devices, int64_t gb) {
  PlanRequest req;
  req.model = test::HfModel(model);
  req.topology = ResizeTopology(test::ShippedTopology("h800-2048-deepseek-v3"), devices);
  req.mode = FinetuneMode::kFull;
  req.seq = 4096;
  req.global_batch = gb;
  req.compute_dtype = Precision::kFP8;
  return req;
}

SearchResult Search(const PlanRequest& req) {
  auto r = SearchPlans(req);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : SearchResult{};
}

// The search as asked (first) and with `other` constraints (second); prints both bests.
std::pair<SearchResult, SearchResult> SearchBoth(const PlanRequest& req, const PlanConstraints& other) {
  PlanRequest o = req;
  o.constraints = other;
  std::pair<SearchResult, SearchResult> r{Search(req), Search(o)};
  for (const SearchResult* x : {&r.first, &r.second})
    std::printf("  %s: %s, %.3f s\n", x->feasible ? "fits" : "nothing fits",
                PlanSummary(x->best.plan).c_str(), x->best.estimate.step_s);
  return r;
}

bool AnyDualPipe(const SearchResult& r) {
  if (r.best.plan.pipeline_schedule == PipelineSchedule::kDualPipe) return true;
  for (const auto* list : {&r.runners_up, &r.pareto})
    for (const PlanCandidate& c : *list)
      if (c.plan.pipeline_schedule == PipelineSchedule::kDualPipe) return true;
  return false;
}

// The example kept for a rejection reason ("" when the search rejected nothing for it).
std::string RejectExample(const SearchResult& r, const std::string& reason) {
  for (const RejectGroup& g : r.rejected)
    if (g.reason == reason) return g.example;
  return "";
}

// With etp searched the best plan has etp = `chosen`; fixed to `other` (the option taken away or
// forced) the search keeps `other` and is slower. Returns the searched result.
SearchResult ExpectEtpChoice(const PlanRequest& req, int64_t other, int64_t chosen) {
  PlanConstraints fixed = req.constraints;
  fixed.etp = other;
  const auto [r, f] = SearchBoth(req, fixed);
  EXPECT_TRUE(r.feasible && f.feasible);
  EXPECT_EQ(r.best.plan.deg.etp, chosen) << PlanSummary(r.best.plan);
  EXPECT_EQ(f.best.plan.deg.etp, other);
  EXPECT_GT(f.best.estimate.step_s, r.best.estimate.step_s);
  return r;
}

TEST(SearchSpace, ExpertTpIsChosenWhereItPays) {
  // Mixtral-8x22B (8 experts of 3 x 6144 x 16384) on 128 H800, tp 8 and ep 8 (= experts), no PP:
  // at etp = 1 every micro-batch all-gathers a rank's whole expert over 4+ ranks across InfiniBand;
  // etp = tp = 8 keeps 1/8 of each expert on a rank.
  // Under FSDP (zero 3): the distributed optimizer (zero 1) gathers no expert weights at all.
  PlanRequest req = Full("mixtral-8x22b-v0.1", 128, 512);
  req.constraints.tp = 8;
  req.constraints.pp = 1;
  req.constraints.ep = 8;
  req.constraints.zero_stage = 3;
  const SearchResult r = ExpectEtpChoice(req, /*other=*/1, /*chosen=*/8);
  ASSERT_TRUE(r.feasible);
  // The chosen plan itself at etp = 1 is slower too.
  Plan one = r.best.plan;
  one.deg.etp = 1;
  one.deg.expert_fsdp *= 8;
  auto e1 = EvaluatePlan(req, one);
  ASSERT_TRUE(e1.ok()) << e1.status().ToString();
  EXPECT_GT(e1->step_s, r.best.estimate.step_s);
}

TEST(SearchSpace, ExpertTpIsNotChosenWhereItDoesNot) {
  // Qwen3-30B-A3B: 128 small experts (768 wide) that EP spreads; the ETP gathers only cost.
  PlanRequest req = Full("qwen3-30b-a3b", 64, 512);
  req.constraints.tp = 2;
  ExpectEtpChoice(req, /*other=*/2, /*chosen=*/1);
  // gpt-oss-120b's experts are 2880 wide: etp = 128 is refused by the search, naming the width.
  PlanRequest oss = Full("gpt-oss-120b", 1024, 1024);
  oss.constraints.etp = 128;
  const SearchResult o = Search(oss);
  EXPECT_FALSE(o.feasible);
  EXPECT_EQ(RejectExample(o, "etp_width"), "etp=128 must divide the expert FFN width 2880");
}

TEST(SearchSpace, DualPipeIsChosenWhereItPays) {
  // Qwen3-30B-A3B on 256 H800 with pp 8: 1F1B pays (p-1)/v micro-batches of bubble and its sends,
  // DualPipe (p/2-1)(F&B + B - 3W) with the sends hidden.
  PlanRequest req = Full("qwen3-30b-a3b", 256, 1024);
  req.constraints.pp = 8;
  EXPECT_FALSE(AnyDualPipe(Search(req)));  // the default searches 1F1B only
  req.constraints.schedule = "any";
  PlanConstraints one_f_one_b = req.constraints;
  one_f_one_b.schedule = "1f1b";
  const auto [r, n] = SearchBoth(req, one_f_one_b);
  ASSERT_TRUE(r.feasible && n.feasible);
  EXPECT_EQ(r.best.plan.pipeline_schedule, PipelineSchedule::kDualPipe) << PlanSummary(r.best.plan);
  EXPECT_FALSE(AnyDualPipe(n));
  EXPECT_GT(n.best.estimate.step_s, r.best.estimate.step_s);
  // The engines the exports target cannot run it: their exports say so (the 1F1B plan's do not).
  for (const auto& [plan, refused] : {std::pair<Plan, bool>{r.best.plan, true}, {n.best.plan, false}}) {
    for (const ExportFile& f : BuildAllExports(plan, req.model)) {
      if (f.name == "plan.megatron.sh" || f.name == "plan_torchtitan.py" ||
          f.name == "plan_megatron_bridge.py") {
        EXPECT_EQ(f.text.find("DualPipe schedule") != std::string::npos, refused) << f.name;
      }
    }
  }
}

TEST(SearchSpace, DualPipeIsNotChosenWhereItDoesNotPayOrCannotRun) {
  // Llama-3.1-405B (dense) on 128 H800, tp 8 pp 8: DualPipe's second copy of the stage parameters
  // does not fit beside the activations, so 1F1B (interleaved) stays best.
  PlanRequest req = Full("llama-3.1-405b", 128, 256);
  req.constraints.tp = 8;
  req.constraints.pp = 8;
  req.constraints.schedule = "any";
  PlanConstraints dualpipe = req.constraints;
  dualpipe.schedule = "dualpipe";
  const auto [r, d] = SearchBoth(req, dualpipe);
  ASSERT_TRUE(r.feasible);
  EXPECT_EQ(r.best.plan.pipeline_schedule, PipelineSchedule::k1F1B) << PlanSummary(r.best.plan);
  EXPECT_TRUE(!d.feasible || d.best.estimate.step_s > r.best.estimate.step_s);
  // 64 sequences on dp 16 leave 4 micro-batches < 2 * pp: DualPipe is never offered.
  PlanRequest few = Full("qwen3-30b-a3b", 256, 64);
  few.constraints.pp = 16;
  few.constraints.micro_batch = 1;
  few.constraints.schedule = "any";
  const SearchResult s = Search(few);
  ASSERT_TRUE(s.feasible);
  EXPECT_FALSE(AnyDualPipe(s));
  few.constraints.schedule = "zb-v";
  auto bad = SearchPlans(few);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("constraints.schedule"), std::string::npos) << bad.status().message();
}

// The optimizer sharding is searched: FSDP (zero 3) and Megatron's distributed optimizer (zero 1).
// Llama-3.1-8B on 256 B200: the weights fit replicated, so zero 1 saves FSDP's per-micro-batch
// all-gathers and wins; Qwen3-235B-A22B on 64 B200: its replicated weights and grads (6 B per
// parameter on every rank) do not fit, so FSDP wins. A fixed constraints.zero_stage keeps one kind;
// 2 is refused.
TEST(SearchSpace, DistributedOptimizerIsSearchedBesideFsdp) {
  auto on_b200 = [](const std::string& model, int64_t devices) {
    PlanRequest req = test::HfRequestOn(model, "B200", devices);
    req.mode = FinetuneMode::kFull;
    req.global_batch = 1024;
    return req;
  };
  auto stages = [](const SearchResult& r) {
    std::set<int64_t> z = {r.best.plan.zero_stage};
    for (const PlanCandidate& c : r.runners_up) z.insert(c.plan.zero_stage);
    for (const PlanCandidate& c : r.pareto) z.insert(c.plan.zero_stage);
    return z;
  };
  // The best plan of `r` re-costed with the other optimizer sharding.
  auto other_sharding = [](const PlanRequest& req, const SearchResult& r, int64_t zero) {
    Plan q = r.best.plan;
    q.zero_stage = zero;
    auto e = EvaluatePlan(req, q);
    EXPECT_TRUE(e.ok()) << e.status().ToString();
    return e.ok() ? *e : PlanEstimate{};
  };
  PlanRequest small = on_b200("llama-3.1-8b", 256);
  const SearchResult s = Search(small);
  ASSERT_TRUE(s.feasible);
  EXPECT_EQ(s.best.plan.zero_stage, 1) << PlanSummary(s.best.plan);
  EXPECT_GT(other_sharding(small, s, 3).step_s, s.best.estimate.step_s);
  EXPECT_EQ(stages(s), (std::set<int64_t>{1, 3}));
  small.constraints.zero_stage = 3;
  EXPECT_EQ(stages(Search(small)), std::set<int64_t>{3});
  small.constraints.zero_stage = 1;
  EXPECT_EQ(stages(Search(small)), std::set<int64_t>{1});

  PlanRequest big = on_b200("qwen3-235b-a22b", 64);
  const SearchResult b = Search(big);
  ASSERT_TRUE(b.feasible);
  EXPECT_EQ(b.best.plan.zero_stage, 3) << PlanSummary(b.best.plan);
  const PlanEstimate replicated = other_sharding(big, b, 1);
  EXPECT_FALSE(replicated.fits) << replicated.memory.total / 1073741824.0;

  big.constraints.zero_stage = 2;
  auto bad = SearchPlans(big);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("constraints.zero_stage"), std::string::npos)
      << bad.status().message();
}

}  // namespace
}  // namespace onboard
