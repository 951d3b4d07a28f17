// FusionsSection: the report's fusion plan follows the final plan's GEMM input precision. An fp8,
// mxfp8 or nvfp4 plan fuses each norm with its quantise step; a bf16 plan (and a run with no plan) keeps the
// norm in the next GEMM's prologue.
#include <gtest/gtest.h>

#include "agent/report_fusions.h"
#include "parsers/load_model.h"

namespace onboard::agent {
namespace {

RunState StateWithPlan(std::optional<Precision> compute) {
  RunState st;
  st.req.model_path = std::string(ONBOARD_TEST_DATA) + "/agent/tiny_kimi.config.json";
  st.req.seq = 1024;
  Expected<ModelIR> m = LoadModel(st.req.model_path);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  if (m.ok()) st.model = *m;
  if (compute) {
    PlanRound pr;
    pr.request.attention_kernel = "unfused";  // no cost-model value: this test is about the plan
    pr.search.best.plan.compute_dtype = *compute;
    st.plans.push_back(pr);
  }
  return st;
}

bool HasNormQuantize(const nlohmann::json& j) { return j.dump().find("norm+quantise") != std::string::npos; }

TEST(ReportFusions, QuantisedPlansFuseEachNormWithItsQuantiseAndBf16PlansDoNot) {
  EXPECT_FALSE(HasNormQuantize(FusionsSection(StateWithPlan(std::nullopt))));
  EXPECT_FALSE(HasNormQuantize(FusionsSection(StateWithPlan(Precision::kBF16))));
  EXPECT_TRUE(HasNormQuantize(FusionsSection(StateWithPlan(Precision::kFP8))));
  EXPECT_TRUE(HasNormQuantize(FusionsSection(StateWithPlan(Precision::kMXFP8))));
  EXPECT_TRUE(HasNormQuantize(FusionsSection(StateWithPlan(Precision::kNVFP4))));
}

}  // namespace
}  // namespace onboard::agent
