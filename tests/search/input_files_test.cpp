// Topology and layout files: every shipped topology loads; bad files fail with the file, the
// field and the value in one line (kBadInput -> exit 2); exports name the degrees.
#include <cstdlib>
#include <filesystem>

#include "search/layout_file.h"
#include "search_test_util.h"
#include "tests/fuzz_reproducers.h"

namespace onboard {
namespace {

TEST(Topologies, ShippedFilesLoad) {
  for (const char* name : {"atlas-950-superpod-128", "atlas-950-superpod-8192", "h200-16x8",
                           "h800-2048-deepseek-v3", "a100-selene-4480", "b200-32x8", "b300-32x8",
                           "gb200-nvl72", "gb300-nvl72", "gb200-nvl72-x4", "gb300-nvl72-x4",
                           "gb300-nvl72-8192"}) {
    const Topology t = test::ShippedTopology(name);
    EXPECT_EQ(t.name, name);
    EXPECT_EQ(t.tiers.back().group_size, t.num_devices);
    EXPECT_TRUE(ValidateTopology(t).ok());
    auto again = ParseTopologyJson(TopologyToJson(t), "roundtrip");
    ASSERT_TRUE(again.ok()) << again.status().ToString();
    EXPECT_EQ(again->num_devices, t.num_devices);
  }
  EXPECT_EQ(test::ShippedTopology("atlas-950-superpod-8192").num_devices, 8192);
  EXPECT_EQ(test::ShippedTopology("h800-2048-deepseek-v3").num_devices, 2048);
  // NVL72: the NVLink domain spans a rack's share (64), not a node of 4 or 8.
  EXPECT_EQ(test::ShippedTopology("gb300-nvl72-x4").tiers.front().group_size, 64);
  EXPECT_EQ(test::ShippedTopology("b200-32x8").tiers.front().group_size, 8);
}

struct BadCase {
  std::string json;
  const char* field;
  const char* value;
};

TEST(Topologies, BadFilesNameFileFieldValue) {
  const std::string dev = R"("device":{"name":"d","tflops_bf16":100,"hbm_gib":80,"hbm_gbps":2000})";
  const BadCase cases[] = {
      {"{\"num_devices\":16," + dev + ",\"tiers\":[{\"group_size\":8,\"bw_gbps\":-5},{\"group_size\":16,\"bw_gbps\":5}]}",
       "tiers[0].bw_gbps", "-5"},
      {"{\"num_devices\":16," + dev + ",\"tiers\":[{\"group_size\":6,\"bw_gbps\":5},{\"group_size\":16,\"bw_gbps\":5}]}",
       "tiers[0].group_size", "6"},
      {"{\"num_devices\":16," + dev + ",\"tiers\":[{\"group_size\":8,\"bw_gbps\":5}]}", "tiers[0].group_size", "8"},
      {"{\"num_devices\":\"many\"," + dev + ",\"tiers\":[]}", "num_devices", "many"},
      {"{\"num_devices\":8," + dev + ",\"tiers\":[{\"group_size\":8,\"bw_gbps\":5,\"efficiency\":1.5}]}",
       "tiers[0].efficiency", "1.5"},
      {"{\"num_devices\":8," + dev + ",\"tiers\":[{\"group_size\":8,\"bw_gbps\":5,\"bandwith\":3}]}",
       "tiers[0].bandwith", "bandwith"},
  };
  for (const auto& c : cases) {
    auto t = ParseTopologyJson(c.json, "bad.json");
    ASSERT_FALSE(t.ok()) << c.json;
    EXPECT_EQ(t.status().code(), ErrorCode::kBadInput);
    const std::string& msg = t.status().message();
    EXPECT_NE(msg.find("bad.json"), std::string::npos) << msg;
    EXPECT_NE(msg.find(c.field), std::string::npos) << msg;
    EXPECT_NE(msg.find(c.value), std::string::npos) << msg;
  }
  EXPECT_EQ(LoadTopologyFile("/nonexistent/t.json").status().code(), ErrorCode::kNotFound);
  EXPECT_FALSE(ParseTopologyJson("{not json", "x.json").ok());
}

// Fuzz finding (search/fuzz/regressions/topology-unknown_key_with_newline.json): a key holding a
// newline made the "unknown field" error two lines (the field, a JSON path, came from the file).
TEST(Topologies, ErrorStaysOneLineWhateverTheKeyHolds) {
  auto t = ParseTopologyJson(R"({"num_devices":8,"device":{"tflops_bf16":100,"hbm_gib":80,"hbm_gbps":2000},)"
                             R"("tiers":[{"group_size":8,"bw_gbps":5,"effi\nciency":1}]})",
                             "bad.json");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), ErrorCode::kBadInput);
  EXPECT_EQ(t.status().message(), "bad.json: field 'tiers[0].effi?ciency': unknown field (got effi?ciency)");
}

