// Tensor-parallel shards (Megatron's column/row split): summing the tp ranks' attention and MLP
// outputs (the all-reduce) reproduces the full layer, for GQA (llama), MLA (deepseek_v3), sinks
// (gpt_oss) and partial-RoPE GQA (glm4_moe); the fused linear_qkv / linear_fc1 shards follow
// Megatron's per-group order. A wrong shard (another rank's k/v group, the o bias on every rank)
// must break the sum. Loading by TP plan (HfTpLoad.*): a rank reads only its rows / columns from the
// mapping and gets exactly TpShardLayer's shard.
#include <gtest/gtest.h>

#include <set>

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

// Every weight tensor of a layer (undefined where the family has none), in a fixed order.
std::vector<torch::Tensor> LayerTensors(const HfLayerWeights& l) {
  const HfAttentionWeights& a = l.attn;
  std::vector<torch::Tensor> t = {l.input_norm,
                                  l.post_norm,
                                  a.q.w,
                                  a.q.b,
                                  a.k.w,
                                  a.k.b,
                                  a.v.w,
                                  a.v.b,
                                  a.o.w,
                                  a.o.b,
                                  a.q_norm,
                                  a.k_norm,
                                  a.sinks,
                                  a.q_a.w,
                                  a.q_b.w,
                                  a.kv_a.w,
                                  a.kv_b.w,
                                  a.q_a_norm,
                                  a.kv_a_norm,
                                  l.experts.router.w,
                                  l.experts.router.b,
                                  l.experts.score_bias};
  auto mlp = [&](const HfMlpWeights& m) {
    for (const HfLinear* x : {&m.gate, &m.up, &m.down}) t.insert(t.end(), {x->w, x->b});
  };
  mlp(l.mlp);
  for (const HfMlpWeights& e : l.experts.experts) mlp(e);
  mlp(l.experts.shared);
  return t;
}

// Bytes of BF16 storage the weights hold (each distinct tensor once): what a rank must read, no more.
uint64_t HeldBf16Bytes(const HfModelWeights& w, const std::vector<std::vector<torch::Tensor>>& layers) {
  std::set<const void*> seen;
  uint64_t b = 0;
  auto add = [&](const torch::Tensor& t) {
    if (t.defined() && seen.insert(t.data_ptr()).second) b += 2 * uint64_t(t.numel());
  };
  for (const torch::Tensor& t : {w.embed, w.final_norm, w.lm_head}) add(t);
  for (const auto& l : layers)
    for (const torch::Tensor& t : l) add(t);
  return b;
}

TEST(HfTpLoad, EachRankReadsOnlyItsRowsOrColumns) {
  const hftest::Checkpoint cases[] = {hftest::MakeDense("qwen2"), hftest::MakeDeepSeekV3(),
                                      hftest::MakeGptOss(false), hftest::MakeGlm4Moe()};
  for (const hftest::Checkpoint& c : cases) {
    const std::string dir = hftest::TempDir();
    c.Write(dir, 2);
    Expected<HfForwardConfig> cfg = ReadHfForwardConfig(dir);
    Expected<SafetensorsCheckpoint> whole = SafetensorsCheckpoint::Open(dir);
    ASSERT_TRUE(cfg.ok() && whole.ok());
    Expected<HfModelWeights> full = MapHfWeights(*cfg, *whole, {}, torch::kDouble);
    ASSERT_TRUE(full.ok()) << full.status().message();
    const std::string& type = cfg->ir.model_type;
    const std::vector<int64_t> tps =
        type == "deepseek_v3" ? std::vector<int64_t>{2, 4} : std::vector<int64_t>{2};
    for (int64_t tp : tps) {
      for (int64_t r = 0; r < tp; ++r) {
        Expected<SafetensorsCheckpoint> ck = SafetensorsCheckpoint::Open(dir);  // each rank maps on its own
        ASSERT_TRUE(ck.ok());
        HfRankSlice s;
        s.tp = tp;
        s.tp_rank = r;
        Expected<HfModelWeights> w = MapHfSlice(*cfg, *ck, s, torch::kDouble);
        ASSERT_TRUE(w.ok()) << w.status().message();
        // Step 1: the rank's tensors are TpShardLayer's shard of the whole layer, bit for bit.
        std::vector<std::vector<torch::Tensor>> mine, cut;
        for (size_t i = 0; i < w->layers.size(); ++i) {
          mine.push_back(LayerTensors(w->layers[i]));
          cut.push_back(LayerTensors(TpShardLayer(cfg->ir.layers[i], full->layers[i], tp, r).weights));
          for (size_t k = 0; k < mine[i].size(); ++k) {
            ASSERT_EQ(mine[i][k].defined(), cut[i][k].defined()) << type << " layer " << i << " tensor " << k;
            if (mine[i][k].defined()) {
              EXPECT_TRUE(torch::equal(mine[i][k], cut[i][k])) << type << " layer " << i << " tensor " << k;
            }
          }
        }
        // Step 2: bytes read from the mapping = bytes the rank holds (whole-then-slice would read more).
        EXPECT_EQ(ck->touched_bytes(), HeldBf16Bytes(*w, mine)) << type << " tp=" << tp << " rank " << r;
        EXPECT_LT(ck->touched_bytes(), whole->touched_bytes()) << type;
        // The negative: the whole tensors that the old path read exceed what the shard holds.
        EXPECT_GT(whole->touched_bytes(), HeldBf16Bytes(*w, cut)) << type;
        if (r == 0 && tp == 2)
          std::printf("%s tp=2 rank 0 read %llu of %llu bytes\n", type.c_str(),
                      static_cast<unsigned long long>(ck->touched_bytes()),
                      static_cast<unsigned long long>(whole->touched_bytes()));
      }
    }
  }
}

// Windows: overlapping windows count their common bytes once; a window leaving the tensor is named.
TEST(HfTpLoad, WindowBytesCountOnceAndOutOfRangeIsNamed) {
  const std::string dir = hftest::TempDir();
  hftest::MakeDense("llama").Write(dir);
  Expected<SafetensorsCheckpoint> ck = SafetensorsCheckpoint::Open(dir);
  ASSERT_TRUE(ck.ok());
  const std::string n = "model.layers.0.self_attn.o_proj.weight";
  const TensorInfo* t = ck->inventory().Find(n);
  const int64_t rows = t->shape[0], cols = t->shape[1];
  ASSERT_TRUE(ck->GetWindow(n, 0, rows, 0, cols / 2).ok());
  EXPECT_EQ(ck->touched_bytes(), uint64_t(rows * cols / 2 * 2));
  ASSERT_TRUE(ck->GetWindow(n, 0, 1, 0, cols).ok());  // row 0: its second half is new
  EXPECT_EQ(ck->touched_bytes(), uint64_t((rows * cols / 2 + cols / 2) * 2));
  ASSERT_TRUE(ck->Get(n).ok());
  EXPECT_EQ(ck->touched_bytes(), t->bytes());
  Expected<WeightWindow> bad = ck->GetWindow(n, rows - 1, 2, 0, cols);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find(n), std::string::npos) << bad.status().message();
}

}  // namespace
}  // namespace onboard
