// Generated source specialises dims at compile time; manifest and content hash are consistent.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "codegen/kernel_generator.h"

namespace onboard::codegen {
namespace {

KdaSpec Kda() {
  KdaSpec s;
  s.num_heads = 4;
  s.num_v_heads = 8;
  s.head_dim = 128;
  s.v_head_dim = 64;
  s.chunk_size = 32;
  s.gate_form = GateForm::kBounded;
  s.gate_lower_bound = -5;
  return s;
}

TEST(KernelGeneratorTest, DimsAreCompileTimeConstants) {
  auto g = GenerateKda(Kda(), {});
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_NE(g->source.find("static constexpr int H = 4, HV = 8, K = 128, V = 64, C = 32;"), std::string::npos);
  EXPECT_NE(g->source.find("kGate = onboard::GateForm::kBounded;"), std::string::npos);
  EXPECT_NE(g->source.find("ONBOARD_EXPORT_KDA_CPU(Config, \"" + g->name + "\")"), std::string::npos);
  EXPECT_NE(g->source.find("onboard_kda_fwd"), std::string::npos);
  // Self-contained: the project headers are inlined (each once), only system headers stay included.
  EXPECT_EQ(g->source.find("#include \"codegen/"), std::string::npos);
  EXPECT_EQ(g->source.find("#include \"core/"), std::string::npos);
  const size_t enum_at = g->source.find("enum class GateForm");
  ASSERT_NE(enum_at, std::string::npos);
  EXPECT_EQ(g->source.find("enum class GateForm", enum_at + 1), std::string::npos);
  EXPECT_EQ(g->source.find('@'), std::string::npos) << "unfilled placeholder";
  EXPECT_EQ(g->FileName(), g->name + ".cpp");
}

TEST(KernelGeneratorTest, ManifestAndHash) {
  auto a = GenerateKda(Kda(), {});
  auto b = GenerateKda(Kda(), {});
  KdaSpec other = Kda();
  other.chunk_size = 64;
  auto c = GenerateKda(other, {});
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(a->content_hash, b->content_hash);
  EXPECT_NE(a->content_hash, c->content_hash);
  EXPECT_EQ(a->content_hash, ContentHash(a->source));
  EXPECT_EQ(a->content_hash.size(), 16u);
  auto j = nlohmann::json::parse(a->ManifestJson());
  EXPECT_EQ(j["name"], a->name);
  EXPECT_EQ(j["op"], "kda");
  EXPECT_EQ(j["target"], "cpu");
  EXPECT_EQ(j["hash"], a->content_hash);
  EXPECT_EQ(j["params"]["chunk_size"], "32");
  EXPECT_EQ(j["params"]["gate_form"], "bounded");
}

TEST(KernelGeneratorTest, CudaTargetAndDtype) {
  TargetOptions t;
  t.target = KernelTarget::kCuda;
  t.cuda_arch = 80;
  KdaSpec s = Kda();
  s.dtype = DType::kBF16;
  auto g = GenerateKda(s, t);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->FileName(), g->name + ".cu");
  // The short instantiation of kda_cuda.cuh: Config with the operand type, then the C ABI.
  EXPECT_NE(g->source.find("using elem_t = __nv_bfloat16;"), std::string::npos);
  EXPECT_NE(g->source.find("static constexpr int H = 4, HV = 8, K = 128, V = 64, C = 32;"), std::string::npos);
  EXPECT_NE(g->source.find("kGate = onboard::GateForm::kBounded;"), std::string::npos);
  EXPECT_NE(g->source.find("ONBOARD_EXPORT_KDA_CUDA(onboard_gen::Config, \"" + g->name + "\")"),
            std::string::npos);
  EXPECT_NE(g->source.find("struct KdaCuda"), std::string::npos);
  EXPECT_EQ(g->source.find("#include \"codegen/"), std::string::npos);
  EXPECT_EQ(g->source.find("#include \"core/"), std::string::npos);
  EXPECT_EQ(nlohmann::json::parse(g->ManifestJson())["arch"], "sm_80");
  // bf16 operands are a CUDA-only option.
  auto cpu = GenerateKda(s, {});
  ASSERT_FALSE(cpu.ok());
  EXPECT_EQ(cpu.status().code(), ErrorCode::kBadInput);
}

TEST(KernelGeneratorTest, BetaSigmoidIsASpecialisation) {
  KdaSpec s = Kda();
  auto plain = GenerateKda(s, {});
  s.beta_sigmoid = true;
  auto fused = GenerateKda(s, {});
  ASSERT_TRUE(plain.ok() && fused.ok());
  EXPECT_NE(fused->name, plain->name);
  EXPECT_NE(fused->content_hash, plain->content_hash);
  EXPECT_NE(fused->source.find("kBetaSigmoid = true;"), std::string::npos);
  EXPECT_EQ(nlohmann::json::parse(fused->ManifestJson())["params"]["beta_sigmoid"], "true");
  EXPECT_FALSE(nlohmann::json::parse(plain->ManifestJson())["params"].contains("beta_sigmoid"));
}

TEST(KernelGeneratorTest, DsaInstantiatesTheTemplate) {
  DsaSpec d;
  d.num_heads = 8;
  d.num_kv_heads = 1;
  d.head_dim = d.v_head_dim = 64;
  d.index_heads = 2;
  d.index_head_dim = 32;
  d.topk = 128;
  auto g = GenerateDsa(d, {});
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_NE(g->source.find("static constexpr int HQ = 8, HKV = 1, D = 64, DV = 64, HI = 2, DI = 32, VO = 0;"),
            std::string::npos);
  EXPECT_NE(g->source.find("static constexpr int64_t TOPK = 128;"), std::string::npos);
  EXPECT_NE(g->source.find("ONBOARD_EXPORT_DSA_CPU(Config"), std::string::npos);
}

TEST(KernelGeneratorTest, ModelWithoutKdaOrDsaGeneratesNothing) {
  ModelIR m;
  LayerSpec l;
  l.attn.kind = MixerKind::kGQA;
  l.attn.num_heads = 8;
  m.layers.push_back(l);
  auto g = GenerateKernels(m, {});
  ASSERT_TRUE(g.ok());
  EXPECT_TRUE(g->empty());
}

}  // namespace
}  // namespace onboard::codegen
