// `onboard probe CKPT --weights` end to end: LoRA on the checkpoint's real layers over a text passes
// (exit 0) and prints which weights it used; the frozen-adapter control fails the verdict (exit 7);
// a missing layer tensor exits 2 naming it; --weights without --mode lora exits 2 naming the flag.
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

}  // namespace
}  // namespace onboard
