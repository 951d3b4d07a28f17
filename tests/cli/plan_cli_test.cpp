// `onboard plan` end to end through the binary: the seed scenario, --evaluate on published runs,
// exports, and bad topology / layout files (exit 2 with file, field and value).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "onboard_runner.h"

namespace {

using Result = onboard::clitest::CliRun;

Result Onboard(const std::string& args) { return onboard::clitest::RunOnboard(args); }

const std::string kFlagship = std::string(ONBOARD_TEST_DATA) + "/hf/flagship.config.json";
const std::string kTopo = std::string(ONBOARD_SOURCE_DIR) + "/examples/topologies/";

std::string Write(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path) << text;
  return path;
}

TEST(PlanCli, SeedLoraFitsAndExplainsEp) {
  const Result r = Onboard("plan " + kFlagship + " --topology " + kTopo + "atlas-950-superpod-128.json --mode lora --lora-rank 16");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("best plan:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("experts per rank"), std::string::npos);
  EXPECT_NE(r.out.find("memory per device (GiB)"), std::string::npos);
  EXPECT_NE(r.out.find("runners-up:"), std::string::npos);
  EXPECT_NE(r.out.find("rejected:"), std::string::npos);
}

TEST(PlanCli, FullFineTuningIsInfeasibleWithArithmetic) {
  const Result r = Onboard("plan " + kFlagship + " --topology " + kTopo + "atlas-950-superpod-128.json --mode full");
  EXPECT_EQ(r.code, 4) << r.out;
  EXPECT_NE(r.out.find("NO PLAN FITS"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("16 B per parameter"), std::string::npos);
  EXPECT_NE(r.out.find("smallest"), std::string::npos);
}

TEST(PlanCli, EvaluatePublishedRunsPrintsPredictedVsMeasured) {
  const Result r = Onboard("plan --evaluate " + std::string(ONBOARD_TEST_DATA) + "/published_runs.json");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("gpt3-175B/seqsel"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("vs measured 13.75 s"), std::string::npos) << r.out;
}

TEST(PlanCli, EvaluateMeasuredRunsPrintsTokensPerGpuBesideMeasurement) {
  const std::string runs = std::string(ONBOARD_TEST_DATA) + "/measured_training_runs.json";
  const Result r = Onboard("plan --evaluate " + runs);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("tokens/s/GPU vs measured 4992"), std::string::npos) << r.out;   // mb2604-dsv3-gb300-mxfp8
  EXPECT_NE(r.out.find("model TFLOP/s/GPU vs published 1298"), std::string::npos) << r.out;
  // Both FLOP counts per token beside it: 1298 TFLOP/s over 4992 tokens/s is 260 GFLOP per token.
  EXPECT_NE(r.out.find("; per token onboard counts "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" GFLOP, the source's figures imply 260\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("assumed: micro_batch not given: 1 assumed"), std::string::npos)
      << r.out;  // dsv3-report
  EXPECT_NE(r.out.find("tt-llama31-405b-512-h100-i1f1b: skipped (hardware"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("assumed: recompute not stated"), std::string::npos) << r.out;
  // The text ends with the file's calibration table and its error summary (search/calibration_table.h).
  EXPECT_NE(r.out.find("evaluated 32 of 33 runs: mean |error| "), std::string::npos) << r.out;
  const Result j = Onboard("plan --json --evaluate " + runs);
  EXPECT_EQ(j.code, 0);
  EXPECT_NE(j.out.find("\"measured_tokens_per_s_per_gpu\""), std::string::npos);
  EXPECT_NE(j.out.find("\"predicted_tflops_per_gpu\""), std::string::npos);  // beside the published
  const std::string bad = Write("bad_measured.json", R"({"configs":{},"runs":[{"id":"a","model":"m","hardware":"B200","gpus":8}]})");
  const Result b = Onboard("plan --evaluate " + bad);
  EXPECT_EQ(b.code, 2) << b.out;
  EXPECT_NE(b.out.find("runs[0].model"), std::string::npos) << b.out;
  // A free-text field of another JSON type is bad input naming the field, not a JSON type error.
  for (const char* field : {"recompute", "precision", "framework"}) {
    const std::string typed =
        Write(std::string("typed_") + field + ".json",
              std::string(R"({"configs":{},"runs":[{"id":"a","model":"m","hardware":"B200",)") +
                  R"("gpus":8,")" + field + R"(":{"MoE":3}}]})");
    const Result t = Onboard("plan --evaluate " + typed);
    EXPECT_EQ(t.code, 2) << t.out;
    EXPECT_NE(t.out.find(std::string("field 'runs[0].") + field + R"(': must be a string (got {"MoE":3}))"),
              std::string::npos)
        << t.out;
  }
}

TEST(PlanCli, ExportsMegatronAndTorchtitan) {
  const std::string base = "plan " + kFlagship + " --topology " + kTopo + "atlas-950-superpod-128.json";
  const Result m = Onboard(base + " --export megatron");
  EXPECT_EQ(m.code, 0) << m.out;
  EXPECT_NE(m.out.find("--expert-model-parallel-size"), std::string::npos) << m.out;
  EXPECT_NE(m.out.find("--pipeline-model-parallel-size"), std::string::npos) << m.out;
  EXPECT_NE(m.out.find("Megatron-LM has no KDA layer"), std::string::npos) << m.out;
  const Result t = Onboard(base + " --export torchtitan-v0.2");
  EXPECT_EQ(t.code, 0) << t.out;
  EXPECT_NE(t.out.find("[parallelism]"), std::string::npos) << t.out;
}

// The search's optimizer sharding follows the export's engine: Megatron-LM runs its distributed
// optimizer (zero 1, chosen for Llama-3.1-8B on 256 B200), torchtitan has only FSDP2, so --export
// torchtitan searches zero 3; forced with --zero-stage 1, its file says what it runs instead.
TEST(PlanCli, ExportEngineDecidesTheOptimizerShardingSearched) {
  const std::string base = "plan " + std::string(ONBOARD_TEST_DATA) +
                           "/hf/llama-3.1-8b.config.json --topology " + kTopo + "b200-32x8.json --mode full";
  const Result m = Onboard(base + " --export megatron");
  ASSERT_EQ(m.code, 0) << m.out;
  EXPECT_NE(m.out.find("--use-distributed-optimizer"), std::string::npos) << m.out;
  const Result t = Onboard(base + " --export torchtitan");
  ASSERT_EQ(t.code, 0) << t.out;
  EXPECT_NE(t.out.find("data_parallel_shard_degree="), std::string::npos) << t.out;
  EXPECT_EQ(t.out.find("zero_stage 1"), std::string::npos) << t.out;
  const Result forced = Onboard(base + " --export torchtitan --zero-stage 1");
  ASSERT_EQ(forced.code, 0) << forced.out;
  EXPECT_NE(forced.out.find("zero_stage 1 (weights and gradients replicated"), std::string::npos)
      << forced.out;
}

TEST(PlanCli, ExportAllWritesEveryFileAndNeedsOut) {
  const std::string dir = std::string(ONBOARD_BINARY_DIR) + "/plan-cli-export-all";
  std::system(("rm -rf '" + dir + "'").c_str());
  const std::string base = "plan " + std::string(ONBOARD_TEST_DATA) + "/hf/llama-3.1-8b.config.json --topology " + kTopo +
                           "h200-16x8.json --mode full --export all";
  const Result r = Onboard(base + " --out " + dir);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("Megatron-LM rules: all pass"), std::string::npos) << r.out;
  for (const char* f : {"plan.megatron.sh", "plan_megatron_bridge.py", "plan_torchtitan.py", "plan.torchtitan-v0.2.toml",
                        "plan.mindspeed.sh", "plan.torchrun.sh", "plan.sbatch", "EXPORTS.md"})
    EXPECT_EQ(access((dir + "/" + f).c_str(), R_OK), 0) << f << " missing; " << r.out;
  const Result no_out = Onboard(base);
  EXPECT_EQ(no_out.code, 2) << no_out.out;
  EXPECT_NE(no_out.out.find("--export all needs --out DIR"), std::string::npos) << no_out.out;
  // --out and --devices-per-node only mean something with --export: without it they were ignored (exit
  // 0, nothing written); now refused.
  const std::string search = base.substr(0, base.find(" --export all"));
  for (const std::string& flag : {" --out " + dir + "-unused", std::string(" --devices-per-node 4")}) {
    const Result r2 = Onboard(search + flag);
    EXPECT_EQ(r2.code, 2) << flag << ": " << r2.out;
    EXPECT_NE(r2.out.find("requires --export"), std::string::npos) << r2.out;
  }
}

// A layout's own "mode" is what --evaluate costs (it was overwritten by --mode's default, lora: a
// full-fine-tuning layout came back without grads or optimizer state); a --mode that contradicts it
// exits 2. --export beside --evaluate exports that one layout (it was ignored); a file of many runs
// exits 2. The layout is Megatron-Bridge's Llama-3.1-405B GB200 preset: 126 layers on pp16 vp8, the
// embedding and the loss in chunks of their own.
TEST(PlanCli, EvaluateKeepsTheLayoutsModeAndExportsIt) {
  const std::string layout =
      Write("l405.json", R"({"tp":4,"pp":16,"vp":8,"dp_shard":4,"sequence_parallel":true,)"
                         R"("micro_batch":1,"global_batch":1536,"seq":8192,"mode":"full",)"
                         R"("optimizer_sharding":"zero1","precision":"mxfp8","pp_layout":"E|(t|)*126L"})");
  const std::string base = "plan " + std::string(ONBOARD_TEST_DATA) +
                           "/hf/llama-3.1-405b.config.json --topology " + kTopo +
                           "gb200-nvl72-x4.json --evaluate " + layout;
  const Result full = Onboard(base + " --json");
  ASSERT_EQ(full.code, 0) << full.out;
  const auto j = nlohmann::json::parse(full.out.substr(full.out.find('[')));
  EXPECT_EQ(j[0]["plan"]["mode"], "full") << full.out;
  EXPECT_GT(j[0]["estimate"]["memory"]["optimizer_gib"].get<double>(), 1.0) << full.out;
  const Result conflict = Onboard(base + " --mode lora");
  EXPECT_EQ(conflict.code, 2) << conflict.out;
  EXPECT_NE(conflict.out.find("'mode': conflicts with --mode lora"), std::string::npos) << conflict.out;
  const Result exp = Onboard(base + " --export megatron");
  EXPECT_EQ(exp.code, 0) << exp.out;
  EXPECT_NE(exp.out.find("--pipeline-model-parallel-layout 'E|t|t|"), std::string::npos) << exp.out;
  EXPECT_NE(exp.out.find("|t|L'"), std::string::npos) << exp.out;
  // A request-level memory technique the exports do not write is refused, not dropped from the launch.
  const std::string offload =
      Write("l405_offload.json", R"({"tp":8,"pp":1,"dp_shard":32,"sequence_parallel":true,)"
                                 R"("micro_batch":1,"global_batch":256,"seq":8192,"mode":"full",)"
                                 R"("precision":"mxfp8","cpu_offload_layers":60})");
  const std::string obase = "plan " + std::string(ONBOARD_TEST_DATA) +
                            "/hf/llama-3.1-405b.config.json --topology " + kTopo +
                            "gb200-nvl72-x4.json --evaluate " + offload;
  const Result costed = Onboard(obase);
  EXPECT_EQ(costed.code, 0) << costed.out;
  EXPECT_NE(costed.out.find("offloaded to host"), std::string::npos) << costed.out;
  const Result refused = Onboard(obase + " --export megatron");
  EXPECT_EQ(refused.code, 2) << refused.out;
  EXPECT_NE(refused.out.find("'cpu_offload_layers': is costed but not written by --export"),
            std::string::npos)
      << refused.out;
  const Result many = Onboard("plan --evaluate " + std::string(ONBOARD_TEST_DATA) +
                              "/measured_training_runs.json --export megatron");
  EXPECT_EQ(many.code, 2) << many.out;
  EXPECT_NE(many.out.find("--export needs a file with one layout"), std::string::npos) << many.out;
}

// The loss a plan is costed with (--cross-entropy, a layout's "cross_entropy"): an unknown one, a layout
// and a flag that disagree, and an export whose engine runs another loss are refused (exit 2); the
// torchtitan export costs torch's loss unless told otherwise.
TEST(PlanCli, TheLossIsNamedOnceAndMatchesTheExport) {
  const std::string model = std::string(ONBOARD_TEST_DATA) + "/hf/gpt-oss-120b.config.json";
  const std::string base = "plan " + model + " --topology " + kTopo + "b200-32x8.json --mode full";
  // Exit 2, the line saying `says`.
  const auto refused = [](const std::string& args, const std::string& says) {
    const Result r = Onboard(args);
    EXPECT_EQ(r.code, 2) << r.out;
    EXPECT_NE(r.out.find(says), std::string::npos) << r.out;
  };
  refused(base + " --cross-entropy fp32",
          "field 'cross_entropy': must be megatron | te | te_inplace | torch (got fp32)");
  refused(base + " --cross-entropy te --export megatron",
          "--cross-entropy: field 'cross_entropy': is not the loss the megatron export runs");
  // One layout on 256 B200s, with the loss it names (`extra`), evaluated.
  const auto evaluate = [&](const std::string& file, const std::string& extra) {
    return "plan " + model + " --topology " + kTopo + "b200-32x8.json --evaluate " +
           Write(file, R"({"tp":1,"pp":1,"ep":8,"dp_shard":256,"micro_batch":2,"global_batch":512,)"
                       R"("seq":4096,"mode":"full")" +
                           extra + "}");
  };
  const std::string eval = evaluate("oss_te.json", R"(,"cross_entropy":"te")");
  const Result te = Onboard(eval + " --json");
  ASSERT_EQ(te.code, 0) << te.out;
  refused(eval + " --json --cross-entropy torch",
          "'cross_entropy': conflicts with --cross-entropy torch (got te)");
  refused(eval + " --export torchtitan", "is not the loss the torchtitan export runs (torch)");
  // The same layout without a loss: torch's holds more than Megatron's, 12 against 6 B per logit.
  const std::string peval = evaluate("oss_plain.json", "");
  const Result meg = Onboard(peval + " --json");
  const Result tt = Onboard(peval + " --json --cross-entropy torch");
  ASSERT_EQ(meg.code, 0) << meg.out;
  ASSERT_EQ(tt.code, 0) << tt.out;
  const auto ws = [](const Result& r) {
    return nlohmann::json::parse(r.out.substr(r.out.find('[')))[0]["estimate"]["memory"]["workspace_gib"]
        .get<double>();
  };
  EXPECT_NEAR(ws(tt) - ws(meg), 6.0 * 2 * 4096 * 201088 / 1073741824.0, 1e-3);
  EXPECT_EQ(Onboard(peval + " --export torchtitan").code, 0);
}

TEST(PlanCli, BadTopologyExits2NamingFileFieldValue) {
  const std::string bad = Write("bad_topo.json",
                                R"({"name":"x","num_devices":16,"device":{"tflops_bf16":100,"hbm_gib":80,"hbm_gbps":2000},)"
                                R"("tiers":[{"group_size":8,"bw_gbps":-3},{"group_size":16,"bw_gbps":5}]})");
  const Result r = Onboard("plan " + kFlagship + " --topology " + bad);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("bad_topo.json"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tiers[0].bw_gbps"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("-3"), std::string::npos) << r.out;
  const Result missing = Onboard("plan " + kFlagship + " --topology /nonexistent/t.json");
  EXPECT_EQ(missing.code, 2) << missing.out;
}

TEST(PlanCli, BadLayoutExits2NamingFileFieldValue) {
  const std::string bad = Write("bad_layout.json", R"({"runs":[{"id":"a","model":{"hidden":64,"ffn":256,"heads":4,)"
                                                   R"("layers":2,"vocab":100},"hardware":"A100-80GB","gpus":8,"tp":"x"}]})");
  const Result r = Onboard("plan --evaluate " + bad);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("bad_layout.json"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("runs[0].tp"), std::string::npos) << r.out;
  const Result degrees = Onboard("plan " + kFlagship + " --topology " + kTopo + "atlas-950-superpod-128.json --evaluate " +
                                 Write("l.json", R"({"tp":1,"dp_shard":128,"ep":48,"global_batch":128})"));
  EXPECT_EQ(degrees.code, 2) << degrees.out;
  EXPECT_NE(degrees.out.find("ep=48"), std::string::npos) << degrees.out;
}

// Issue 10: precisions are parsed by core/precision.h (one parser): an unknown name on the command
// line or in a layout file exits 2 naming where, the field and the value; mxfp8 stays mxfp8 (it
// was costed as fp8 but printed and exported by string compares before).
TEST(PlanCli, PrecisionsAreParsedOnceAndAnUnknownOneExits2) {
  const std::string atlas = " --topology " + kTopo + "atlas-950-superpod-128.json";
  const Result flag = Onboard("plan " + kFlagship + atlas + " --mode lora --base-dtype fp7");
  EXPECT_EQ(flag.code, 2) << flag.out;
  EXPECT_NE(flag.out.find("plan request: field 'base_dtype'"), std::string::npos) << flag.out;
  EXPECT_NE(flag.out.find("fp7"), std::string::npos) << flag.out;
  const Result misuse = Onboard("plan " + kFlagship + atlas + " --mode lora --base-dtype mxfp8");
  EXPECT_EQ(misuse.code, 2) << misuse.out;  // mxfp8 is a GEMM recipe, not a frozen-base format
  const std::string layout = R"({"tp":4,"dp_shard":32,"ep":128,"sequence_parallel":true,"micro_batch":1,)"
                             R"("global_batch":1024,"seq":4096,"mode":"lora","lora_rank":16,"precision":)";
  const Result bad =
      Onboard("plan " + kFlagship + atlas + " --evaluate " + Write("p7.json", layout + "\"fp7\"}"));
  EXPECT_EQ(bad.code, 2) << bad.out;
  EXPECT_NE(bad.out.find("p7.json"), std::string::npos) << bad.out;
  EXPECT_NE(bad.out.find("precision"), std::string::npos) << bad.out;
  EXPECT_NE(bad.out.find("fp7"), std::string::npos) << bad.out;
  const Result mx =
      Onboard("plan " + kFlagship + atlas + " --json --evaluate " + Write("mx.json", layout + "\"mxfp8\"}"));
  EXPECT_EQ(mx.code, 0) << mx.out;
  EXPECT_NE(mx.out.find("\"compute_dtype\": \"mxfp8\""), std::string::npos) << mx.out;
}

// --compute-dtype picks the GEMM recipe the search costs and the exports write: nvfp4 on a Blackwell
// topology is planned and exported as Megatron's NVFP4 recipe; on Hopper (no fp4 tensor cores) it exits 2
// naming the topology file and device.tflops_fp4; an unknown name exits 2 naming the field.
TEST(PlanCli, ComputeDtypeReachesTheSearchAndTheDeviceMustHaveIt) {
  const std::string llama = std::string(ONBOARD_TEST_DATA) + "/hf/llama-3.1-8b.config.json";
  const std::string gb300 = " --topology " + kTopo + "gb300-nvl72.json --mode full --compute-dtype nvfp4";
  const Result f4 = Onboard("plan " + llama + gb300 + " --json");
  EXPECT_EQ(f4.code, 0) << f4.out;
  EXPECT_NE(f4.out.find("\"compute_dtype\": \"nvfp4\""), std::string::npos) << f4.out.substr(0, 2000);
  EXPECT_NE(f4.out.find("is not calibrated"), std::string::npos) << f4.out.substr(0, 2000);
  const Result script = Onboard("plan " + llama + gb300 + " --export megatron");
  EXPECT_EQ(script.code, 0) << script.out;
  EXPECT_NE(script.out.find("--fp4-format e2m1"), std::string::npos) << script.out.substr(0, 2000);
  const Result bf = Onboard("plan " + llama + " --topology " + kTopo + "gb300-nvl72.json --mode full --json");
  EXPECT_EQ(bf.code, 0) << bf.out;
  EXPECT_NE(bf.out.find("\"compute_dtype\": \"bf16\""), std::string::npos) << bf.out.substr(0, 2000);
  EXPECT_EQ(bf.out.find("--fp4-format"), std::string::npos);
  EXPECT_EQ(bf.out.find("is not calibrated"), std::string::npos);
  const Result hopper =
      Onboard("plan " + llama + " --topology " + kTopo + "h200-16x8.json --mode full --compute-dtype nvfp4");
  EXPECT_EQ(hopper.code, 2) << hopper.out;
  EXPECT_NE(hopper.out.find("h200-16x8.json"), std::string::npos) << hopper.out;
  EXPECT_NE(hopper.out.find("device.tflops_fp4"), std::string::npos) << hopper.out;
  const Result bad =
      Onboard("plan " + llama + " --topology " + kTopo + "gb300-nvl72.json --mode full --compute-dtype fp4");
  EXPECT_EQ(bad.code, 2) << bad.out;
  EXPECT_NE(bad.out.find("compute_dtype"), std::string::npos) << bad.out;
}

// Issue 13: --bf16-layers-first / --bf16-layers-last reach the searched plan and its exports; without a
// quantised --compute-dtype they exit 2 naming the field.
TEST(PlanCli, Bf16LayersReachThePlanAndNeedAQuantisedCompute) {
  const std::string llama = std::string(ONBOARD_TEST_DATA) + "/hf/llama-3.1-8b.config.json";
  const std::string gb300 = " --topology " + kTopo + "gb300-nvl72.json --mode full";
  const Result j = Onboard("plan " + llama + gb300 + " --compute-dtype mxfp8 --bf16-layers-last 2 --json");
  EXPECT_EQ(j.code, 0) << j.out;
  EXPECT_NE(j.out.find("\"bf16_layers_last\": 2"), std::string::npos) << j.out.substr(0, 2000);
  EXPECT_EQ(j.out.find("\"bf16_layers_first\":"), std::string::npos) << j.out.substr(0, 2000);
  const Result script =
      Onboard("plan " + llama + gb300 + " --compute-dtype mxfp8 --bf16-layers-last 2 --export megatron");
  EXPECT_EQ(script.code, 0) << script.out;
  EXPECT_NE(script.out.find("--num-layers-at-end-in-bf16 2"), std::string::npos)
      << script.out.substr(0, 2000);
  const Result bf = Onboard("plan " + llama + gb300 + " --bf16-layers-last 2");
  EXPECT_EQ(bf.code, 2) << bf.out;
  EXPECT_NE(bf.out.find("bf16_layers"), std::string::npos) << bf.out;
}

// Issue 10: the mode and recompute names have one parser each (core/plan.h ParseFinetuneMode,
// ParseRecompute), used by the flag and by the layout file alike: an unknown one exits 2 naming
// where it came from, and a recompute key that names no block kind (core/block_kind.h) is refused.
TEST(PlanCli, ModeAndRecomputeNamesAreParsedOnce) {
  const std::string atlas = " --topology " + kTopo + "atlas-950-superpod-128.json";
  const Result flag = Onboard("plan " + kFlagship + atlas + " --mode fulll");
  EXPECT_EQ(flag.code, 2) << flag.out;
  EXPECT_NE(flag.out.find("--mode: field 'mode': must be full or lora (got fulll)"), std::string::npos)
      << flag.out;
  const std::string layout = R"({"tp":4,"dp_shard":32,"ep":128,"sequence_parallel":true,"micro_batch":1,)"
                             R"("global_batch":1024,"seq":4096,"lora_rank":16,)";
  const Result mode =
      Onboard("plan " + kFlagship + atlas + " --evaluate " + Write("m.json", layout + R"("mode":"LoRA"})"));
  EXPECT_EQ(mode.code, 2) << mode.out;
  EXPECT_NE(mode.out.find("m.json: field 'mode': must be full or lora (got LoRA)"), std::string::npos)
      << mode.out;
  const Result rc = Onboard("plan " + kFlagship + atlas + " --evaluate " +
                            Write("rc.json", layout + R"("mode":"lora","recompute":{"MoE":"some"}})"));
  EXPECT_EQ(rc.code, 2) << rc.out;
  EXPECT_NE(rc.out.find("recompute.MoE': must be none, selective or full (got some)"), std::string::npos)
      << rc.out;
  const Result key = Onboard("plan " + kFlagship + atlas + " --evaluate " +
                             Write("key.json", layout + R"("mode":"lora","recompute":{"MOE":"full"}})"));
  EXPECT_EQ(key.code, 2) << key.out;
  EXPECT_NE(key.out.find("recompute key 'MOE' is not a block kind"), std::string::npos) << key.out;
  const Result ok =
      Onboard("plan " + kFlagship + atlas + " --evaluate " +
              Write("ok.json", layout + R"("mode":"lora","recompute":{"MoE":"full","*":"selective"}})"));
  EXPECT_EQ(ok.code, 0) << ok.out;
}

// Issue 10 item 1: `onboard plan --topology NAME` resolves a shipped name as `onboard run` and the
// service do (agent/topology_source.h): the same output as the file's path.
TEST(PlanCli, TopologyNameResolvesToTheShippedFile) {
  const Result by_name = Onboard("plan " + kFlagship + " --topology atlas-950-superpod-128 --mode lora");
  const Result by_path =
      Onboard("plan " + kFlagship + " --topology " + kTopo + "atlas-950-superpod-128.json --mode lora");
  EXPECT_EQ(by_name.code, 0) << by_name.out;
  auto untimed = [](const std::string& s) { return s.substr(0, s.rfind("candidates:")); };  // wall time last
  EXPECT_EQ(untimed(by_name.out), untimed(by_path.out));
  EXPECT_NE(by_name.out.find("best plan:"), std::string::npos) << by_name.out;
  const Result unknown = Onboard("plan " + kFlagship + " --topology atlas-951");
  EXPECT_EQ(unknown.code, 2) << unknown.out;
  EXPECT_NE(unknown.out.find("atlas-951"), std::string::npos) << unknown.out;
}

}  // namespace

namespace {

// Each "--flag value" appended to `base` exits 2, and its message names the field and the value.
void ExpectBadFlagsExit2(const std::string& base,
                         const std::vector<std::pair<std::string, std::string>>& cases) {
  for (const auto& [flag, field] : cases) {
    const Result bad = Onboard(base + " " + flag);
    EXPECT_EQ(bad.code, 2) << flag << ": " << bad.out;
    EXPECT_NE(bad.out.find(field), std::string::npos) << bad.out;
    EXPECT_NE(bad.out.find(flag.substr(flag.find(' ') + 1)), std::string::npos) << bad.out;
  }
}

// --etp, --schedule and --zero-stage are search constraints, checked once by PlanRequest::Validate: each
// moves the best plan away from the unconstrained search's (the negative control: without the flag it
// differs), and a bad value exits 2 naming the field and the value.
TEST(PlanCli, EtpAndScheduleFlagsConstrainTheSearchAndBadValuesExit2) {
  const std::string base = "plan " + std::string(ONBOARD_TEST_DATA) +
                           "/hf/qwen3-30b-a3b.config.json --topology " + kTopo + "b200-32x8.json --mode full";
  const Result free = Onboard(base);
  ASSERT_EQ(free.code, 0) << free.out;
  const std::string best_free = free.out.substr(free.out.find("best plan:"), 200);
  EXPECT_EQ(best_free.find("etp=2"), std::string::npos) << best_free;
  EXPECT_EQ(best_free.find("dualpipe"), std::string::npos) << best_free;
  const Result etp = Onboard(base + " --etp 2");
  ASSERT_EQ(etp.code, 0) << etp.out;
  EXPECT_NE(etp.out.substr(etp.out.find("best plan:"), 200).find("etp=2"), std::string::npos) << etp.out;
  const Result dp = Onboard(base + " --schedule dualpipe");
  ASSERT_EQ(dp.code, 0) << dp.out;
  EXPECT_NE(dp.out.substr(dp.out.find("best plan:"), 200).find("dualpipe"), std::string::npos) << dp.out;
  EXPECT_EQ(best_free.find("zero1"), std::string::npos) << best_free;
  const Result z1 = Onboard(base + " --zero-stage 1");
  ASSERT_EQ(z1.code, 0) << z1.out;
  EXPECT_NE(z1.out.substr(z1.out.find("best plan:"), 200).find("zero1"), std::string::npos) << z1.out;
  ExpectBadFlagsExit2(base, {{"--etp -1", "constraints.etp"},
                             {"--etp 100000", "constraints.etp"},
                             {"--schedule zb-v", "constraints.schedule"},
                             {"--zero-stage 2", "constraints.zero_stage"}});
}

// Issue 18: --ep-dispatcher, --expert-nodes-per-token and --max-route-nodes reach the search's
// request (PlanRequest, checked once by CheckExpertRouting): the dispatcher changes the best plan's
// estimate (the negative control: unwired, both runs are the same request and give the same number),
// and a bad value exits 2 naming the field and the value.
TEST(PlanCli, ExpertRoutingFlagsReachTheSearchAndBadValuesExit2) {
  const std::string base = "plan " + std::string(ONBOARD_TEST_DATA) +
                           "/hf/qwen3-30b-a3b.config.json --topology " + kTopo +
                           "b200-32x8.json --mode full --json";
  const Result a2a = Onboard(base + " --ep-dispatcher alltoall");
  const Result deepep = Onboard(base + " --ep-dispatcher deepep");
  ASSERT_EQ(a2a.code, 0) << a2a.out;
  ASSERT_EQ(deepep.code, 0) << deepep.out;
  const double s_a2a = nlohmann::json::parse(a2a.out).at("best").at("estimate").at("step_s").get<double>();
  const double s_deepep =
      nlohmann::json::parse(deepep.out).at("best").at("estimate").at("step_s").get<double>();
  EXPECT_NE(s_a2a, s_deepep);
  ExpectBadFlagsExit2(base, {{"--ep-dispatcher nccl", "--ep-dispatcher"},
                             {"--expert-nodes-per-token 0.5", "expert_nodes_per_token"},
                             {"--max-route-nodes -1", "max_route_nodes"}});
}

}  // namespace
