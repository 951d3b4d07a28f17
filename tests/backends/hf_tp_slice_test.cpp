// Tensor-parallel shards (Megatron's column/row split): summing the tp ranks' attention and MLP
// outputs (the all-reduce) reproduces the full layer, for GQA (llama), MLA (deepseek_v3), sinks
// (gpt_oss), partial-RoPE GQA (glm4_moe) and KDA (kimi_linear, by KDA heads); the fused linear_qkv /
// linear_fc1 shards follow Megatron's per-group order. A wrong shard (another rank's k/v group, the o bias on
// every rank) must break the sum. Loading by TP plan (HfTpLoad.*): a rank reads only its rows / columns from
// the mapping and gets exactly TpShardLayer's shard.
#include <gtest/gtest.h>

#include <functional>

#include "tests/backends/hf_compare.h"
#include "tests/backends/hf_slice_util.h"
#include "tests/backends/hf_test_families.h"
#include "tests/backends/hf_test_kimi_k3.h"

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

// Edits one layer's tp shards (a wrong shard for the negatives); gets the whole layer too.
using Corrupt = std::function<void(std::vector<HfTpLayer>&, const HfLayerWeights&)>;

// Logits with every layer run as tp shards whose attention and channel outputs are summed (the
// all-reduce); MoE routed experts split (`expert_tp`) or owned whole per rank.
torch::Tensor TpLogits(const Loaded& m, int64_t tp, const Corrupt& corrupt = nullptr, bool expert_tp = true) {
  torch::NoGradGuard g;
  const HfForwardConfig& c = m.cfg;
  torch::Tensor h = m.w.embed.index_select(0, torch::tensor(hftest::kIds, torch::kLong));
  for (const HfLayerWeights& lw : m.w.layers) {
    const LayerSpec& l = c.ir.layers[size_t(lw.index)];
    EXPECT_TRUE(CheckTpDivides(c, l, tp, expert_tp).ok());
    std::vector<HfTpLayer> shards;
    for (int64_t r = 0; r < tp; ++r) shards.push_back(TpShardLayer(l, lw, tp, r, expert_tp));
    if (corrupt) corrupt(shards, lw);
    const torch::Tensor x = HfRmsNorm(h, lw.input_norm, c.rms_eps);
    torch::Tensor attn = torch::zeros_like(h);
    for (const HfTpLayer& s : shards) attn = attn + HfAttention(c, s.spec, s.weights.attn, x);
    h = h + attn;
    const torch::Tensor n = HfRmsNorm(h, lw.post_norm, c.rms_eps);
    for (const HfTpLayer& s : shards)
      h = h + (lw.moe ? HfMoe(c, s.spec.moe, s.weights.experts, n) : HfMlp(c, n, s.weights.mlp));
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

// MoE under TP: routed experts split per expert (ETP = TP) or owned whole per TP rank (EP folded over
// TP), shared experts split; the ranks' MoE outputs sum to the full channel.
TEST(HfTpSlice, MoeShardsSumToTheFullChannel) {
  const hftest::Checkpoint cases[] = {hftest::MakeQwen3Moe(), hftest::MakeMixtral(), hftest::MakeDeepSeekV3(),
                                      hftest::MakeGlm4Moe(), hftest::MakeGptOss(true)};
  for (const hftest::Checkpoint& c : cases) {
    const Loaded m = Load(c);
    for (bool etp : {true, false})
      EXPECT_LT(Diff(m, TpLogits(m, 2, nullptr, etp)), hftest::kF64Tol)
          << m.cfg.ir.model_type << " etp=" << etp;
  }
  // The negatives: routed experts whole on every TP rank (the old layout) are counted tp times, and
  // the shared expert whole on every rank too.
  const Loaded ds = Load(hftest::MakeDeepSeekV3());
  EXPECT_GT(Diff(ds, TpLogits(ds, 2,
                              [](std::vector<HfTpLayer>& s, const HfLayerWeights& whole) {
                                for (HfTpLayer& r : s) r.weights.experts.experts = whole.experts.experts;
                              })),
            hftest::kWrongAtLeast);
  EXPECT_GT(Diff(ds, TpLogits(ds, 2,
                              [](std::vector<HfTpLayer>& s, const HfLayerWeights& whole) {
                                for (HfTpLayer& r : s) r.weights.experts.shared = whole.experts.shared;
                              })),
            hftest::kWrongAtLeast);
}

TEST(HfTpSlice, WrongShardBreaksTheSum) {
  const Loaded m = Load(hftest::MakeDense("qwen2"));
  // rank 1 holding rank 0's k/v group
  EXPECT_GT(Diff(m, TpLogits(m, 2,
                             [](std::vector<HfTpLayer>& s, const HfLayerWeights&) {
                               s[1].weights.attn.k = s[0].weights.attn.k;
                             })),
            hftest::kWrongAtLeast);
  // the row-parallel o bias on both ranks (qwen2 has no o bias: use gpt-oss)
  const Loaded g = Load(hftest::MakeGptOss(true));
  EXPECT_GT(Diff(g, TpLogits(g, 2,
                             [](std::vector<HfTpLayer>& s, const HfLayerWeights&) {
                               s[1].weights.attn.o.b = s[0].weights.attn.o.b;
                             })),
            hftest::kWrongAtLeast);
}

// KDA (Kimi-Linear) by KDA heads: q/k/v and their short convolutions, A_log / dt_bias, f_b, b_proj and
// g_b split, f_a / g_a / o_norm replicated, o_proj row-parallel; the MLA layer and the MoE as before.
// 2 KDA heads over 2 ranks, 4 heads over 2 and 4 ranks, routed experts split or owned whole.
TEST(HfTpSlice, KdaShardsSumToTheFullForward) {
  const Loaded two = Load(hftest::MakeKimiLinear(2)), four = Load(hftest::MakeKimiLinear(4));
  for (bool etp : {true, false}) {
    EXPECT_LT(Diff(two, TpLogits(two, 2, nullptr, etp)), hftest::kF64Tol) << "2 heads etp=" << etp;
    for (int64_t tp : {2, 4})
      EXPECT_LT(Diff(four, TpLogits(four, tp, nullptr, etp)), hftest::kF64Tol)
          << "tp=" << tp << " etp=" << etp;
  }
  std::printf("kimi_linear tp=2 |sum of shards - full| = %.3g, tp=4 %.3g\n", Diff(two, TpLogits(two, 2)),
              Diff(four, TpLogits(four, 4)));
}

// The negatives: on every KDA layer rank 1 holds one of rank 0's per-head pieces.
TEST(HfTpSlice, WrongKdaShardBreaksTheSum) {
  const Loaded m = Load(hftest::MakeKimiLinear(2));
  using Edit = std::function<void(HfAttentionWeights&, const HfAttentionWeights&)>;
  const std::pair<const char*, Edit> wrong[] = {
      {"rank 0's heads", [](HfAttentionWeights& r1, const HfAttentionWeights& r0) { r1 = r0; }},
      {"rank 0's q/k/v",
       [](HfAttentionWeights& r1, const HfAttentionWeights& r0) {
         r1.q = r0.q, r1.k = r0.k, r1.v = r0.v;
         r1.q_conv = r0.q_conv, r1.k_conv = r0.k_conv, r1.v_conv = r0.v_conv;
       }},
      {"dt_bias not split (rank 0's)",
       [](HfAttentionWeights& r1, const HfAttentionWeights& r0) { r1.dt_bias = r0.dt_bias; }},
      {"A_log not split (rank 0's)",
       [](HfAttentionWeights& r1, const HfAttentionWeights& r0) { r1.a_log = r0.a_log; }},
      {"b_proj (beta) of rank 0",
       [](HfAttentionWeights& r1, const HfAttentionWeights& r0) { r1.beta = r0.beta; }},
      {"g_b of rank 0", [](HfAttentionWeights& r1, const HfAttentionWeights& r0) { r1.g_b = r0.g_b; }},
  };
  for (const auto& [name, edit] : wrong) {
    const double d = Diff(m, TpLogits(m, 2, [&edit = edit](std::vector<HfTpLayer>& s, const HfLayerWeights&) {
                            if (s[0].spec.attn.kind == MixerKind::kKDA)
                              edit(s[1].weights.attn, s[0].weights.attn);
                          }));
    std::printf("kimi_linear tp=2 with %s: %.3g\n", name, d);
    EXPECT_GT(d, hftest::kWrongAtLeast) << name;
  }
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
  // KDA: 2 heads over 4 ranks names the KDA head count and tp (the MLA layer's 4 heads divide).
  const Loaded k = Load(hftest::MakeKimiLinear(2));
  const LayerSpec& kda = k.cfg.ir.layers[0];
  ASSERT_EQ(kda.attn.kind, MixerKind::kKDA);
  EXPECT_TRUE(CheckTpDivides(k.cfg, kda, 2).ok());
  const Status t = CheckTpDivides(k.cfg, kda, 4);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.code(), ErrorCode::kBadInput);
  EXPECT_NE(t.message().find("linear_attn_config.num_heads"), std::string::npos) << t.message();
  EXPECT_NE(t.message().find("tp=4"), std::string::npos) << t.message();
  EXPECT_TRUE(CheckTpDivides(k.cfg, k.cfg.ir.layers[2], 4).ok());  // the MLA layer
}

struct LoadCase {
  hftest::Checkpoint ckpt;
  std::vector<int64_t> tps;
  bool expert_tp = true;  // false: EP folded over the TP group
  bool mxfp4 = false;
};

// Each TP rank of each case maps its slice on its own; its tensors must be TpShardLayer's shard of the
// whole load bit for bit, and the bytes it read from the mapping exactly the bytes it holds.
void CheckRanksReadOnlyTheirSlice(const LoadCase& lc) {
  const std::string dir = hftest::TempDir();
  lc.ckpt.Write(dir, 2);
  Expected<HfForwardConfig> cfg = ReadHfForwardConfig(dir);
  Expected<SafetensorsCheckpoint> whole = SafetensorsCheckpoint::Open(dir);
  ASSERT_TRUE(cfg.ok() && whole.ok());
  Expected<HfModelWeights> full = MapHfWeights(*cfg, *whole, {}, torch::kDouble);
  ASSERT_TRUE(full.ok()) << full.status().message();
  const std::string type = cfg->ir.model_type + (lc.expert_tp ? " etp" : " ep-over-tp");
  for (int64_t tp : lc.tps) {
    for (const LayerSpec& l : cfg->ir.layers)
      ASSERT_TRUE(CheckTpDivides(*cfg, l, tp, lc.expert_tp).ok()) << type;
    for (int64_t r = 0; r < tp; ++r) {
      Expected<SafetensorsCheckpoint> ck = SafetensorsCheckpoint::Open(dir);  // each rank maps on its own
      ASSERT_TRUE(ck.ok());
      HfRankSlice s;
      s.tp = tp;
      s.tp_rank = r;
      s.expert_tp = lc.expert_tp;
      Expected<HfModelWeights> w = MapHfSlice(*cfg, *ck, s, torch::kDouble);
      ASSERT_TRUE(w.ok()) << w.status().message();
      // Step 1: the rank's tensors are TpShardLayer's shard of the whole layer, bit for bit.
      std::vector<std::vector<torch::Tensor>> mine, cut;
      std::vector<HfLayerWeights> cut_layers;
      for (size_t i = 0; i < w->layers.size(); ++i) {
        cut_layers.push_back(TpShardLayer(cfg->ir.layers[i], full->layers[i], tp, r, lc.expert_tp).weights);
        mine.push_back(hftest::LayerTensors(w->layers[i]));
        cut.push_back(hftest::LayerTensors(cut_layers.back()));
        for (size_t k = 0; k < mine[i].size(); ++k) {
          ASSERT_EQ(mine[i][k].defined(), cut[i][k].defined()) << type << " layer " << i << " tensor " << k;
          if (mine[i][k].defined()) {
            EXPECT_TRUE(torch::equal(mine[i][k], cut[i][k])) << type << " layer " << i << " tensor " << k;
          }
        }
      }
      // Step 2: bytes read from the mapping = bytes the rank holds (whole-then-slice would read more).
      EXPECT_EQ(ck->touched_bytes(), hftest::HeldBytes(*w, mine, w->layers, lc.mxfp4))
          << type << " tp=" << tp << " rank " << r;
      EXPECT_LT(ck->touched_bytes(), whole->touched_bytes()) << type;
      // The negative: the whole tensors that the old path read exceed what the shard holds.
      EXPECT_GT(whole->touched_bytes(), hftest::HeldBytes(*w, cut, cut_layers, lc.mxfp4)) << type;
      if (r == 0 && tp == 2)
        std::printf("%s tp=2 rank 0 read %llu of %llu bytes\n", type.c_str(),
                    static_cast<unsigned long long>(ck->touched_bytes()),
                    static_cast<unsigned long long>(whole->touched_bytes()));
    }
  }
}

TEST(HfTpLoad, EachRankReadsOnlyItsRowsOrColumns) {
  CheckRanksReadOnlyTheirSlice({hftest::MakeDense("qwen2"), {2}});
  CheckRanksReadOnlyTheirSlice({hftest::MakeDeepSeekV3(), {2, 4}});
  CheckRanksReadOnlyTheirSlice({hftest::MakeGlm4Moe(), {2}});
  // KDA: convs and dt_bias by rows, A_log [1, 1, H, 1] by its head columns, shared experts split.
  CheckRanksReadOnlyTheirSlice({hftest::MakeKimiLinear(4), {2, 4}});
  CheckRanksReadOnlyTheirSlice({hftest::MakeKimiLinear(2), {2}, false});
}

// MoE under TP: routed experts by expert TP (gate/up rows, down columns of every expert) or whole
// experts per TP rank (EP folded over TP; gpt-oss's fused [E, ...] tensors by expert rows, MXFP4 too);
// shared experts split either way.
TEST(HfTpLoad, MoeRanksReadOnlyTheirExpertSlices) {
  CheckRanksReadOnlyTheirSlice({hftest::MakeQwen3Moe(), {2}});
  CheckRanksReadOnlyTheirSlice({hftest::MakeMixtral(), {2}});
  CheckRanksReadOnlyTheirSlice({hftest::MakeDeepSeekV3(), {2, 4}, false});
  CheckRanksReadOnlyTheirSlice({hftest::MakeQwen3Moe(), {2}, false});
  CheckRanksReadOnlyTheirSlice({hftest::MakeGptOss(false), {2}, false});
  CheckRanksReadOnlyTheirSlice({hftest::MakeGptOss(true), {2}, false, true});
  // gpt-oss's fused experts under expert TP: each rank reads its intermediate slice of every expert
  // (gate_up's interleaved column pairs, down's rows; MXFP4 by whole 32-value blocks: I = 64 at tp 2).
  CheckRanksReadOnlyTheirSlice({hftest::MakeGptOss(false), {2}, true});
  CheckRanksReadOnlyTheirSlice({hftest::MakeGptOss(true, 64), {2}, true, true});
  // kimi_k3: Kimi's experts split or owned, the latent projections and norm whole on every rank.
  CheckRanksReadOnlyTheirSlice({hftest::MakeKimiK3(), {2}});
  CheckRanksReadOnlyTheirSlice({hftest::MakeKimiK3(), {2}, false});
}

// MXFP4 down_proj packs the intermediate in 32-value blocks: I = 32 over tp = 2 is half a block per
// rank, refused naming the tensor and the field.
TEST(HfTpLoad, GptOssMxfp4ExpertTpNeedsWholeBlocks) {
  const std::string dir = hftest::TempDir();
  hftest::MakeGptOss(true).Write(dir);
  Expected<HfForwardConfig> cfg = ReadHfForwardConfig(dir);
  Expected<SafetensorsCheckpoint> ck = SafetensorsCheckpoint::Open(dir);
  ASSERT_TRUE(cfg.ok() && ck.ok());
  HfRankSlice s;
  s.tp = 2;
  Expected<HfModelWeights> w = MapHfSlice(*cfg, *ck, s, torch::kDouble);
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), ErrorCode::kBadInput);
  EXPECT_NE(w.status().message().find("mlp.experts.down_proj"), std::string::npos) << w.status().message();
  EXPECT_NE(w.status().message().find("intermediate_size"), std::string::npos) << w.status().message();
}

