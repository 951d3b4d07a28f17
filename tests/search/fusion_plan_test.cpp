// The fusion plan from the IR: the right chains per layer kind, byte terms recomputable from the dims.
#include "search/fusion_plan.h"

#include <gtest/gtest.h>

#include "search_test_util.h"

namespace onboard {
namespace {

const FusionTerm* Find(const LayerFusion& l, FusionKind k) {
  for (const FusionTerm& t : l.terms) {
    if (t.kind == k) return &t;
  }
  return nullptr;
}

TEST(FusionPlanTest, FlagshipKdaAndDsaLayers) {
  const ModelIR m = test::Flagship();
  ASSERT_FALSE(m.layers.empty());
  FusionOptions o;
  o.seq = 4096;
  const FusionPlan plan = PlanFusions(m, o);
  ASSERT_EQ(plan.layers.size(), m.layers.size());
  int kda = 0, dsa = 0;
  for (size_t i = 0; i < m.layers.size(); ++i) {
    const AttentionSpec& a = m.layers[i].attn;
    const LayerFusion& l = plan.layers[i];
    if (a.kind == MixerKind::kKDA) {
      ++kda;
      // Three terms (gate, q/k norm, beta), as the kernel switches them; one of them the beta part.
      double bytes = 0, launches = 0;
      int parts = 0, beta = 0;
      for (const FusionTerm& t : l.terms) {
        if (t.kind != FusionKind::kKdaPrologue) continue;
        bytes += t.bytes_saved;
        launches += t.launches_saved;
        ++parts;
        beta += t.beta_sigmoid;
      }
      EXPECT_EQ(parts, 3) << "layer " << i;
      EXPECT_EQ(beta, 1) << "layer " << i;
      const double HV = static_cast<double>(a.num_v_heads > 0 ? a.num_v_heads : a.num_heads);
      const double H = static_cast<double>(a.num_heads), K = static_cast<double>(a.head_dim);
      EXPECT_DOUBLE_EQ(bytes, 2 * (HV * K * 4 + 2 * H * K * 2 + HV * 2));
      EXPECT_EQ(launches, 4);
      EXPECT_EQ(Find(l, FusionKind::kRotaryAttention), nullptr) << "KDA has no rotary";
    }
    if (a.kind == MixerKind::kDSA) {
      ++dsa;
      const FusionTerm* t = Find(l, FusionKind::kDsaIndexerTopk);
      ASSERT_NE(t, nullptr);
      EXPECT_DOUBLE_EQ(t->bytes_saved, 2 * 4 * (4096 + 1) / 2.0);
      EXPECT_NE(Find(l, FusionKind::kRotaryAttention), nullptr);
    }
    if (m.layers[i].channel == ChannelKind::kMoE) {
      const MoESpec& e = m.layers[i].moe;
      const FusionTerm* r = Find(l, FusionKind::kRouterTopkPermute);
      ASSERT_NE(r, nullptr);
      EXPECT_DOUBLE_EQ(r->bytes_saved, 4.0 * e.num_experts * 4 + 2.0 * e.top_k * 4);
      ASSERT_NE(Find(l, FusionKind::kMoeUnpermuteCombine), nullptr);
    }
    EXPECT_GT(l.SavedBytesPerToken(), 0);
  }
  EXPECT_GT(kda, 0);
  EXPECT_GT(dsa, 0);
  // Totals are the sums of the per-layer terms.
  double sum = 0;
  for (const LayerFusion& l : plan.layers) sum += l.SavedBytesPerToken();
  EXPECT_DOUBLE_EQ(plan.SavedBytesPerToken(), sum);
}

TEST(FusionPlanTest, DenseGqaModelHasNoMoeOrKdaTerms) {
  ModelIR m;
  m.hidden = 1024;
  LayerSpec l;
  l.attn.kind = MixerKind::kGQA;
  l.attn.num_heads = 16;
  l.attn.num_kv_heads = 4;
  l.attn.head_dim = 64;
  l.mlp.intermediate = 4096;
  m.layers = {l, l};
  m.layers[1].index = 1;
  const FusionPlan plan = PlanFusions(m);
  for (const LayerFusion& lf : plan.layers) {
    EXPECT_EQ(Find(lf, FusionKind::kRouterTopkPermute), nullptr);
    EXPECT_EQ(Find(lf, FusionKind::kKdaPrologue), nullptr);
    const FusionTerm* rot = Find(lf, FusionKind::kRotaryAttention);
    ASSERT_NE(rot, nullptr);
    EXPECT_DOUBLE_EQ(rot->bytes_saved, 2 * (16 * 64 + 4 * 64) * 2.0);
    const FusionTerm* act = Find(lf, FusionKind::kGatedActivation);
    ASSERT_NE(act, nullptr);
    EXPECT_DOUBLE_EQ(act->bytes_saved, 4 * 4096 * 2.0);
  }
  // Identical layers fold into one block of the text; each term is on its own line with units.
  const std::string text = FormatFusionPlan(plan);
  EXPECT_NE(text.find("layers 1-2 (each):"), std::string::npos) << text;
  EXPECT_NE(text.find("B/token = 4 x 4096 x 2 B"), std::string::npos) << text;
  EXPECT_NE(text.find("model total:"), std::string::npos);
}

TEST(FusionPlanTest, UngatedMlpAndPositionEmbeddings) {
  ModelIR m;
  m.hidden = 768;
  m.has_position_embedding = true;  // BERT-like: no rotary
  LayerSpec l;
  l.attn.kind = MixerKind::kMHA;
  l.attn.num_heads = 12;
  l.attn.num_kv_heads = 12;
  l.attn.head_dim = 64;
  l.mlp.act = Activation::kGELU;
  l.mlp.gated = false;
  l.mlp.intermediate = 3072;
  m.layers = {l};
  const FusionPlan plan = PlanFusions(m);
  EXPECT_EQ(Find(plan.layers[0], FusionKind::kRotaryAttention), nullptr);
  EXPECT_EQ(Find(plan.layers[0], FusionKind::kGatedActivation), nullptr);
  const FusionTerm* act = Find(plan.layers[0], FusionKind::kActivationEpilogue);
  ASSERT_NE(act, nullptr);
  EXPECT_DOUBLE_EQ(act->bytes_saved, 2 * 3072 * 2.0);
}

}  // namespace
}  // namespace onboard

