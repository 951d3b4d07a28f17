// PlanConstraints::recompute (typed: nullopt = searched, else one policy for every block kind): the
// search gives every kind the forced policy, or the nearest level the kind has (selective on a kind
// without a selective level -> none). The agent's memory rule forces kFull this way.
#include "search_test_util.h"

namespace onboard {
namespace {

Plan BestPlan(const PlanRequest& req) {
  Expected<SearchResult> r = SearchPlans(req);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (!r.ok()) return Plan{};
  std::printf("  %s\n", PlanSummary(r->best.plan).c_str());
  return r->best.plan;
}

TEST(RecomputeConstraint, ForcedPolicyReachesEveryBlockKind) {
  PlanRequest req = test::SeedRequest(FinetuneMode::kLoRA);
  ASSERT_FALSE(req.constraints.recompute.has_value());  // searched by default
  const Plan searched = BestPlan(req);
  ASSERT_FALSE(searched.recompute.empty());
  bool all_full = true;
  for (const auto& [kind, r] : searched.recompute) all_full = all_full && r == Recompute::kFull;
  ASSERT_FALSE(all_full) << "the searched plan must differ from the forced one for this check to bite";

  req.constraints.recompute = Recompute::kFull;
  const Plan full = BestPlan(req);
  ASSERT_EQ(full.recompute.size(), searched.recompute.size());
  for (const auto& [kind, r] : full.recompute) EXPECT_EQ(r, Recompute::kFull) << kind;

  req.constraints.recompute = Recompute::kSelective;
  const Plan selective = BestPlan(req);
  ASSERT_EQ(selective.recompute.size(), searched.recompute.size());
  bool any_selective = false;
  for (const auto& [kind, r] : selective.recompute) {
    EXPECT_NE(r, Recompute::kFull) << kind;  // a kind without a selective level gets none
    any_selective = any_selective || r == Recompute::kSelective;
  }
  EXPECT_TRUE(any_selective);  // the flagship's KDA and DSA have a selective level
}

}  // namespace
}  // namespace onboard