// Split rules by name: shared experts (both namings) always, routed experts only under expert TP.
TEST(HfTpLoad, ExpertNamesSplitByRule) {
  const std::string l = "model.layers.3.";
  EXPECT_EQ(HfTpSplitOf(l + "mlp.experts.12.gate_proj.weight"), HfTpSplit::kRows);
  EXPECT_EQ(HfTpSplitOf(l + "mlp.experts.12.down_proj.weight"), HfTpSplit::kCols);
  EXPECT_EQ(HfTpSplitOf(l + "block_sparse_moe.experts.0.w3.weight"), HfTpSplit::kRows);
  EXPECT_EQ(HfTpSplitOf(l + "block_sparse_moe.experts.0.w2.weight"), HfTpSplit::kCols);
  EXPECT_EQ(HfTpSplitOf(l + "mlp.experts.12.gate_proj.weight", false), HfTpSplit::kWhole);
  EXPECT_EQ(HfTpSplitOf(l + "mlp.shared_expert.up_proj.weight", false), HfTpSplit::kRows);
  EXPECT_EQ(HfTpSplitOf(l + "mlp.shared_experts.down_proj.weight", false), HfTpSplit::kCols);
  EXPECT_EQ(HfTpSplitOf(l + "block_sparse_moe.shared_experts.gate_proj.weight", false), HfTpSplit::kRows);
  EXPECT_EQ(HfTpSplitOf(l + "block_sparse_moe.shared_experts.down_proj.weight", false), HfTpSplit::kCols);
  // KDA: per-head tensors split, the low-rank gate inputs and o_norm whole.
  EXPECT_EQ(HfTpSplitOf(l + "self_attn.A_log"), HfTpSplit::kCols);
  EXPECT_EQ(HfTpSplitOf(l + "self_attn.dt_bias"), HfTpSplit::kRows);
  EXPECT_EQ(HfTpSplitOf(l + "self_attn.v_conv1d.weight"), HfTpSplit::kRows);
  for (const char* n : {"self_attn.f_a_proj.weight", "self_attn.g_a_proj.weight", "self_attn.o_norm.weight"})
    EXPECT_EQ(HfTpSplitOf(l + n), HfTpSplit::kWhole) << n;
  // Not experts: the router, qwen2_moe's shared gate, gpt-oss's fused tensors, a name without an index.
  for (const char* n : {"mlp.gate.weight", "mlp.shared_expert_gate.weight", "mlp.experts.gate_up_proj_bias",
                        "mlp.experts..gate_proj.weight"})
    EXPECT_EQ(HfTpSplitOf(l + n), HfTpSplit::kWhole) << n;
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