namespace onboard {
namespace {

// Quantised GEMM inputs: each norm fuses with its quantise step in place of the bf16 norm+linear
// prologue; bf16 has no quantise term. fp8 / mxfp8: 1 launch and 2 H b per norm (the 16-bit normed
// copy never written); nvfp4: 1 launch and H b (the amax pass folded into the norm; the cast still
// reads the 16-bit copy, since the per-tensor amax must be known before any element is cast).
struct NormQuantiseCount {
  int quant = 0, prologue = 0, channel = 0;
};

NormQuantiseCount CountNormTerms(const LayerFusion& lf, double bytes_each, const std::string& chain_has) {
  NormQuantiseCount c;
  for (const FusionTerm& t : lf.terms) {
    if (t.kind == FusionKind::kNormLinearPrologue) ++c.prologue;
    if (t.kind != FusionKind::kNormQuantize) continue;
    ++c.quant;
    c.channel += t.feeds_channel;
    EXPECT_EQ(t.launches_saved, 1);
    EXPECT_DOUBLE_EQ(t.bytes_saved, bytes_each) << t.chain;
    EXPECT_NE(t.chain.find(chain_has), std::string::npos) << t.chain;
  }
  return c;
}

TEST(FusionPlanTest, QuantisedNormsFuseWithTheQuantiseInsteadOfTheGemmPrologue) {
  const ModelIR m = test::HfModel("llama-3.1-8b");
  ASSERT_FALSE(m.layers.empty());
  const double H = static_cast<double>(m.hidden);
  FusionOptions bf16;
  const LayerFusion a = PlanLayerFusions(m, m.layers[0], bf16);
  for (const FusionTerm& t : a.terms) EXPECT_NE(t.kind, FusionKind::kNormQuantize);
  struct Case {
    Precision p;
    double bytes_each;
    const char* chain_has;
  };
  for (const Case& c :
       {Case{Precision::kFP8, 2 * H * 2, "fp8 quantise"},
        Case{Precision::kMXFP8, 2 * H * 2, "mxfp8 quantise"}, Case{Precision::kNVFP4, H * 2, "nvfp4 amax"}}) {
    SCOPED_TRACE(PrecisionName(c.p));
    FusionOptions q;
    q.gemm_input = c.p;
    const LayerFusion b = PlanLayerFusions(m, m.layers[0], q);
    const NormQuantiseCount n = CountNormTerms(b, c.bytes_each, c.chain_has);
    EXPECT_EQ(n.quant, 2);  // before the attention and before the MLP
    EXPECT_EQ(n.channel, 1);
    EXPECT_EQ(n.prologue, 0);
    // Same bytes as the prologue for fp8 / mxfp8 (another partner); nvfp4 saves one read less per norm.
    EXPECT_DOUBLE_EQ(a.SavedBytesPerToken() - b.SavedBytesPerToken(), 2 * (2 * H * 2 - c.bytes_each));
    FusionPlan plan;
    plan.options = q;
    plan.layers = {b};
    EXPECT_NE(FormatFusionPlan(plan).find("norm+quantise"), std::string::npos);
  }
}

// A plan's bf16 first / last layers (Plan::bf16_layers_first) keep bf16 GEMM inputs: their norms fuse
// into the GEMM prologue, the other layers' with the quantise step.
TEST(FusionPlanTest, Bf16FirstAndLastLayersKeepTheGemmPrologue) {
  const ModelIR m = test::HfModel("llama-3.1-8b");
  ASSERT_EQ(m.layers.size(), 32u);
  FusionOptions o;
  o.gemm_input = Precision::kMXFP8;
  o.bf16_layers_first = 1;
  o.bf16_layers_last = 2;
  const FusionPlan plan = PlanFusions(m, o);
  ASSERT_EQ(plan.layers.size(), 32u);
  auto quantised = [](const LayerFusion& lf) {
    for (const FusionTerm& t : lf.terms)
      if (t.kind == FusionKind::kNormQuantize) return true;
    return false;
  };
  for (size_t l = 0; l < plan.layers.size(); ++l)
    EXPECT_EQ(quantised(plan.layers[l]), l >= 1 && l < 30) << "layer " << l;
}

}  // namespace
}  // namespace onboard
