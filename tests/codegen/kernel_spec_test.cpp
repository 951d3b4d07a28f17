// KdaSpec / DsaSpec validation and IR derivation: every bad parameter is kBadInput naming field + value.
#include <gtest/gtest.h>

#include <cmath>

#include "codegen/kernel_generator.h"
#include "codegen/kernel_spec.h"

namespace onboard::codegen {
namespace {

KdaSpec GoodKda() {
  KdaSpec s;
  s.num_heads = 4;
  s.num_v_heads = 8;
  s.head_dim = 128;
  s.v_head_dim = 128;
  s.chunk_size = 64;
  return s;
}

DsaSpec GoodDsa() {
  DsaSpec s;
  s.num_heads = 16;
  s.num_kv_heads = 1;
  s.head_dim = 576;
  s.v_head_dim = 512;
  s.index_heads = 32;
  s.index_head_dim = 128;
  s.topk = 2048;
  return s;
}

void ExpectBad(const Status& st, const std::string& field, const std::string& value) {
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), ErrorCode::kBadInput);
  EXPECT_NE(st.message().find("'" + field + "'"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("(got " + value + ")"), std::string::npos) << st.message();
}

TEST(KdaSpecTest, GoodSpecValidates) { EXPECT_TRUE(GoodKda().Validate().ok()); }

TEST(KdaSpecTest, BadParametersNameFieldAndValue) {
  KdaSpec s = GoodKda();
  s.head_dim = 0;
  ExpectBad(s.Validate(), "head_dim", "0");
  s = GoodKda();
  s.head_dim = 99;
  ExpectBad(s.Validate(), "head_dim", "99");
  s = GoodKda();
  s.v_head_dim = -2;
  ExpectBad(s.Validate(), "v_head_dim", "-2");
  s = GoodKda();
  s.chunk_size = 48;
  ExpectBad(s.Validate(), "chunk_size", "48");
  s = GoodKda();
  s.num_v_heads = 6;
  ExpectBad(s.Validate(), "num_v_heads", "6");
  s = GoodKda();
  s.num_heads = 0;
  ExpectBad(s.Validate(), "num_heads", "0");
  s = GoodKda();
  s.gate_lower_bound = -7;
  ExpectBad(s.Validate(), "gate_lower_bound", "-7");
  s = GoodKda();
  s.name = "x; system(\"rm\")";
  ExpectBad(s.Validate(), "name", "x; system(\"rm\")");
}

TEST(DsaSpecTest, BadParametersNameFieldAndValue) {
  EXPECT_TRUE(GoodDsa().Validate().ok());
  DsaSpec s = GoodDsa();
  s.topk = 0;
  ExpectBad(s.Validate(), "topk", "0");
  s.topk = -5;
  ExpectBad(s.Validate(), "topk", "-5");
  s = GoodDsa();
  s.head_dim = 577;
  ExpectBad(s.Validate(), "head_dim", "577");
  s = GoodDsa();
  s.num_kv_heads = 3;
  ExpectBad(s.Validate(), "num_kv_heads", "3");
  s = GoodDsa();
  s.block = 48;
  ExpectBad(s.Validate(), "block", "48");
  s = GoodDsa();
  s.index_head_dim = 0;
  ExpectBad(s.Validate(), "index_head_dim", "0");
}

TEST(KernelSpecTest, GeneratorRefusesBadSpecs) {
  KdaSpec s = GoodKda();
  s.chunk_size = 3;
  auto g = GenerateKda(s, {});
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), ErrorCode::kBadInput);
  TargetOptions t;
  t.target = KernelTarget::kCuda;
  t.cuda_arch = 75;
  auto c = GenerateKda(GoodKda(), t);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("75"), std::string::npos);
  EXPECT_FALSE(ParseKernelTarget("tpu").ok());
}

TEST(KernelSpecTest, FromAttentionKdaAndMlaDsa) {
  AttentionSpec a;
  a.kind = MixerKind::kKDA;
  a.num_heads = 96;
  a.head_dim = 128;
  a.gate_form = GateForm::kBounded;
  a.gate_lower_bound = -5;
  a.chunk_size = 64;
  auto k = KdaSpecFromAttention(a, "cfg");
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  EXPECT_EQ(k->num_v_heads, 96);
  EXPECT_EQ(k->v_head_dim, 128);
  EXPECT_EQ(k->gate_form, GateForm::kBounded);

  AttentionSpec d;
  d.kind = MixerKind::kDSA;
  d.dsa_base = MixerKind::kMLA;
  d.num_heads = 96;
  d.kv_lora_rank = 512;
  d.qk_rope_head_dim = 64;
  d.qk_nope_head_dim = 128;
  d.index_heads = 32;
  d.index_head_dim = 128;
  d.index_topk = 2048;
  d.output_gate = true;
  auto s = DsaSpecFromAttention(d, "cfg");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->num_kv_heads, 1);
  EXPECT_EQ(s->head_dim, 576);
  EXPECT_EQ(s->v_head_dim, 512);
  EXPECT_NEAR(s->ResolvedScale(), 1.0 / std::sqrt(192.0), 1e-12);
  d.index_topk = 0;
  auto bad = DsaSpecFromAttention(d, "cfg layer 3");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("cfg layer 3"), std::string::npos);

  a.kind = MixerKind::kGQA;
  EXPECT_FALSE(KdaSpecFromAttention(a, "cfg").ok());
}

TEST(KernelSpecTest, ModelSpecsAreDeduplicated) {
  ModelIR m;
  m.name = "toy";
  for (int i = 0; i < 4; ++i) {
    LayerSpec l;
    l.index = i;
    l.attn.kind = MixerKind::kKDA;
    l.attn.num_heads = 4;
    l.attn.head_dim = 64;
    l.attn.gate_form = GateForm::kOriginal;
    m.layers.push_back(l);
  }
  auto specs = KernelSpecsForModel(m);
  ASSERT_TRUE(specs.ok());
  EXPECT_EQ(specs->kda.size(), 1u);
  EXPECT_TRUE(specs->dsa.empty());
}

}  // namespace
}  // namespace onboard::codegen