TEST(LayoutFiles, BadRunsNameFileFieldValue) {
  const BadCase cases[] = {
      {R"({"runs":[{"id":"a","model":{"hidden":64,"ffn":256,"heads":4,"layers":2,"vocab":100},"hardware":"TPU-v9","gpus":8,"tp":8}]})",
       "runs[0].hardware", "TPU-v9"},
      {R"({"runs":[{"id":"a","model":{"hidden":64,"ffn":256,"heads":5,"layers":2,"vocab":100},"hardware":"A100-80GB","gpus":8}]})",
       "runs[0].model.heads", "5"},
      {R"({"runs":[{"id":"a","model":{"hidden":64,"ffn":256,"heads":4,"layers":2,"vocab":100},"hardware":"A100-80GB","gpus":8,"recompute":"sometimes"}]})",
       "runs[0].recompute", "sometimes"},
      {R"({"tp":"eight"})", "tp", "eight"},
      {R"({"runs":[{"id":"a","hardware":"A100-80GB","gpus":8}]})", "runs[0].model", ""},
      {R"({"runs":[{"id":"a","model":{"hidden":64,"ffn":256,"heads":4,"layers":2,"vocab":100},"hardware":"A100-80GB","gpus":12}]})",
       "runs[0].gpus", "12"},
  };
  for (const auto& c : cases) {
    auto r = ParseLayoutJson(c.json, "layout.json");
    ASSERT_FALSE(r.ok()) << c.json;
    EXPECT_EQ(ExitCodeFor(r.status().code()), 2);
    const std::string& msg = r.status().message();
    EXPECT_NE(msg.find("layout.json"), std::string::npos) << msg;
    EXPECT_NE(msg.find(c.field), std::string::npos) << msg;
    EXPECT_NE(msg.find(c.value), std::string::npos) << msg;
  }
}

TEST(LayoutFiles, InvalidDegreesAreRejectedAtEvaluation) {
  auto runs = ParseLayoutJson(
      R"({"runs":[{"id":"x/y","model":{"hidden":64,"ffn":256,"heads":4,"layers":2,"vocab":100},"hardware":"A100-80GB","gpus":8,"tp":8,"pp":1,"dp":1,"global_batch":4,"micro_batch":4}]})",
      "l.json");
  ASSERT_TRUE(runs.ok()) << runs.status().ToString();
  auto e = EvaluatePlan(RequestForRun(runs->front()), runs->front().plan);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("tp=8 must divide attention heads=4"), std::string::npos) << e.status().message();
}

// Review finding: an integer literal above INT64_MAX wrapped to a negative int64 and the error
// quoted that (-1), not what the file holds.
TEST(Topologies, IntegerAboveInt64IsQuotedAsWritten) {
  auto t = ParseTopologyJson(R"({"num_devices":18446744073709551615,"device":{},"tiers":[]})", "big.json");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), ErrorCode::kBadInput);
  EXPECT_NE(t.status().message().find("'num_devices'"), std::string::npos) << t.status().message();
  EXPECT_NE(t.status().message().find("18446744073709551615"), std::string::npos) << t.status().message();
}

// A measured-runs file (layout form (c)) with one run of Mixtral 8x7B on 64 GB200 (tests/data/hf/) and
// `fields` (batch, sequence, measurement); `file` is the configs entry.
std::string MeasuredRun(const std::string& fields,
                        const std::string& file = "hf/mixtral-8x7b-v0.1.config.json") {
  return R"({"configs":{"m":{"file":")" + file +
         R"("}},"runs":[{"id":"x","model":"m","hardware":"GB200","gpus":64,"ep":8,)" + fields + "}]}";
}

