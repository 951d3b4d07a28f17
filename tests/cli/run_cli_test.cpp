// `onboard run` end to end through the binary: issue 18's expert-routing flags reach the plan the
// loop builds (its plan.json), and bad values exit 2 naming the flag or field and the value.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "onboard_runner.h"

namespace {

using onboard::clitest::CliRun;
using onboard::clitest::RunOnboard;

const std::string kModel = std::string(ONBOARD_TEST_DATA) + "/hf/qwen3-30b-a3b.config.json";
const std::string kTopo = std::string(ONBOARD_SOURCE_DIR) + "/examples/topologies/b200-32x8.json";

// The run's best plan (plan.json under `out`), or null when it is missing.
nlohmann::json BestPlan(const std::string& out) {
  std::ifstream in(out + "/plan.json");
  std::ostringstream ss;
  ss << in.rdbuf();
  const nlohmann::json j = nlohmann::json::parse(ss.str(), nullptr, false);
  return j.is_object() && j.contains("best") ? j["best"] : nlohmann::json();
}

std::string A2aFormula(const nlohmann::json& best) {
  for (const auto& t : best.at("estimate").at("time_terms"))
    if (t.value("name", "") == "comm.ep_a2a") return t.value("formula", "");
  return "";
}

// --ep-dispatcher, --expert-nodes-per-token and --max-route-nodes reach the PlanRequest the loop
// builds (agent StagePlan): the best plan's comm.ep_a2a term names the dispatcher and the nodes per
// token it used (the split is printed only when routing is given), and the dispatcher changes the
// step time, as `onboard plan --ep-dispatcher` does (PlanCli test). Unwired, the deepep run reads
// "alltoall" or has no split text, and the max-route-nodes run has no split text.
TEST(RunCli, ExpertRoutingFlagsReachThePlanAndBadValuesExit2) {
  const std::string dir = ::testing::TempDir() + "run_cli_routing";
  const std::string base = "run " + kModel + " --topology " + kTopo + " --mode full --no-probe --no-kernels";
  const CliRun a2a = RunOnboard(base + " --out " + dir + "/a2a");
  ASSERT_EQ(a2a.code, 0) << a2a.out;
  const CliRun deepep =
      RunOnboard(base + " --ep-dispatcher deepep --expert-nodes-per-token 1.5 --out " + dir + "/deepep");
  ASSERT_EQ(deepep.code, 0) << deepep.out;
  const CliRun limited = RunOnboard(base + " --max-route-nodes 1 --out " + dir + "/limited");
  ASSERT_EQ(limited.code, 0) << limited.out;
  const nlohmann::json p_a2a = BestPlan(dir + "/a2a"), p_deepep = BestPlan(dir + "/deepep"),
                       p_limited = BestPlan(dir + "/limited");
  ASSERT_TRUE(p_a2a.is_object() && p_deepep.is_object() && p_limited.is_object());
  EXPECT_NE(p_a2a["estimate"]["step_s"].get<double>(), p_deepep["estimate"]["step_s"].get<double>());
  EXPECT_EQ(A2aFormula(p_a2a).find("nodes/token"), std::string::npos) << A2aFormula(p_a2a);
  // The split text appears only when routing reached the request (EpTierSplitText), naming the
  // dispatcher; the measured 1.5 is capped by the nodes the best plan's EP group spans (one when the
  // search keeps EP inside a node, as it has since ring collectives across nodes use every NIC).
  const std::string f = A2aFormula(p_deepep);
  EXPECT_NE(f.find("; deepep, "), std::string::npos) << f;
  EXPECT_TRUE(f.find("; deepep, 1.5 nodes/token of ") != std::string::npos ||
              f.find("; deepep, 1 nodes/token of 1:") != std::string::npos)
      << f;
  EXPECT_NE(A2aFormula(p_limited).find("; alltoall, 1 nodes/token of "), std::string::npos)
      << A2aFormula(p_limited);
  // Bad values: exit 2 before any stage, naming the flag or field and the value. top_k = 9 passes the
  // model-free check and is refused by the plan's own (the model's top_k is 8).
  for (const auto& [flag, want] : std::vector<std::pair<std::string, std::vector<std::string>>>{
           {"--ep-dispatcher nccl", {"--ep-dispatcher", "nccl"}},
           {"--expert-nodes-per-token 0.5", {"expert_nodes_per_token", "0.5"}},
           {"--expert-nodes-per-token 9", {"expert_nodes_per_token", "top_k=8", "9"}},
           {"--max-route-nodes -1", {"max_route_nodes", "-1"}},
           // bf16 first / last layers need a quantised --compute-dtype (core/plan.cpp CheckBf16Layers).
           {"--bf16-layers-last 1", {"field 'bf16_layers'", "quantised compute_dtype", "0,1"}},
           {"--probe-ranks 4 --probe-ranks-per-node 3", {"ranks_per_node", "3"}},
           // Probe-round flags beside --no-probe would be ignored: refused instead.
           {"--no-probe --probe-steps 5", {"--probe-steps excludes --no-probe"}},
           {"--no-probe --max-rounds 2", {"--max-rounds excludes --no-probe"}}}) {
    std::string probed = base;  // the probe-ranks case needs the probes on to reach their check
    probed.erase(probed.find(" --no-probe"), std::string(" --no-probe").size());
    const CliRun r = RunOnboard(probed + " " + flag + " --out " + dir + "/bad");
    EXPECT_EQ(r.code, 2) << flag << ": " << r.out;
    for (const std::string& w : want) EXPECT_NE(r.out.find(w), std::string::npos) << flag << ": " << r.out;
  }
}

// --compute-dtype reaches the PlanRequest the loop builds: the best plan carries it and costs it (mxfp8
// on B200 steps faster than bf16), and nvfp4 on a device without fp4 tensor cores stops the plan stage
// with exit 2 naming the topology's device.tflops_fp4. Unwired, both runs plan bf16 and the H200 run
// exits 0.
TEST(RunCli, ComputeDtypeReachesThePlanAndTheDeviceMustHaveIt) {
  const std::string dir = ::testing::TempDir() + "run_cli_compute";
  const std::string base = "run " + kModel + " --topology " + kTopo + " --mode full --no-probe --no-kernels";
  const CliRun bf = RunOnboard(base + " --out " + dir + "/bf16");
  ASSERT_EQ(bf.code, 0) << bf.out;
  const CliRun mx = RunOnboard(base + " --compute-dtype mxfp8 --out " + dir + "/mxfp8");
  ASSERT_EQ(mx.code, 0) << mx.out;
  const nlohmann::json p_bf = BestPlan(dir + "/bf16"), p_mx = BestPlan(dir + "/mxfp8");
  ASSERT_TRUE(p_bf.is_object() && p_mx.is_object());
  EXPECT_EQ(p_bf["plan"]["compute_dtype"], "bf16");
  EXPECT_EQ(p_mx["plan"]["compute_dtype"], "mxfp8");
  EXPECT_LT(p_mx["estimate"]["step_s"].get<double>(), p_bf["estimate"]["step_s"].get<double>());
  // --bf16-layers-last reaches the same PlanRequest: the best plan carries it and pays for it.
  const CliRun ends = RunOnboard(base + " --compute-dtype mxfp8 --bf16-layers-last 1 --out " + dir + "/ends");
  ASSERT_EQ(ends.code, 0) << ends.out;
  const nlohmann::json p_ends = BestPlan(dir + "/ends");
  ASSERT_TRUE(p_ends.is_object());
  EXPECT_EQ(p_ends["plan"].value("bf16_layers_last", 0), 1) << p_ends.dump().substr(0, 800);
  EXPECT_EQ(p_mx["plan"].value("bf16_layers_last", 0), 0);
  const std::string h200 = std::string(ONBOARD_SOURCE_DIR) + "/examples/topologies/h200-16x8.json";
  const CliRun f4 =
      RunOnboard("run " + kModel + " --topology " + h200 +
                 " --mode full --no-probe --no-kernels --compute-dtype nvfp4 --out " + dir + "/f4");
  EXPECT_EQ(f4.code, 2) << f4.out;
  EXPECT_NE(f4.out.find("device.tflops_fp4"), std::string::npos) << f4.out;
}

}  // namespace
