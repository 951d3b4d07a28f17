// Tensor-parallel shards (Megatron's column/row split): summing the tp ranks' attention and MLP
// outputs (the all-reduce) reproduces the full layer, for GQA (llama), MLA (deepseek_v3), sinks
// (gpt_oss) and partial-RoPE GQA (glm4_moe); the fused linear_qkv / linear_fc1 shards follow
// Megatron's per-group order. A wrong shard (another rank's k/v group, the o bias on every rank)
// must break the sum.
#include <gtest/gtest.h>

#include "tests/backends/hf_compare.h"
#include "tests/backends/hf_test_families.h"

namespace onboard {
namespace {

struct Loaded {
  HfForwardConfig cfg;
  HfModelWeights w;
};

Loaded Load(const hftest::Checkpoint& c) {
  const std::string dir = hftest::TempDir();
  c.Write(dir);
  Expected<HfForwardConfig> cfg = ReadHfForwardConfig(dir);
  EXPECT_TRUE(cfg.ok()) << cfg.status().message();
  Expected<SafetensorsCheckpoint> ck = SafetensorsCheckpoint::Open(dir);
  EXPECT_TRUE(ck.ok());
  Expected<HfModelWeights> w = MapHfWeights(*cfg, *ck, {}, torch::kDouble);
  EXPECT_TRUE(w.ok()) << w.status().message();
  return {*cfg, *w};
}

// Logits with every layer run as tp shards whose outputs are summed; `corrupt` edits the shards.
torch::Tensor TpLogits(const Loaded& m, int64_t tp, void (*corrupt)(std::vector<HfTpLayer>&) = nullptr) {
  torch::NoGradGuard g;
  const HfForwardConfig& c = m.cfg;
  torch::Tensor h = m.w.embed.index_select(0, torch::tensor(hftest::kIds, torch::kLong));
  for (const HfLayerWeights& lw : m.w.layers) {
    const LayerSpec& l = c.ir.layers[size_t(lw.index)];
    EXPECT_TRUE(CheckTpDivides(c, l, tp).ok());
    std::vector<HfTpLayer> shards;
    for (int64_t r = 0; r < tp; ++r) shards.push_back(TpShardLayer(l, lw, tp, r));
    if (corrupt) corrupt(shards);
    const torch::Tensor x = HfRmsNorm(h, lw.input_norm, c.rms_eps);
    torch::Tensor attn = torch::zeros_like(h);
    for (const HfTpLayer& s : shards) attn = attn + HfAttention(c, s.spec, s.weights.attn, x);
    h = h + attn;
    const torch::Tensor n = HfRmsNorm(h, lw.post_norm, c.rms_eps);
    if (!shards[0].channel_sharded) {
      h = h + HfMoe(c, l.moe, lw.experts, n);
      continue;
    }
    for (const HfTpLayer& s : shards) h = h + HfMlp(c, n, s.weights.mlp);
  }
  return torch::matmul(HfRmsNorm(h, m.w.final_norm, c.rms_eps), m.w.lm_head.t());
}

double Diff(const Loaded& m, const torch::Tensor& tp_logits) {
  return (HfForward(m.cfg, m.w, hftest::kIds) - tp_logits).abs().max().item<double>();
}

TEST(HfTpSlice, SumOfShardsReproducesTheFullForward) {
  const hftest::Checkpoint cases[] = {hftest::MakeDense("qwen2"), hftest::MakeDeepSeekV3(),
                                      hftest::MakeGptOss(true), hftest::MakeGlm4Moe()};
  for (const hftest::Checkpoint& c : cases) {
    const Loaded m = Load(c);
    for (int64_t tp : {1, 2})
      EXPECT_LT(Diff(m, TpLogits(m, tp)), hftest::kF64Tol) << m.cfg.ir.model_type << " tp=" << tp;
  }
  // 4 heads over 4 ranks of deepseek (MLA splits heads only).
  const Loaded ds = Load(hftest::MakeDeepSeekV3());
  EXPECT_LT(Diff(ds, TpLogits(ds, 4)), hftest::kF64Tol);
}

TEST(HfTpSlice, WrongShardBreaksTheSum) {
  const Loaded m = Load(hftest::MakeDense("qwen2"));
  // rank 1 holding rank 0's k/v group
  EXPECT_GT(
      Diff(m, TpLogits(m, 2, [](std::vector<HfTpLayer>& s) { s[1].weights.attn.k = s[0].weights.attn.k; })),
      hftest::kWrongAtLeast);
  // the row-parallel o bias on both ranks (qwen2 has no o bias: use gpt-oss)
  const Loaded g = Load(hftest::MakeGptOss(true));
  EXPECT_GT(
      Diff(g,
           TpLogits(g, 2, [](std::vector<HfTpLayer>& s) { s[1].weights.attn.o.b = s[0].weights.attn.o.b; })),
      hftest::kWrongAtLeast);
}

// linear_qkv rows per local group [q heads of the group, k, v]: split back, they are the rank's q/k/v.
TEST(HfTpSlice, MegatronFusedShardsFollowGroupOrder) {
  const Loaded m = Load(hftest::MakeDense("llama"));
  const LayerSpec& l = m.cfg.ir.layers[0];
  const HfLayerWeights& w = m.w.layers[0];
  const int64_t d = l.attn.head_dim, per = l.attn.num_heads / l.attn.num_kv_heads;
  for (int64_t r = 0; r < 2; ++r) {
    const torch::Tensor qkv = MegatronQkvShard(l.attn, w.attn, 2, r);
    const HfTpLayer s = TpShardLayer(l, w, 2, r);
    ASSERT_EQ(qkv.size(0), (per + 2) * d);  // one local group
    EXPECT_TRUE(torch::equal(qkv.narrow(0, 0, per * d), s.weights.attn.q.w));
    EXPECT_TRUE(torch::equal(qkv.narrow(0, per * d, d), s.weights.attn.k.w));
    EXPECT_TRUE(torch::equal(qkv.narrow(0, (per + 1) * d, d), s.weights.attn.v.w));
    const torch::Tensor fc1 = MegatronFc1Shard(w.mlp, 2, r);
    EXPECT_TRUE(torch::equal(fc1, torch::cat({s.weights.mlp.gate.w, s.weights.mlp.up.w}, 0)));
  }
  // The order matters: rank 1's fused shard is not rank 0's.
  EXPECT_FALSE(torch::equal(MegatronQkvShard(l.attn, w.attn, 2, 0), MegatronQkvShard(l.attn, w.attn, 2, 1)));
}

TEST(HfTpSlice, IndivisibleTpIsNamed) {
  const Loaded m = Load(hftest::MakeDense("llama"));
  const Status s = CheckTpDivides(m.cfg, m.cfg.ir.layers[0], 3);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("num_attention_heads"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace onboard
