// Table test: the cost model against every measured run in tests/data/published_runs.json
// (Korthikanti et al. 2022): step time and Figure-1 memory within 15%, and the searched plan for
// each run's model/cluster/batch predicted at least as fast as the published layout.
#include <cmath>

#include "search/layout_file.h"
#include "search/planner.h"
#include "search_test_util.h"

namespace onboard {
namespace {

constexpr double kGiB = 1073741824.0;
constexpr double kTol = 0.15;

TEST(PublishedRuns, StepTimeWithin15Percent) {
  const auto runs = test::PublishedRuns();
  ASSERT_EQ(runs.size(), 4u);
  for (const LayoutRun& run : runs) {
    ASSERT_TRUE(run.measured_step_s.has_value()) << run.id;
    auto est = EvaluatePlan(RequestForRun(run), run.plan);
    ASSERT_TRUE(est.ok()) << run.id << ": " << est.status().ToString();
    const double err = est->step_s / *run.measured_step_s - 1;
    EXPECT_LT(std::fabs(err), kTol) << run.id << " predicted " << est->step_s << " s, measured "
                                    << *run.measured_step_s << " s";
    EXPECT_TRUE(est->fits) << run.id;
  }
}

// Figure 1: params+grads+optimizer, activations without recompute (no SP), activations with
// sequence parallel + selective recompute, per GPU of the first pipeline stage.
TEST(PublishedRuns, Figure1MemoryWithin15Percent) {
  int checked = 0;
  for (const LayoutRun& run : test::PublishedRuns()) {
    if (!run.measured_memory || run.id.find("/seqsel") == std::string::npos) continue;
    const PlanRequest req = RequestForRun(run);
    Plan none = run.plan;
    none.deg.sequence_parallel = false;
    none.recompute = {{"*", Recompute::kNone}};
    Plan seqsel = run.plan;
    seqsel.deg.sequence_parallel = true;
    seqsel.recompute = {{"*", Recompute::kSelective}};
    auto a = EvaluatePlan(req, none);
    auto b = EvaluatePlan(req, seqsel);
    ASSERT_TRUE(a.ok() && b.ok()) << run.id;
    const MeasuredMemoryGiB& m = *run.measured_memory;
    const double states = (b->memory.weights + b->memory.grads + b->memory.optimizer) / kGiB;
    EXPECT_NEAR(states / m.params_grads_optimizer, 1.0, kTol) << run.id << " states " << states;
    EXPECT_NEAR(a->memory.activations / kGiB / m.activations_no_recompute, 1.0, kTol)
        << run.id << " activations(no recompute) " << a->memory.activations / kGiB;
    EXPECT_NEAR(b->memory.activations / kGiB / m.activations_seq_selective, 1.0, kTol)
        << run.id << " activations(seq+selective) " << b->memory.activations / kGiB;
    ++checked;
  }
  EXPECT_EQ(checked, 2);
}

TEST(PublishedRuns, SearchIsAtLeastAsFastAsPublishedLayout) {
  for (const LayoutRun& run : test::PublishedRuns()) {
    const PlanRequest req = RequestForRun(run);
    auto published = EvaluatePlan(req, run.plan);
    ASSERT_TRUE(published.ok()) << run.id;
    auto found = SearchPlans(req);
    ASSERT_TRUE(found.ok()) << run.id << ": " << found.status().ToString();
    ASSERT_TRUE(found->feasible) << run.id;
    EXPECT_LE(found->best.estimate.step_s, published->step_s * (1 + 1e-9))
        << run.id << ": searched " << PlanSummary(found->best.plan) << " " << found->best.estimate.step_s
        << " s vs published " << published->step_s << " s";
    EXPECT_EQ(found->best.plan.deg.world(), run.topology.num_devices);
  }
}

}  // namespace
}  // namespace onboard

namespace onboard {
namespace {

// Held-out runs (nothing in the model was set from them): Megatron-LM 2021 weak scaling, 39B-1T
// dense GPT on up to 3,072 A100s with TP x PP x DP and full recompute.
TEST(PublishedRuns, HeldOutMegatron2021WithinTolerance) {
  auto runs = LoadLayoutFile(std::string(ONBOARD_TEST_DATA) + "/megatron_2021_runs.json");
  ASSERT_TRUE(runs.ok()) << runs.status().ToString();
  ASSERT_EQ(runs->size(), 6u);
  for (const LayoutRun& run : *runs) {
    auto est = EvaluatePlan(RequestForRun(run), run.plan);
    ASSERT_TRUE(est.ok()) << run.id << ": " << est.status().ToString();
    EXPECT_NEAR(est->step_s / *run.measured_step_s, 1.0, 0.15) << run.id << " predicted " << est->step_s;
    EXPECT_TRUE(est->fits) << run.id;
  }
}

}  // namespace
}  // namespace onboard
