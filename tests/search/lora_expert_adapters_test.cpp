// LoRA on the routed experts (issue 12; core/lora_targets.h AdaptsRoutedExperts): an MoE layer without a
// shared expert adapts its routed experts, one adapter per expert. The profile counts those adapters
// apart from the dense ones, the memory model shards them like the experts, the step time pays their
// FLOPs on the routed path, and the exports carry them (Megatron-Bridge) or state that they cannot
// (torchtitan) or that they adapt more (MindSpeed-LLM on shared-expert models). With the rule off
// (routed_experts_without_shared = false) every check on Qwen3-30B-A3B fails: the count is 0, the
// bytes and seconds do not move with it, the exports lack the targets and the caveat.
// Units: parameters per unit LoRA rank, bytes, seconds.
#include "export_test_util.h"
#include "search/cost_model.h"
#include "search/export_megatron.h"
#include "search/layout_file.h"
#include "search/plan_export.h"
#include "search_test_util.h"

namespace onboard {
namespace {

// Qwen3-30B-A3B: 48 layers, every one MoE, 128 gated experts of width 768, top 8, hidden 2048, no
// shared expert, no dense MLP.
constexpr double kQwenH = 2048, kQwenI = 768, kQwenE = 128, kQwenLayers = 48, kQwenTopK = 8;
// Per unit rank, one layer: the routed experts' adapters, E x 3 matrices (gate, up, down) x (h + I)
// = 128 x 3 x 2816 = 1,081,344; the attention's 4 projections ~ 8h = 16,384 (no FFN adapter besides).
constexpr double kQwenExpertPerRank = kQwenE * 3 * (kQwenH + kQwenI);
constexpr double kQwenDensePerRank = 8 * kQwenH;
static_assert(kQwenExpertPerRank == 1081344 && kQwenDensePerRank == 16384);

TEST(LoraExpertAdapters, ProfileCountsRoutedExpertAdaptersOnlyWhereNoSharedExpert) {
  const ModelProfile qwen = BuildProfile(test::HfModel("qwen3-30b-a3b"), 4096, 0, false);
  ASSERT_EQ(qwen.layers.size(), 48u);
  for (const LayerProfile& lp : qwen.layers) {
    EXPECT_DOUBLE_EQ(lp.lora_expert_params_per_rank, kQwenExpertPerRank);
    EXPECT_DOUBLE_EQ(lp.lora_params_per_rank, kQwenDensePerRank);  // the dense adapters did not move
  }
  // Mixtral-8x7B: 8 experts x 3 x (4096 + 14336) = 442,368 per layer.
  const ModelProfile mix = BuildProfile(test::HfModel("mixtral-8x7b-v0.1"), 4096, 0, false);
  EXPECT_DOUBLE_EQ(mix.layers.back().lora_expert_params_per_rank, 8.0 * 3 * (4096 + 14336));
  // DeepSeek-V3: one shared expert per MoE layer, so it is their trainable path: no routed adapters.
  const ModelProfile ds = BuildProfile(test::HfModel("deepseek-v3"), 4096, 0, false);
  int moe = 0;
  for (const LayerProfile& lp : ds.layers) {
    moe += lp.top_k > 0;
    EXPECT_DOUBLE_EQ(lp.lora_expert_params_per_rank, 0);
  }
  EXPECT_EQ(moe, 58);
}

// Qwen3-30B-A3B LoRA r=16 on 8 H800s: fsdp group 8, ep 8, ZeRO-1, fp32 grads and Adam moments.
PlanRequest QwenLora(int64_t rank) {
  PlanRequest req = test::HfRequestOn("qwen3-30b-a3b", "H800", 8);
  req.mode = FinetuneMode::kLoRA;
  req.lora_rank = rank;
  return req;
}
Plan QwenLoraPlan(int64_t rank, int64_t ep) {
  Plan p = test::MakePlan({1, 8, 1, 1, ep, 8 / ep, 1, false, 1}, 4096, 1, 2);
  p.mode = FinetuneMode::kLoRA;
  p.lora_rank = rank;
  p.zero_stage = 1;
  return p;
}

TEST(LoraExpertAdapters, MemoryHoldsTheExpertAdaptersShardedByExpertParallelism) {
  const PlanRequest req = QwenLora(16);
  for (const int64_t ep : {8, 4}) {
    auto e = EvaluatePlan(req, QwenLoraPlan(16, ep));
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    // Adapter parameters on one device: dense r x 48 x 16,384 = 12,582,912 (tp 1), experts
    // r x 48 x 1,081,344 / ep = 830,472,192 / ep (103,809,024 at ep 8, 207,618,048 at ep 4).
    const double dense = 16 * kQwenLayers * kQwenDensePerRank;
    const double experts = 16 * kQwenLayers * kQwenExpertPerRank / static_cast<double>(ep);
    // Grads: 4 B each, ZeRO-1 keeps them whole: 4 x (12,582,912 + 103,809,024) = 465,567,744 B at ep 8.
    EXPECT_DOUBLE_EQ(e->memory.grads, 4 * (dense + experts)) << "ep " << ep;
    // Optimizer: fp32 master + m + v = 12 B, dense sharded over dp x cp = 8, experts over their DP group
    // dp x cp x tp / ep (1 at ep 8, 2 at ep 4): 12 x (1,572,864 + 103,809,024) = 1,264,582,656 B at ep 8.
    const double expert_dp = 8.0 / static_cast<double>(ep);
    EXPECT_DOUBLE_EQ(e->memory.optimizer, 12 * (dense / 8 + experts / expert_dp)) << "ep " << ep;
  }
}

TEST(LoraExpertAdapters, StepTimePaysTheExpertAdaptersOnTheRoutedPathAndTheirOptimizer) {
  // Routed-path adapter seconds grow with the rank; without expert adapters compute.MoE does not
  // depend on it (the dense adapters sit in the mixer's term). DeepSeek-V3 is that control.
  const PlanRequest r16 = QwenLora(16), r32 = QwenLora(32);
  auto a = EvaluatePlan(r16, QwenLoraPlan(16, 8)), b = EvaluatePlan(r32, QwenLoraPlan(32, 8));
  ASSERT_TRUE(a.ok() && b.ok()) << b.status().ToString();
  const CostContext c = MakeCostContext(r16);
  // Per MoE layer and micro-batch: Rg = T x top_k x imbalance = 4096 x 8 x 1 copies (tp 1, etp 1),
  // each through one expert's adapters, 2 x Rg x r x 3 x (h + I) FLOPs forward at
  // P x eff x lora_gemm_eff; backward twice that, written here from the derivation rather than read
  // from lora_bwd_ratio: the adapters train, so backward computes dx through B and A and the weight
  // grads dA and dB, four products of the forward's two (Hu et al. 2021): 3 x that, x 48 layers x 2
  // micro-batches. Rank 32 - rank 16 = the rank-16 term.
  const double rg = 4096 * kQwenTopK * r16.expert_imbalance;
  const double rate =
      c.peak_flops * c.k.gemm_eff_max * r16.calibration.compute_efficiency * c.k.lora_gemm_eff;
  const double per_layer = (1 + 2) * 2 * rg * 16 * 3 * (kQwenH + kQwenI) / rate;
  const double moe_a = test::Term(*a, "compute.MoE")->total_s, moe_b = test::Term(*b, "compute.MoE")->total_s;
  EXPECT_NEAR(moe_b - moe_a, 2 * kQwenLayers * per_layer, 1e-9 * moe_b);
  EXPECT_GT(per_layer, 0);
  // Optimizer: local adapters 12,582,912 / 8 + 103,809,024 / 1 = 105,381,888 params x 30 B
  // (2 x (4 + 8) + 4 + 2) / HBM.
  const double local = 16 * kQwenLayers * (kQwenDensePerRank / 8 + kQwenExpertPerRank / 8);
  EXPECT_NEAR(test::Term(*a, "optimizer")->total_s, local * 30 / (c.hbm_bps * c.k.hbm_eff), 1e-12);

  PlanRequest d16 = test::HfRequestOn("deepseek-v3", "H800", 64);
  d16.mode = FinetuneMode::kLoRA;
  d16.lora_rank = 16;
  PlanRequest d32 = d16;
  d32.lora_rank = 32;
  auto plan = [](int64_t r) {
    Plan p = test::MakePlan({1, 64, 1, 1, 64, 1, 1, false, 1}, 4096, 1, 2);
    p.mode = FinetuneMode::kLoRA;
    p.lora_rank = r;
    return p;
  };
  auto x = EvaluatePlan(d16, plan(16)), y = EvaluatePlan(d32, plan(32));
  ASSERT_TRUE(x.ok() && y.ok()) << y.status().ToString();
  EXPECT_DOUBLE_EQ(test::Term(*x, "compute.MoE")->total_s, test::Term(*y, "compute.MoE")->total_s);
}

TEST(LoraExpertAdapters, ExportsCarryOrStateTheRoutedExpertAdapters) {
  const test::ExportCase qwen = test::FindCase("qwen3-30b-a3b-lora");
  const test::ExportCase ds = test::FindCase("deepseek-v3-lora");
  const test::ExportCase llama = test::FindCase("llama-3.1-8b-lora");
  auto bridge = [](const test::ExportCase& c) {
    return ToMegatronBridgeRecipe(c.plan, c.model, ShapeFor(c.plan, 8));
  };
  auto titan = [](const test::ExportCase& c) {
    return ToTorchtitanConfig(c.plan, c.model, ShapeFor(c.plan, 8));
  };
  auto ms = [](const test::ExportCase& c) { return ToMindSpeedScript(c.plan, c.model, ShapeFor(c.plan, 8)); };
  // Megatron-Bridge: the grouped experts' linears, one adapter per expert.
  const std::string bq = bridge(qwen), bd = bridge(ds);
  EXPECT_NE(bq.find("\"*.mlp.experts.linear_fc1\", \"*.mlp.experts.linear_fc2\"]"), std::string::npos) << bq;
  EXPECT_NE(bq.find(", share_expert_adapters=False)"), std::string::npos) << bq;
  EXPECT_EQ(bq.find("the routed experts are not adapted"), std::string::npos) << bq;
  EXPECT_EQ(bd.find("*.mlp.experts.linear_fc"), std::string::npos) << bd;  // shared experts: frozen
  EXPECT_EQ(bd.find("share_expert_adapters"), std::string::npos) << bd;
  EXPECT_NE(bd.find("the routed experts are not adapted"), std::string::npos) << bd;
  // torchtitan main: its converter cannot wrap them, and says so where the plan adapts them.
  const char* frozen = "LoRA leaves the routed experts frozen";
  EXPECT_NE(titan(qwen).find(frozen), std::string::npos);
  EXPECT_EQ(titan(llama).find(frozen), std::string::npos);
  EXPECT_EQ(titan(ds).find(frozen), std::string::npos);
  // MindSpeed-LLM adapts every routed expert: a difference only where the plan does not.
  const char* more = "LoRA adapts the routed experts too";
  EXPECT_NE(ms(ds).find(more), std::string::npos);
  EXPECT_EQ(ms(qwen).find(more), std::string::npos);
  EXPECT_EQ(ms(llama).find(more), std::string::npos);
}

}  // namespace
}  // namespace onboard
