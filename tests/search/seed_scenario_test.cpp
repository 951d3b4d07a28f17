// The seed scenario: LoRA on the flagship across 128 Atlas 950 devices fits with EP >= 32 and an
// explained EP/FSDP split; full fine-tuning on the same 128 is infeasible with the arithmetic shown,
// and the smallest fitting device count of the family is found. The LoRA result is compared with a
// golden JSON (regenerate only with ONBOARD_REGEN_GOLDEN=1).
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "search/planner.h"
#include "search_test_util.h"

namespace onboard {
namespace {

const std::string kGolden = std::string(ONBOARD_TEST_DATA) + "/plans/seed_lora_atlas128.json";

bool Mentions(const std::vector<std::string>& lines, const std::string& what) {
  for (const auto& l : lines)
    if (l.find(what) != std::string::npos) return true;
  return false;
}

TEST(SeedScenario, LoraFitsWithLargeEpAndExplainsIt) {
  const PlanRequest req = test::SeedRequest(FinetuneMode::kLoRA);
  auto r = SearchPlans(req);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r->feasible);
  const Plan& p = r->best.plan;
  EXPECT_GE(p.deg.ep, 32);
  EXPECT_EQ(p.deg.world(), 128);
  EXPECT_EQ(896 % p.deg.ep, 0);
  EXPECT_TRUE(r->best.estimate.fits);
  EXPECT_LE(r->best.estimate.memory.total, r->best.estimate.memory.usable());
  EXPECT_TRUE(Mentions(r->explanation, "experts per rank")) << FormatSearchResult(req, *r);
  EXPECT_TRUE(Mentions(r->explanation, "a2a moves"));
  EXPECT_TRUE(Mentions(r->explanation, "expert weights per device"));
  EXPECT_FALSE(r->runners_up.empty());
  EXPECT_FALSE(r->pareto.empty());
  EXPECT_GT(r->candidates_evaluated, 100);
  // The Pareto front is sorted by memory with strictly falling step time.
  for (size_t i = 1; i < r->pareto.size(); ++i) {
    EXPECT_GE(r->pareto[i].estimate.memory.total, r->pareto[i - 1].estimate.memory.total);
    EXPECT_LT(r->pareto[i].estimate.step_s, r->pareto[i - 1].estimate.step_s);
  }
  // Time terms add up to the step time.
  double sum = 0;
  for (const auto& t : r->best.estimate.time_terms) sum += t.exposed_s;
  EXPECT_NEAR(sum, r->best.estimate.step_s, 1e-9 * sum);
}

TEST(SeedScenario, LoraPlanMatchesGoldenJson) {
  const PlanRequest req = test::SeedRequest(FinetuneMode::kLoRA);
  auto r = SearchPlans(req);
  ASSERT_TRUE(r.ok());
  const std::string got = SearchResultToJson(req, *r);
  const char* regen = std::getenv("ONBOARD_REGEN_GOLDEN");
  if (regen && std::string(regen) == "1") {
    std::ofstream(kGolden) << got << "\n";
    GTEST_SKIP() << "regenerated " << kGolden;
  }
  const std::string want = test::ReadText(kGolden);
  ASSERT_FALSE(want.empty()) << kGolden << " missing; run with ONBOARD_REGEN_GOLDEN=1 to create it";
  EXPECT_EQ(nlohmann::json::parse(got), nlohmann::json::parse(want))
      << "seed plan output changed; if intended, rerun with ONBOARD_REGEN_GOLDEN=1";
}

TEST(SeedScenario, FullFineTuningInfeasibleWithArithmeticAndSmallestSize) {
  PlanRequest req = test::SeedRequest(FinetuneMode::kFull);
  auto r = SearchPlans(req);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->feasible);
  EXPECT_FALSE(r->best.estimate.fits);
  EXPECT_GT(r->best.estimate.memory.total, r->best.estimate.memory.usable());
  EXPECT_TRUE(Mentions(r->explanation, "16 B per parameter")) << FormatSearchResult(req, *r);
  EXPECT_TRUE(Mentions(r->explanation, "GiB per device before activations"));
  ASSERT_FALSE(r->rejected.empty());
  EXPECT_EQ(r->rejected.front().reason, "memory");
  EXPECT_NE(r->rejected.front().example.find("needs"), std::string::npos);
  // Model states alone need 16 B x 2.8T / 128 > 144 GiB; the smallest fitting family size is larger.
  req.threads = 2;
  auto w = SmallestFittingWorld(req, 4096);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_GT(w->world, 128);
  EXPECT_LE(w->world, 512);
  EXPECT_TRUE(w->best.estimate.fits);
  EXPECT_EQ(w->best.plan.deg.world(), w->world);
}

}  // namespace
}  // namespace onboard
