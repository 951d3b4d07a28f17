// LoadPlanFile reads the plan of `onboard plan --json` (the search result's best plan, as in
// tests/data/plans/) and refuses a bad one with the file and the field's JSON path.
#include <gtest/gtest.h>

#include "agent/plan_file.h"
#include "agent/plan_to_probe.h"

namespace onboard::agent {
namespace {

const std::string kSeedPlan = std::string(ONBOARD_SOURCE_DIR) + "/tests/data/plans/seed_lora_atlas128.json";

TEST(PlanFile, ReadsTheSearchResultsBestPlan) {
  Expected<Plan> p = LoadPlanFile(kSeedPlan);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->deg.tp, 4);
  EXPECT_EQ(p->deg.dp_shard, 32);
  EXPECT_EQ(p->deg.ep, 128);
  EXPECT_EQ(p->num_micro_batches, 32);
  EXPECT_TRUE(p->deg.sequence_parallel);
  EXPECT_EQ(p->mode, FinetuneMode::kLoRA);
  EXPECT_EQ(p->recompute.at("KDA"), Recompute::kNone);
  // Scaled to 4 ranks (the issue's example): tp=2 x ep=2 of the proxy's 8 experts, recompute kept.
  Expected<ProbeLayout> L = ApplyPlanToProbe(*p, 4, 8, 8);
  ASSERT_TRUE(L.ok());
  EXPECT_EQ(L->tp, 2);
  EXPECT_EQ(L->ep, 2);
  EXPECT_EQ(L->recompute.at("KDA"), Recompute::kNone);
}

std::string Refusal(const std::string& text) {
  Expected<Plan> p = ParsePlanJson(text, "plan.json");
  EXPECT_FALSE(p.ok()) << text;
  return p.ok() ? "" : p.status().message();
}

TEST(PlanFile, BadPlansNameFileAndField) {
  const std::string ok =
      R"("dp_replicate":1,"dp_shard":2,"tp":1,"pp":1,"micro_batch":1,"num_micro_batches":2)";
  EXPECT_TRUE(ParsePlanJson("{" + ok + R"(,"ep":2})", "plan.json").ok());
  std::string m = Refusal("{" + ok + "}");  // ep missing
  EXPECT_NE(m.find("plan.json"), std::string::npos) << m;
  EXPECT_NE(m.find("ep"), std::string::npos) << m;
  m = Refusal(R"({"best":{"plan":{)" + ok + R"(,"ep":"2"}}})");
  EXPECT_NE(m.find("best.plan.ep"), std::string::npos) << m;
  m = Refusal(R"({"plan":{)" + ok + R"(,"ep":2,"recompute":{"MoE":"some"}}})");
  EXPECT_NE(m.find("plan.recompute.MoE"), std::string::npos) << m;
  EXPECT_NE(m.find("some"), std::string::npos) << m;
  m = Refusal("{" + ok + R"(,"ep":0})");
  EXPECT_NE(m.find("must be in [1"), std::string::npos) << m;
  m = Refusal("[1, 2]");
  EXPECT_NE(m.find("must be a JSON object"), std::string::npos) << m;
  m = Refusal("{not json");
  EXPECT_NE(m.find("not JSON"), std::string::npos) << m;
  EXPECT_FALSE(LoadPlanFile("/nonexistent/plan.json").ok());
}

}  // namespace
}  // namespace onboard::agent
