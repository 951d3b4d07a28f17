// ComputeStats / SummarizeLayers / dtype helpers on hand-built IRs, checked against hand arithmetic.
#include <gtest/gtest.h>

#include "core/model_ir.h"

namespace onboard {
namespace {

AttentionSpec Gqa(int64_t heads, int64_t kv, int64_t d) {
  AttentionSpec a;
  a.kind = kv == heads ? MixerKind::kMHA : MixerKind::kGQA;
  a.num_heads = heads;
  a.num_kv_heads = kv;
  a.head_dim = d;
  a.v_head_dim = d;
  return a;
}

ModelIR Dense(int64_t layers, int64_t h, const AttentionSpec& a, int64_t ffn) {
  ModelIR m;
  m.vocab = 1000;
  m.hidden = h;
  for (int64_t i = 0; i < layers; ++i) {
    LayerSpec l;
    l.index = i;
    l.attn = a;
    l.mlp.intermediate = ffn;
    m.layers.push_back(l);
  }
  return m;
}

TEST(ModelStats, DenseGqaParamsByHand) {
  const ModelIR m = Dense(2, 256, Gqa(8, 2, 32), 688);
  const ModelStats s = ComputeStats(m, 128);
  const int64_t attn = 256 * 256 + 2 * 256 * 64 + 256 * 256;
  const int64_t mlp = 3 * 256 * 688;
  EXPECT_EQ(s.layers[0].attn_params, attn);
  EXPECT_EQ(s.layers[0].channel_params, mlp);
  EXPECT_EQ(s.layers[0].params, attn + mlp + 2 * 256);
  // The llama_gqa_tiny ONNX fixture's truth: 3283200 with untied embeddings of vocab 1000, 4 layers.
  const ModelIR tiny = Dense(4, 256, Gqa(8, 2, 32), 688);
  EXPECT_EQ(ComputeStats(tiny, 128).total_params, 3283200);
  EXPECT_EQ(s.active_params, s.total_params);
}

TEST(ModelStats, MoeActiveCountsTopKAndShared) {
  ModelIR m = Dense(1, 64, Gqa(4, 4, 16), 128);
  LayerSpec& l = m.layers[0];
  l.channel = ChannelKind::kMoE;
  l.moe.num_experts = 8;
  l.moe.top_k = 2;
  l.moe.num_shared = 1;
  l.moe.shared_intermediate = 32;
  l.moe.expert_intermediate = 16;
  const ModelStats s = ComputeStats(m, 16);
  const int64_t expert = 3 * 64 * 16;
  EXPECT_EQ(s.layers[0].expert_params, 8 * expert);
  EXPECT_EQ(s.layers[0].params - s.layers[0].active_params, 6 * expert);
  EXPECT_EQ(s.layers[0].channel_params, 64 * 8 + 8 * expert + 3 * 64 * 32);
  // Latent MoE: experts at the latent width plus the down/up projections and the latent norm.
  l.moe.latent_dim = 32;
  l.moe.latent_norm = true;
  const ModelStats t = ComputeStats(m, 16);
  EXPECT_EQ(t.layers[0].channel_params, 64 * 8 + 8 * 3 * 32 * 16 + 2 * 64 * 32 + 32 + 3 * 64 * 32);
}

TEST(ModelStats, FlopsFullSlidingDsaKda) {
  AttentionSpec full = Gqa(8, 8, 64);
  ModelIR m = Dense(1, 512, full, 1024);
  const int64_t n = 4096;
  ModelStats s = ComputeStats(m, n);
  EXPECT_DOUBLE_EQ(s.layers[0].attn_flops_per_token, 4.0 * 8 * 64 * (n + 1) / 2.0);
  EXPECT_DOUBLE_EQ(s.layers[0].flops_per_token, 2.0 * s.layers[0].active_params + s.layers[0].attn_flops_per_token);
  EXPECT_DOUBLE_EQ(s.flops_per_token, s.layers[0].flops_per_token + 2.0 * 1000 * 512);
  // Sliding window W: mean over t of min(t, W).
  m.layers[0].attn.kind = MixerKind::kSlidingWindow;
  m.layers[0].attn.window = 128;
  s = ComputeStats(m, n);
  const double w_avg = (128.0 * 129 / 2 + (n - 128) * 128.0) / n;
  EXPECT_DOUBLE_EQ(s.layers[0].attn_flops_per_token, 4.0 * 8 * 64 * w_avg);
  // DSA on GQA: indexer quadratic term + attention over min(topk, t) keys.
  m.layers[0].attn.kind = MixerKind::kDSA;
  m.layers[0].attn.dsa_base = MixerKind::kGQA;
  m.layers[0].attn.window = 0;
  m.layers[0].attn.index_heads = 4;
  m.layers[0].attn.index_head_dim = 32;
  m.layers[0].attn.index_topk = 256;
  s = ComputeStats(m, n);
  const double k_avg = (256.0 * 257 / 2 + (n - 256) * 256.0) / n;
  EXPECT_DOUBLE_EQ(s.layers[0].attn_flops_per_token,
                   2.0 * 4 * 32 * (n + 1) / 2.0 + 2.0 * 4 * (n + 1) / 2.0 + 4.0 * 8 * 64 * k_avg);
  // KDA: per-token cost independent of seq.
  AttentionSpec kda;
  kda.kind = MixerKind::kKDA;
  kda.num_heads = kda.num_kv_heads = 4;
  kda.head_dim = kda.v_head_dim = 64;
  kda.conv_kernel = 4;
  m.layers[0].attn = kda;
  const double short_seq = ComputeStats(m, 1024).layers[0].attn_flops_per_token;
  EXPECT_DOUBLE_EQ(short_seq, ComputeStats(m, 1 << 20).layers[0].attn_flops_per_token);
  EXPECT_DOUBLE_EQ(short_seq, 4 * (6.0 * 64 * 64 + 3.0 * 64 * 64 + 64.0 * 64) + 2.0 * 4 * (3 * 4 * 64));
}

TEST(ModelStats, ActivationBytesMatchKorthikantiForStandardLayer) {
  // MHA, non-gated 4h MLP: 34h per token in Korthikanti et al. minus 2h of dropout masks = 32h.
  const int64_t h = 1024;
  ModelIR m = Dense(1, h, Gqa(16, 16, 64), 4 * h);
  m.layers[0].mlp.gated = false;
  m.layers[0].mlp.act = Activation::kGELU;
  const double b = ComputeStats(m, 2048).layers[0].act_bytes_per_token;
  EXPECT_DOUBLE_EQ(b, 32.0 * h + 4 * 16);  // + fp32 log-sum-exp per head
}

TEST(ModelStats, WeightBytesByDtype) {
  ModelIR m = Dense(1, 64, Gqa(4, 4, 16), 128);
  m.expert_dtype = DType::kFP8;
  LayerSpec& l = m.layers[0];
  l.channel = ChannelKind::kMoE;
  l.moe.num_experts = 4;
  l.moe.top_k = 1;
  l.moe.expert_intermediate = 32;
  const ModelStats s = ComputeStats(m, 16);
  double fp8 = 0, total = 0;
  for (const auto& [dt, b] : s.weight_bytes_by_dtype) {
    if (dt == DType::kFP8) fp8 = b;
    total += b;
  }
  EXPECT_DOUBLE_EQ(fp8, 4.0 * 3 * 64 * 32);
  EXPECT_DOUBLE_EQ(total, s.weight_bytes);
  EXPECT_DOUBLE_EQ(total, fp8 + 2.0 * (s.total_params - 4 * 3 * 64 * 32));
}

TEST(ModelStats, OverflowDetected) {
  ModelIR m = Dense(1, int64_t{1} << 31, Gqa(1 << 20, 1 << 20, int64_t{1} << 31), int64_t{1} << 31);
  EXPECT_FALSE(ModelSizeFitsInt64(m));
  EXPECT_TRUE(ModelSizeFitsInt64(Dense(2, 256, Gqa(8, 2, 32), 688)));
}

TEST(ModelStats, SummaryFoldsRuns) {
  AttentionSpec kda;
  kda.kind = MixerKind::kKDA;
  kda.num_heads = 4;
  kda.head_dim = 64;
  AttentionSpec mla;
  mla.kind = MixerKind::kMLA;
  mla.num_heads = 4;
  mla.kv_lora_rank = 64;
  ModelIR m = Dense(9, 256, kda, 512);
  for (int64_t i = 1; i < 9; ++i) {
    m.layers[i].channel = ChannelKind::kMoE;
    m.layers[i].moe.num_experts = 16;
    m.layers[i].moe.top_k = 2;
    m.layers[i].moe.expert_intermediate = 64;
    if ((i + 1) % 4 == 0) m.layers[i].attn = mla;
  }
  const auto lines = SummarizeLayers(m);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].rfind("1: KDA", 0), 0u) << lines[0];
  EXPECT_EQ(lines[1].rfind("2-9: 6 KDA", 0), 0u) << lines[1];
  EXPECT_NE(lines[1].find("+ 2 MLA"), std::string::npos) << lines[1];
  EXPECT_NE(lines[1].find("MoE 16x top-2"), std::string::npos) << lines[1];
}

TEST(ModelIr, DtypeNamesAndSizes) {
  EXPECT_EQ(ParseDType("bfloat16"), DType::kBF16);
  EXPECT_EQ(ParseDType("BF16"), DType::kBF16);
  EXPECT_EQ(ParseDType("torch.float16"), DType::kF16);
  EXPECT_EQ(ParseDType("F8_E4M3"), DType::kFP8);
  EXPECT_EQ(ParseDType("mxfp4"), DType::kMXFP4);
  EXPECT_EQ(ParseDType("what"), DType::kUnknown);
  EXPECT_DOUBLE_EQ(DTypeBytes(DType::kMXFP4), 0.53125);
  for (DType d : {DType::kF32, DType::kF16, DType::kBF16, DType::kFP8, DType::kMXFP4, DType::kI8, DType::kU8,
                  DType::kI32, DType::kI64, DType::kBool, DType::kF64})
    EXPECT_EQ(ParseDType(DTypeName(d)), d) << DTypeName(d);
  EXPECT_STREQ(MixerKindName(MixerKind::kDSA), "DSA");
  EXPECT_STREQ(ActivationName(Activation::kSiTU), "situ");
}

}  // namespace
}  // namespace onboard
