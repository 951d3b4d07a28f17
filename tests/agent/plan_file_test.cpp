// LoadPlanFile reads the plan of `onboard plan --json` (the search result's best plan, as in
// tests/data/plans/) and refuses a bad one with the file and the field's JSON path.
#include <gtest/gtest.h>

#include "agent/plan_file.h"
#include "agent/plan_to_probe.h"
#include "search/plan_request_checks.h"
#include "search/planner.h"

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

// Issue 10: the plan's precisions are typed (core/precision.h): mxfp8 stays mxfp8, an unknown name
// is refused naming the file, the field's path and the value.
TEST(PlanFile, PrecisionsAreReadTypedAndAnUnknownOneIsNamed) {
  const std::string ok =
      R"("dp_replicate":1,"dp_shard":2,"tp":1,"pp":1,"ep":2,"micro_batch":1,"num_micro_batches":2)";
  Expected<Plan> p =
      ParsePlanJson(R"({"plan":{)" + ok +
                        R"(,"compute_dtype":"mxfp8","base_dtype":"mxfp4","optimizer_dtype":"bf16",)"
                        R"("grad_dtype":"bf16"}})",
                    "plan.json");
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->compute_dtype, Precision::kMXFP8);
  EXPECT_EQ(p->base_dtype, Precision::kMXFP4);
  EXPECT_EQ(p->optimizer_dtype, Precision::kBF16);
  EXPECT_EQ(p->grad_dtype, Precision::kBF16);
  Expected<Plan> seed = LoadPlanFile(kSeedPlan);  // `onboard plan --json` output reads back
  ASSERT_TRUE(seed.ok()) << seed.status().message();
  EXPECT_EQ(seed->base_dtype, Precision::kBF16);
  std::string m = Refusal(R"({"plan":{)" + ok + R"(,"compute_dtype":"fp7"}})");
  EXPECT_NE(m.find("plan.json: field 'plan.compute_dtype'"), std::string::npos) << m;
  EXPECT_NE(m.find("fp7"), std::string::npos) << m;
  m = Refusal(R"({"plan":{)" + ok + R"(,"base_dtype":"mxfp8"}})");  // a compute recipe, not a base
  EXPECT_NE(m.find("plan.base_dtype"), std::string::npos) << m;
  m = Refusal(R"({"plan":{)" + ok + R"(,"grad_dtype":8}})");
  EXPECT_NE(m.find("plan.grad_dtype"), std::string::npos) << m;
}

// fsdp_pipelining (core/plan.h) is written by `onboard plan --json` (EstimateToJson) only when it is
// per_step and reads back; an unknown value is refused naming the field.
TEST(PlanFile, FsdpPipeliningRoundTripsAndAnUnknownOneIsNamed) {
  Plan p;
  p.deg.dp_shard = 4;
  p.deg.pp = 2;
  p.num_micro_batches = 4;
  p.fsdp_pipelining = FsdpPipelining::kPerStep;
  const std::string text = EstimateToJson(p, PlanEstimate{});
  EXPECT_NE(text.find(R"("fsdp_pipelining")"), std::string::npos) << text;
  Expected<Plan> back = ParsePlanJson(text, "plan.json");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->fsdp_pipelining, FsdpPipelining::kPerStep);
  p.fsdp_pipelining = FsdpPipelining::kPerMicroBatch;  // the default is not written
  EXPECT_EQ(EstimateToJson(p, PlanEstimate{}).find("fsdp_pipelining"), std::string::npos);
  const std::string m = Refusal(
      R"({"plan":{"dp_replicate":1,"dp_shard":2,"tp":1,"pp":2,"ep":1,"micro_batch":1,"num_micro_batches":2,)"
      R"("fsdp_pipelining":"sometimes"}})");
  EXPECT_NE(m.find("plan.fsdp_pipelining"), std::string::npos) << m;
  EXPECT_NE(m.find("sometimes"), std::string::npos) << m;
}

// Issue 10 item 3: a plan file takes the plan request's limits (search/plan_request_checks.h), not
// its own: lora_rank 5000 (refused at 4096 before) reads; one past each limit is refused.
TEST(PlanFile, LimitsAreThePlanRequestsOwn) {
  const std::string ok =
      R"("dp_replicate":1,"dp_shard":2,"tp":1,"pp":1,"ep":2,"micro_batch":1,"num_micro_batches":2)";
  auto with = [&](const std::string& kv) { return ParsePlanJson("{" + ok + "," + kv + "}", "plan.json"); };
  EXPECT_TRUE(with(R"("mode":"lora","lora_rank":5000)").ok());
  EXPECT_TRUE(with(R"("lora_rank":)" + std::to_string(kMaxLoraRank)).ok());
  EXPECT_FALSE(with(R"("lora_rank":)" + std::to_string(kMaxLoraRank + 1)).ok());
  EXPECT_TRUE(with(R"("global_batch":)" + std::to_string(kMaxGlobalBatch)).ok());
  EXPECT_FALSE(with(R"("global_batch":)" + std::to_string(kMaxGlobalBatch + 1)).ok());
  EXPECT_TRUE(with(R"("seq":)" + std::to_string(kMaxSeq)).ok());
  EXPECT_FALSE(with(R"("seq":)" + std::to_string(kMaxSeq + 1)).ok());
}

}  // namespace
}  // namespace onboard::agent
