// The plan's enum names (core/plan.h): FinetuneMode and Recompute each have one printer and one
// parser; an unknown spelling is one kBadInput line naming origin, field and value (exit 2).
#include <gtest/gtest.h>

#include "core/plan.h"

namespace onboard {
namespace {

TEST(PlanNames, ModesAndRecomputePoliciesRoundTrip) {
  for (FinetuneMode m : {FinetuneMode::kFull, FinetuneMode::kLoRA})
    EXPECT_EQ(*ParseFinetuneMode("t", "mode", FinetuneModeName(m)), m);
  for (Recompute r : {Recompute::kNone, Recompute::kSelective, Recompute::kFull})
    EXPECT_EQ(*ParseRecompute("t", "recompute", RecomputeName(r)), r);
  EXPECT_STREQ(FinetuneModeName(FinetuneMode::kLoRA), "lora");
  EXPECT_STREQ(RecomputeName(Recompute::kSelective), "selective");
}

TEST(PlanNames, UnknownSpellingIsOneLineNamingOriginFieldAndValue) {
  const Expected<FinetuneMode> m = ParseFinetuneMode("plan.json", "best.plan.mode", "LoRA");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(ExitCodeFor(m.status().code()), 2);
  EXPECT_EQ(m.status().message(), "plan.json: field 'best.plan.mode': must be full or lora (got LoRA)");
  const Expected<Recompute> r = ParseRecompute("--recompute", "recompute.MoE", "some");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "--recompute: field 'recompute.MoE': must be none, selective or full (got some)");
}

}  // namespace
}  // namespace onboard
