// Loading by plan: with pp=2 stages x ep=2 expert groups, each rank reads only its stage's layers,
// its experts, and the embedding (first stage) / head (last stage); together the ranks read every
// tensor, each routed expert exactly once.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <set>

#include "backends/hf_model.h"
#include "tests/backends/hf_test_checkpoint.h"

namespace onboard {
namespace {

// Layer and expert index in a tensor name (-1 when none).
std::pair<int64_t, int64_t> LayerExpert(const std::string& n) {
  int64_t layer = -1, expert = -1;
  if (n.rfind("model.layers.", 0) == 0) layer = std::stoll(n.substr(13));
  const size_t e = n.find(".experts.");
  if (e != std::string::npos) expert = std::stoll(n.substr(e + 9));
  return {layer, expert};
}

TEST(HfPlanSlice, EachRankReadsOnlyWhatItOwns) {
  std::string t = "/tmp/onboard_slice_XXXXXX";
  const std::string dir = mkdtemp(&t[0]);
  hftest::MakeQwen3Moe().Write(dir, 2);
  Expected<HfForwardConfig> cfg = ReadHfForwardConfig(dir);
  ASSERT_TRUE(cfg.ok());
  std::map<std::string, int> reads;
  uint64_t total = 0;
  for (int64_t stage = 0; stage < 2; ++stage) {
    for (int64_t ep = 0; ep < 2; ++ep) {
      Expected<SafetensorsCheckpoint> ck = SafetensorsCheckpoint::Open(dir);  // each rank maps on its own
      ASSERT_TRUE(ck.ok());
      total = ck->data_bytes();
      const HfRankSlice s = SliceForRank(*cfg, {0, 1}, stage, 2, ep);
      EXPECT_EQ(s.expert_begin, 4 * ep);
      Expected<HfModelWeights> w = MapHfSlice(*cfg, *ck, s, torch::kFloat);
      ASSERT_TRUE(w.ok()) << w.status().message();
      uint64_t mine = 0;
      for (const std::string& n : w->used) {
        ++reads[n];
        mine += ck->inventory().Find(n)->bytes();
        const auto [layer, expert] = LayerExpert(n);
        if (layer >= 0) {
          EXPECT_EQ(layer, stage) << n;
        }
        if (expert >= 0) {
          EXPECT_TRUE(expert >= 4 * ep && expert < 4 * ep + 4) << n;
        }
        if (n == "model.embed_tokens.weight") {
          EXPECT_EQ(stage, 0);
        }
        if (n == "lm_head.weight" || n == "model.norm.weight") {
          EXPECT_EQ(stage, 1);
        }
      }
      EXPECT_EQ(ck->touched_bytes(), mine);
      EXPECT_LT(mine, total / 2) << "stage " << stage << " ep " << ep;
      std::printf("rank stage=%lld ep=%lld: %llu of %llu bytes\n", static_cast<long long>(stage),
                  static_cast<long long>(ep), static_cast<unsigned long long>(mine), static_cast<unsigned long long>(total));
    }
  }
  // Every tensor is read by some rank; routed experts by exactly one, the rest by each of the 2 EP ranks.
  Expected<SafetensorsCheckpoint> ck = SafetensorsCheckpoint::Open(dir);
  for (const TensorInfo& ti : ck->inventory().tensors) {
    ASSERT_TRUE(reads.count(ti.name)) << ti.name;
    EXPECT_EQ(reads[ti.name], LayerExpert(ti.name).second >= 0 ? 1 : 2) << ti.name;
  }
}

}  // namespace
}  // namespace onboard
