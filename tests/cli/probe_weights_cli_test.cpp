// `onboard probe CKPT --weights` end to end: LoRA on the checkpoint's real layers over a text passes
// (exit 0) and prints which weights it used; the frozen-adapter control fails the verdict (exit 7);
// a missing layer tensor exits 2 naming it; --weights without --mode lora exits 2 naming the flag;
// a bad --lora-alpha exits 2 naming it, and --layers / --lora-alpha without --weights exit 2.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "tests/backends/hf_test_checkpoint.h"
#include "tests/cli/onboard_runner.h"

namespace onboard {
namespace {

using clitest::RunOnboard;

std::string Checkpoint(hftest::Checkpoint c) {
  std::string t = "/tmp/onboard_probe_weights_XXXXXX";
  const std::string dir = mkdtemp(&t[0]);
  c.Write(dir + "/ckpt");
  return dir;
}

std::string Args(const std::string& dir) {
  return "probe " + dir +
         "/ckpt --weights --layers 0-1 --mode lora --ranks 2 --steps 30 --seq 32 --batch 8 --text " +
         std::string(ONBOARD_TEST_DATA) + "/text/readme_prose.txt --out " + dir + "/out";
}

TEST(ProbeWeightsCli, LearnsOnRealLayersAndTheFrozenControlExitsSeven) {
  const std::string dir = Checkpoint(hftest::MakeDense("llama", 2, 256));
  auto r = RunOnboard(Args(dir));
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("layers 0-1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("verdict        learned"), std::string::npos) << r.out;
  r = RunOnboard(Args(dir) + " --control frozen_lora");
  EXPECT_EQ(r.code, 7) << r.out;
  EXPECT_NE(r.out.find("not_learned"), std::string::npos) << r.out;
}

TEST(ProbeWeightsCli, MissingTensorAndWrongModeExitTwo) {
  hftest::Checkpoint c = hftest::MakeDense("llama", 2, 256);
  c.tensors.erase("model.layers.1.mlp.down_proj.weight");
  const std::string dir = Checkpoint(c);
  auto r = RunOnboard(Args(dir));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("model.layers.1.mlp.down_proj.weight"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[32,48]"), std::string::npos) << r.out;  // the expected shape
  std::string full = Args(dir);
  full.replace(full.find("--mode lora"), 11, "--mode full");
  r = RunOnboard(full);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--mode lora"), std::string::npos) << r.out;
}

// --lora-alpha 0, -2 or nan used to fall back to the default (2 x rank) silently; they now reach the
// backend's check. --layers and --lora-alpha only mean something with --weights: without it they were
// ignored, now CLI11 refuses them.
TEST(ProbeWeightsCli, BadLoraAlphaAndWeightsOnlyFlagsExitTwo) {
  const std::string dir = Checkpoint(hftest::MakeDense("llama", 2, 256));
  for (const char* alpha : {"0", "-2", "nan"}) {
    auto r = RunOnboard(Args(dir) + " --lora-alpha " + alpha);
    EXPECT_EQ(r.code, 2) << alpha << ": " << r.out;
    EXPECT_NE(r.out.find("--lora-alpha"), std::string::npos) << r.out;
  }
  const std::string cfg = std::string(ONBOARD_TEST_DATA) + "/hf/qwen3-30b-a3b.config.json --steps 2";
  for (const char* flag : {"--layers 0-1", "--lora-alpha 4"}) {
    auto r = RunOnboard("probe " + cfg + " " + flag);
    EXPECT_EQ(r.code, 2) << flag << ": " << r.out;
    EXPECT_NE(r.out.find("requires --weights"), std::string::npos) << r.out;
  }
}

}  // namespace
}  // namespace onboard
