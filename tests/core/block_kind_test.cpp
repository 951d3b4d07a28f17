// BlockKind (core/block_kind.h): every layer kind maps to one block kind whose name is the layer
// kind's own (MixerKindName / ChannelKindName), parsed back by the one parser; ValidatePlan refuses a
// Plan::recompute key that names no block kind (it would feed nothing), and takes "*".
#include <gtest/gtest.h>

#include "core/block_kind.h"
#include "core/plan.h"

namespace onboard {
namespace {

TEST(BlockKind, EveryLayerKindHasOneBlockKindNamedLikeIt) {
  for (MixerKind m : {MixerKind::kMHA, MixerKind::kGQA, MixerKind::kMLA, MixerKind::kDSA, MixerKind::kKDA,
                      MixerKind::kGatedDeltaNet, MixerKind::kLinearAttention, MixerKind::kSlidingWindow}) {
    const BlockKind k = MixerBlockKind(m);
    EXPECT_STREQ(BlockKindName(k), MixerKindName(m));
    ASSERT_TRUE(ParseBlockKind(MixerKindName(m)).has_value()) << MixerKindName(m);
    EXPECT_EQ(*ParseBlockKind(MixerKindName(m)), k);
  }
  EXPECT_EQ(ChannelBlockKind(ChannelKind::kMoE), BlockKind::kMoE);
  EXPECT_EQ(ChannelBlockKind(ChannelKind::kDenseMLP), BlockKind::kMLP);
  EXPECT_EQ(*ParseBlockKind("MoE"), BlockKind::kMoE);
  EXPECT_EQ(*ParseBlockKind("MLP"), BlockKind::kMLP);
  EXPECT_NE(MixerBlockKind(MixerKind::kMLA), MixerBlockKind(MixerKind::kDSA));
  for (const char* bad : {"*", "head", "moe", "MOE", "attention", ""})
    EXPECT_FALSE(ParseBlockKind(bad)) << bad;
}

TEST(BlockKind, PlanRecomputeKeyNamingNoBlockKindIsRefused) {
  Plan p;
  p.deg.dp_shard = 2;
  p.micro_batch = 1;
  p.num_micro_batches = 1;
  p.seq = 16;
  p.recompute = {
      {"*", Recompute::kFull}, {"MoE", Recompute::kSelective}, {"GatedDeltaNet", Recompute::kNone}};
  EXPECT_TRUE(ValidatePlan(p, 2, 0, 0, 4).ok()) << ValidatePlan(p, 2, 0, 0, 4).ToString();
  p.recompute["MOE"] = Recompute::kFull;  // a typo: read by nothing
  const Status st = ValidatePlan(p, 2, 0, 0, 4);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(ExitCodeFor(st.code()), 2);
  EXPECT_NE(st.message().find("recompute key 'MOE'"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("MoE"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace onboard