// Fuzz findings (fuzz_layout_file; reproducers in search/fuzz/regressions/layout_file-*): the
// measured-runs reader took degrees and batch up to 2^40, so tp*pp*cp, ep*etp and global_batch*seq
// overflowed int64 (UB; 2^120 wraps to 0 and gpus % 0 is SIGFPE); a config path the OS refuses threw
// std::filesystem_error out of the reader; a measurement near 0 gave an infinite tokens/s.
TEST(LayoutFiles, MeasuredRunsRefuseWhatWouldOverflowOrThrow) {
  const std::string origin = std::string(ONBOARD_TEST_DATA) + "/measured.json";
  const std::string batch = R"("global_batch":256,"seq":4096,)",
                    measured = R"("measured":{"tokens_per_s_per_gpu":19275})";
  auto good = ParseLayoutJson(MeasuredRun(batch + measured), origin);
  ASSERT_TRUE(good.ok()) << good.status().ToString();
  EXPECT_EQ(good->front().plan.deg.dp_shard, 64);
  const BadCase cases[] = {
      {MeasuredRun(R"("global_batch":1099511627776,"seq":1099511627776,)" + measured), "runs[0].global_batch",
       "1099511627776"},
      {MeasuredRun(R"("global_batch":256,"seq":1099511627776,)" + measured), "runs[0].seq", "1099511627776"},
      {MeasuredRun(batch + R"("etp":2097152,)" + measured), "runs[0].etp", "2097152"},
      {MeasuredRun(batch + R"("vp":2048,)" + measured), "runs[0].vp", "2048"},
      {MeasuredRun(batch + R"("measured":{"gpu_hours_per_trillion_tokens":5e-324})"),
       "runs[0].measured.gpu_hours_per_trillion_tokens", "5e-324"},
      {MeasuredRun(batch + R"("measured":{"tokens_per_s_per_gpu":5e-324})"),
       "runs[0].measured.tokens_per_s_per_gpu", "5e-324"},
      {MeasuredRun(batch + measured, std::string(300, 'a') + ".json"), "configs.m.file", "aaaa"},
  };
  for (const auto& c : cases) {
    auto r = ParseLayoutJson(c.json, origin);
    if (r.ok()) {
      ADD_FAILURE() << "accepted: " << c.json;
      continue;
    }
    EXPECT_EQ(r.status().code(), ErrorCode::kBadInput);
    const std::string& msg = r.status().message();
    EXPECT_NE(msg.find(origin), std::string::npos) << msg;
    EXPECT_NE(msg.find(std::string("'") + c.field + "'"), std::string::npos) << msg;
    EXPECT_NE(msg.find(c.value), std::string::npos) << msg;
  }
}

// Review finding, as for topologies: "tp": 18446744073709551615 was reported as "got -1".
TEST(LayoutFiles, IntegerAboveInt64IsQuotedAsWritten) {
  auto r = ParseLayoutJson(R"({"tp":18446744073709551615})", "layout.json");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "layout.json: field 'tp': must be in [1, 1048576] (got 18446744073709551615)");
}

// Every input a fuzzer of this folder's readers once failed on (search/fuzz/regressions/<target>-<what>,
// target topology or layout_file) is now accepted or rejected as kBadInput on one line, in a child
// process so that one that still crashes fails this test, not the binary. Layout inputs are read as if
// they sat in tests/data (their configs in tests/data/hf/), as fuzz_layout_file reads them.
TEST(SearchFuzzRegressionsDeathTest, EveryReproducerIsAcceptedOrBadInputOnOneLine) {
  int n = 0;
  for (const test::Reproducer& r :
       test::ReadReproducers(std::filesystem::path(ONBOARD_SOURCE_DIR) / "search/fuzz/regressions")) {
    ASSERT_TRUE(r.target == "topology" || r.target == "layout_file") << r.name;
    EXPECT_EXIT(
        {
          const Status st =
              r.target == "topology"
                  ? ParseTopologyJson(r.bytes, r.name).status()
                  : ParseLayoutJson(r.bytes, std::string(ONBOARD_TEST_DATA) + "/" + r.name).status();
          const bool one_line = st.message().find('\n') == std::string::npos;
          std::exit((st.ok() || st.code() == ErrorCode::kBadInput) && one_line ? 0 : 1);
        },
        ::testing::ExitedWithCode(0), "")
        << r.name << " still crashes, is not rejected as bad input, or its error spans lines";
    ++n;
  }
  EXPECT_GE(n, 6);
}

TEST(Exports, TorchtitanAndMegatronCarryTheDegrees) {
  Plan p = test::MakePlan({2, 16, 4, 2, 32, 2, 2, true}, 4096, 1, 8);
  p.recompute = {{"KDA", Recompute::kSelective}, {"MoE", Recompute::kFull}};
  const std::string toml = ToTorchtitanToml(p);
  EXPECT_NE(toml.find("data_parallel_replicate_degree = 2"), std::string::npos) << toml;
  EXPECT_NE(toml.find("data_parallel_shard_degree = 16"), std::string::npos);
  EXPECT_NE(toml.find("tensor_parallel_degree = 4"), std::string::npos);
  EXPECT_NE(toml.find("pipeline_parallel_schedule = \"Interleaved1F1B\""), std::string::npos);
  EXPECT_NE(toml.find("expert_parallel_degree = 32"), std::string::npos);
  EXPECT_NE(toml.find("mode = \"full\""), std::string::npos);
  const std::string args = ToMegatronArgs(p);
  EXPECT_NE(args.find("--tensor-model-parallel-size 4"), std::string::npos) << args;
  EXPECT_NE(args.find("--pipeline-model-parallel-size 2"), std::string::npos);
  EXPECT_NE(args.find("--expert-model-parallel-size 32"), std::string::npos);
  EXPECT_NE(args.find("--sequence-parallel"), std::string::npos);
  EXPECT_NE(args.find("--global-batch-size 256"), std::string::npos);
}

}  // namespace
}  // namespace onboard
