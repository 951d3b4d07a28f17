// `onboard probe MODEL --plan plan.json --ranks N`: the plan goes through ApplyPlanToProbe (each
// factor printed with what the probe runs); a bad plan file or --recompute list is one line
// naming the file / flag and field, exit 2, before any worker starts.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "tests/cli/onboard_runner.h"

namespace onboard {
namespace {

using clitest::RunOnboard;

const std::string kModel = std::string(ONBOARD_SOURCE_DIR) + "/tests/data/hf/flagship.config.json";
const std::string kPlan = std::string(ONBOARD_SOURCE_DIR) + "/tests/data/plans/seed_lora_atlas128.json";

std::string TempFile(const std::string& name, const std::string& text) {
  const std::string path = "/tmp/onboard-probe-plan-" + std::to_string(getpid()) + "-" + name;
  std::ofstream(path) << text;
  return path;
}

TEST(ProbePlanCli, BadPlanFileExits2NamingFileAndField) {
  auto r = RunOnboard("probe " + kModel + " --plan /nonexistent/plan.json --ranks 2");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("/nonexistent/plan.json"), std::string::npos) << r.out;
  const std::string bad =
      TempFile("bad.json", R"({"best":{"plan":{"dp_replicate":1,"dp_shard":2,"tp":"4"}}})");
  r = RunOnboard("probe " + kModel + " --plan " + bad + " --ranks 2");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find(bad), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("best.plan.tp"), std::string::npos) << r.out;
  r = RunOnboard("probe " + kModel + " --ranks 2 --recompute MoE=sometimes");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("recompute.MoE"), std::string::npos) << r.out;
  r = RunOnboard("probe " + kModel + " --ranks 2 --recompute attention=full");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("attention"), std::string::npos) << r.out;
}

TEST(ProbePlanCli, PlanScaledToTheRanksAndRun) {
  const std::string out = "/tmp/onboard-probe-plan-" + std::to_string(getpid()) + "-run";
  auto r = RunOnboard("probe " + kModel + " --plan " + kPlan +
                          " --ranks 2 --steps 3 --batch 8 --seq 16 --mode full --out " + out,
                      clitest::Capture::kStdout);
  EXPECT_TRUE(r.code == 0 || r.code == 7) << r.out;  // 3 steps: it runs, it need not converge
  EXPECT_NE(r.out.find("-> probe on 2 ranks"), std::string::npos) << r.out;
  // 2 ranks: the plan's tp=4 runs as tp=2, which leaves one data-parallel rank, so ep=1, said.
  EXPECT_NE(r.out.find("tp: plan 4 -> probe 2"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ep: plan 128 -> probe 1 (no ep >= 2 divides"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("recompute: plan none -> probe *=none,DSA=none,KDA=none,MLP=none,MoE=none"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("per collective"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("live-tensor peak per rank"), std::string::npos) << r.out;
}

// Issue 10: the plan file's precisions go through the one parser (core/precision.h): an unknown
// one exits 2 naming the file, the field's JSON path and the value, before any worker starts.
TEST(ProbePlanCli, UnknownPrecisionInThePlanExits2NamingFileAndField) {
  const std::string bad = TempFile(
      "fp7.json", R"({"best":{"plan":{"dp_replicate":1,"dp_shard":2,"tp":1,"pp":1,"ep":2,"micro_batch":1,)"
                  R"("num_micro_batches":2,"compute_dtype":"fp7"}}})");
  auto r = RunOnboard("probe " + kModel + " --plan " + bad + " --ranks 2");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find(bad + ": field 'best.plan.compute_dtype'"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("fp7"), std::string::npos) << r.out;
}

// Issue 10: the probe's own dtype is parsed once (core/float_dtype.h), at the flag: an unknown one
// exits 2 with one line naming the flag and the value, before any worker starts; so does verify's.
TEST(ProbePlanCli, UnknownProbeDtypeExits2NamingTheFlag) {
  auto r = RunOnboard("probe " + kModel + " --ranks 2 --dtype fp16");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--dtype: field 'dtype': must be fp32 or fp64"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(got fp16)"), std::string::npos) << r.out;
  r = RunOnboard("verify " + std::string(ONBOARD_SOURCE_DIR) +
                 "/tests/data/hf --input-ids x.json "
                 "--logits-out /dev/null --dtype bf16");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--dtype: field 'dtype': must be fp32 or fp64"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace onboard
