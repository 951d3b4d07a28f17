// `onboard run` on a checkpoint directory: stage "weights" loads the safetensors through the backend,
// compares the fp32 logits with the reference (fp64 forward by default, or a given .npy) and the
// report's "weights" section says what loaded, the dtypes, bytes read and the verdict. The negative: a
// reference that differs by more than the tolerance gives FAIL in all three reports.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "agent/orchestrator.h"
#include "orchestrator_test_support.h"
#include "tests/backends/hf_test_checkpoint.h"

namespace onboard::agent {
namespace {

namespace fs = std::filesystem;

std::string Slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

nlohmann::json RunOn(const std::string& ckpt, const std::string& out, const std::string& reference = "",
                     const std::string& weights_text = "") {
  RunRequest r = testing::TinyRequest(out, /*probe=*/false, /*kernels=*/false);
  r.model_path = ckpt;
  r.verify_reference = reference;
  r.weights_text = weights_text;
  CollectingEventSink sink;
  CancelToken cancel;
  auto res = RunOnboarding(r, sink, cancel);
  EXPECT_TRUE(res.ok()) << res.status().ToString();
  return nlohmann::json::parse(Slurp(fs::path(out) / "report.json"), nullptr, false);
}

TEST(RunWeights, CheckpointDirLoadsAndTheReportSaysSo) {
  const std::string ckpt = testing::FreshDir("weights_ckpt");
  const hftest::Checkpoint c = hftest::MakeDense("qwen2");
  c.Write(ckpt, 2);
  const std::string out = testing::FreshDir("weights_run");
  const nlohmann::json rep = RunOn(ckpt, out);
  ASSERT_FALSE(rep.is_discarded());
  const nlohmann::json& w = rep["weights"];
  ASSERT_TRUE(w["loaded"].get<bool>()) << w.dump();
  EXPECT_EQ(w["model_type"], "qwen2");
  EXPECT_EQ(w["tensors"].get<size_t>(), c.tensors.size());  // every tensor of the checkpoint
  EXPECT_EQ(w["dtypes"], nlohmann::json::array({"BF16"}));
  EXPECT_EQ(w["bytes_read"], w["checkpoint_bytes"]);
  EXPECT_EQ(w["check"]["verdict"], "PASS") << w.dump();
  EXPECT_LT(w["check"]["max_rel"].get<double>(), 1e-5);
  EXPECT_TRUE(fs::exists(fs::path(out) / "weights/logits.npy"));
  const std::string md = Slurp(fs::path(out) / "report.md");
  EXPECT_NE(md.find("## Weights"), std::string::npos);
  EXPECT_NE(md.find("| verdict | PASS |"), std::string::npos) << md.substr(md.find("## Weights"), 1200);
  // Every row of the section's summary table has exactly its two cells (no stray '|' in a value).
  const size_t table = md.find("| | |", md.find("## Weights"));
  std::istringstream lines(md.substr(table, md.find("\n\n", table) - table));
  for (std::string line; std::getline(lines, line);)
    EXPECT_EQ(std::count(line.begin(), line.end(), '|'), 3) << line;

  // The negative: the fp64 logits with one logit shifted by 1 (far past the tolerance) -> FAIL.
  std::string npy = Slurp(fs::path(out) / "weights/logits_fp64.npy");
  uint16_t header = 0;
  std::memcpy(&header, npy.data() + 8, 2);
  float x = 0;
  std::memcpy(&x, npy.data() + 10 + header, 4);
  x += 1.0f;
  std::memcpy(&npy[10 + header], &x, 4);
  const std::string bad = out + "/wrong_reference.npy";
  std::ofstream(bad, std::ios::binary) << npy;
  const std::string out2 = testing::FreshDir("weights_run_bad");
  const nlohmann::json rep2 = RunOn(ckpt, out2, bad);
  EXPECT_EQ(rep2["weights"]["check"]["verdict"], "FAIL") << rep2["weights"].dump();
  EXPECT_EQ(rep2["weights"]["check"]["reference"], "reference file wrong_reference.npy");
  EXPECT_NE(Slurp(fs::path(out2) / "report.md").find("| verdict | FAIL |"), std::string::npos);
  EXPECT_NE(Slurp(fs::path(out2) / "report.html").find("<tr class=\"bad\"><th>verdict</th><td>FAIL</td>"),
            std::string::npos);
}

// With a text, the run trains LoRA on the checkpoint's real layers 0-1 after the logit check; the
// section records which weights it used, the held-out losses against the frozen checkpoint and the
// verdict; without one it says why it did not run (the test above: no text).
TEST(RunWeights, RealWeightsLoraProbeRunsAndTheReportRecordsItsWeights) {
  const std::string ckpt = testing::FreshDir("weights_probe_ckpt");
  hftest::MakeDense("llama", 2, 256).Write(ckpt);
  const std::string out = testing::FreshDir("weights_probe_run");
  const nlohmann::json rep = RunOn(ckpt, out, "", std::string(ONBOARD_TEST_DATA) + "/text/readme_prose.txt");
  const nlohmann::json& p = rep["weights"]["lora_probe"];
  ASSERT_TRUE(p["ran"].get<bool>()) << p.dump();
  EXPECT_EQ(p["layers"], nlohmann::json::array({0, 1}));
  EXPECT_EQ(p["targets"].size(), 14u);  // q/k/v/o and the MLP gate/up/down of both layers
  EXPECT_EQ(p["verdict"], "learned") << p.dump();
  EXPECT_LT(p["held_out_final"].get<double>(), p["held_out_frozen"].get<double>());
  EXPECT_TRUE(fs::exists(fs::path(p["adapter"].get<std::string>()) / "adapter_model.safetensors"));
  const std::string md = Slurp(fs::path(out) / "report.md");
  EXPECT_NE(md.find("| LoRA probe verdict | learned"), std::string::npos)
      << md.substr(md.find("## Weights"), 1500);
  const std::string none = testing::FreshDir("weights_probe_none");
  EXPECT_NE(RunOn(ckpt, none)["weights"]["lora_probe"]["reason"].get<std::string>().find("--weights-text"),
            std::string::npos);
}

// The weights stage's inputs with a config-only model have nothing to act on: refused as bad input
// naming the field (they used to be skipped silently), before any stage runs.
TEST(RunWeights, WeightsInputsWithAConfigOnlyModelAreBadInput) {
  for (const char* field : {"verify_ids", "verify_reference", "weights_text"}) {
    RunRequest r = testing::TinyRequest(testing::FreshDir("weights_inputs_bad"), false, false);
    r.model_path = testing::TinyModel();
    (std::string(field) == "verify_ids"         ? r.verify_ids
     : std::string(field) == "verify_reference" ? r.verify_reference
                                                : r.weights_text) = "/tmp/any";
    CollectingEventSink sink;
    CancelToken cancel;
    auto res = RunOnboarding(r, sink, cancel);
    ASSERT_FALSE(res.ok()) << field;
    EXPECT_EQ(res.status().code(), ErrorCode::kBadInput) << res.status().ToString();
    EXPECT_NE(res.status().message().find(std::string("field '") + field + "'"), std::string::npos)
        << res.status().message();
  }
}

// A config-only model has no weights: the section says so (and the run goes on).
TEST(RunWeights, ConfigOnlyModelSaysNoWeights) {
  const std::string out = testing::FreshDir("weights_none");
  const nlohmann::json rep = RunOn(testing::TinyModel(), out);
  EXPECT_FALSE(rep["weights"]["loaded"].get<bool>());
  EXPECT_NE(rep["weights"]["reason"].get<std::string>().find("no weights loaded"), std::string::npos);
}

}  // namespace
}  // namespace onboard::agent
