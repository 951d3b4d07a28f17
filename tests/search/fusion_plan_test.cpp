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

// fp8 / MXFP8 GEMM inputs: each norm fuses with the quantise (1 launch, 2 H b per norm, the 16-bit normed
// copy never written), in place of the bf16 norm+linear prologue; bf16 has no quantise term.
TEST(FusionPlanTest, Fp8NormsFuseWithTheQuantiseInsteadOfTheGemmPrologue) {
  const ModelIR m = test::HfModel("llama-3.1-8b");
  ASSERT_FALSE(m.layers.empty());
  FusionOptions bf16, fp8;
  fp8.fp8 = true;
  const LayerFusion a = PlanLayerFusions(m, m.layers[0], bf16), b = PlanLayerFusions(m, m.layers[0], fp8);
  int quant = 0, prologue = 0, channel = 0;
  for (const FusionTerm& t : b.terms) {
    if (t.kind == FusionKind::kNormLinearPrologue) ++prologue;
    if (t.kind != FusionKind::kNormQuantize) continue;
    ++quant;
    channel += t.feeds_channel;
    EXPECT_EQ(t.launches_saved, 1);
    EXPECT_DOUBLE_EQ(t.bytes_saved, 2.0 * static_cast<double>(m.hidden) * 2);  // 2 x H x 2 B
    EXPECT_NE(t.formula.find("fp8 cast"), std::string::npos) << t.formula;
  }
  EXPECT_EQ(quant, 2);  // before the attention and before the MLP
  EXPECT_EQ(channel, 1);
  EXPECT_EQ(prologue, 0);
  for (const FusionTerm& t : a.terms) EXPECT_NE(t.kind, FusionKind::kNormQuantize);
  EXPECT_DOUBLE_EQ(a.SavedBytesPerToken(), b.SavedBytesPerToken());  // same bytes, another partner
  FusionPlan plan;
  plan.options = fp8;
  plan.layers = {b};
  EXPECT_NE(FormatFusionPlan(plan).find("norm+fp8 quantise"), std::string::npos);
}

}  // namespace
}  // namespace onboard
