// bf16 first / last layers (issue 13): under a quantised compute_dtype, Plan::bf16_layers_first / last
// keep that many decoder layers at the start / end in bf16 GEMMs, as Megatron-Core's
// first_last_layers_bf16 does (fp8_utils.py is_first_last_bf16_layer; MTP layers stay quantised). The
// marked layers are costed with the context's bf16 twin, the rest as before; the exports write the
// engines' own switches. Each check has its inputs that must be refused.
#include <gtest/gtest.h>

#include "export_test_util.h"
#include "search/cost_model.h"
#include "search/export_megatron.h"
#include "search/plan_export.h"
#include "search_test_util.h"

namespace onboard {
namespace {

struct Costed {
  PlanEstimate e;
  Status check;
};

// llama-3.1-8b (32 layers) on 8 GB300, dp 8, at `compute` with `first` / `last` bf16 layers and `mtp`
// MTP layers.
Costed CostWith(Precision compute, int64_t first, int64_t last, int64_t mtp = 0) {
  PlanRequest req = test::HfRequestOn("llama-3.1-8b", "GB300", 8);
  req.mode = FinetuneMode::kFull;
  req.compute_dtype = compute;
  req.bf16_layers_first = first;
  req.bf16_layers_last = last;
  const CostContext c = MakeCostContext(req);
  Plan plan = test::MakePlan({1, 8, 1, 1, 1, 1, 1, false}, req.seq, 1, 16);
  plan.zero_stage = 1;
  plan.compute_dtype = compute;
  plan.bf16_layers_first = first;
  plan.bf16_layers_last = last;
  plan.mtp_layers = mtp;
  Costed out;
  out.check = CheckPlanAgainstModel(c, plan);
  if (out.check.ok()) out.e = EstimatePlan(c, plan);
  return out;
}

// Two of 32 layers in bf16 add two 32nds of the gap between the all-mxfp8 and the all-bf16 plan
// (the layers add; the head and the rest are the same), and their saved inputs are bf16 copies.
TEST(Bf16Layers, TheMarkedLayersCostBf16AndTheOthersStayQuantised) {
  const Costed q = CostWith(Precision::kMXFP8, 0, 0), m = CostWith(Precision::kMXFP8, 1, 1),
               b = CostWith(Precision::kBF16, 0, 0);
  ASSERT_TRUE(q.check.ok() && m.check.ok() && b.check.ok()) << m.check.ToString();
  EXPECT_LT(q.e.step_s, m.e.step_s);
  EXPECT_LT(m.e.step_s, b.e.step_s);
  EXPECT_NEAR((m.e.step_s - q.e.step_s) / (b.e.step_s - q.e.step_s), 2.0 / 32, 0.005);
  EXPECT_GT(m.e.memory.activations, q.e.memory.activations);
  EXPECT_LT(m.e.memory.activations, b.e.memory.activations);
  EXPECT_NEAR(
      (m.e.memory.activations - q.e.memory.activations) / (b.e.memory.activations - q.e.memory.activations),
      2.0 / 32, 0.005);
  // MFU keeps the plan's datasheet peak as its denominator.
  EXPECT_NEAR(m.e.mfu * m.e.step_s, q.e.mfu * q.e.step_s, 1e-9 * q.e.mfu * q.e.step_s);
}

// An MTP layer copies the last decoder layer's shape but runs quantised even when that layer is bf16:
// it adds the same time whether or not the last layer is marked.
TEST(Bf16Layers, AnMtpLayerStaysQuantisedAfterABf16LastLayer) {
  const double plain =
      CostWith(Precision::kMXFP8, 0, 0, 1).e.step_s - CostWith(Precision::kMXFP8, 0, 0).e.step_s;
  const double marked =
      CostWith(Precision::kMXFP8, 0, 1, 1).e.step_s - CostWith(Precision::kMXFP8, 0, 1).e.step_s;
  EXPECT_GT(plain, 0);
  EXPECT_NEAR(marked, plain, 1e-9 * plain);
}

TEST(Bf16Layers, AreRefusedWithoutAQuantisedComputeOrBeyondTheModelOrMegatronsBound) {
  PlanRequest req = test::HfRequestOn("llama-3.1-8b", "GB300", 8);
  req.compute_dtype = Precision::kBF16;
  req.bf16_layers_last = 1;
  Status st = req.Validate();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("bf16_layers"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("quantised compute_dtype"), std::string::npos) << st.message();
  req.compute_dtype = Precision::kNVFP4;
  EXPECT_TRUE(req.Validate().ok()) << req.Validate().ToString();
  req.bf16_layers_first = 32;  // 33 of 32 layers
  EXPECT_FALSE(req.Validate().ok());
  // fp8 recipes: each count <= layers / pp (transformer_config.py); fp4 has no such bound.
  Plan p = test::MakePlan({1, 1, 1, 16, 1, 1, 1, false}, 4096, 1, 16);
  p.compute_dtype = Precision::kFP8;
  p.bf16_layers_first = 3;  // 32 / 16 = 2 per stage
  st = CheckBf16Layers(p, 32);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("32 / 16"), std::string::npos) << st.message();
  p.bf16_layers_first = 2;
  EXPECT_TRUE(CheckBf16Layers(p, 32).ok());
  p.bf16_layers_first = 3;
  p.compute_dtype = Precision::kNVFP4;
  EXPECT_TRUE(CheckBf16Layers(p, 32).ok());
  p.bf16_layers_last = -1;
  EXPECT_FALSE(CheckBf16Layers(p, 32).ok());
  // A plan whose counts differ from the context's marks is refused, not costed with the wrong layers.
  PlanRequest ok_req = test::HfRequestOn("llama-3.1-8b", "GB300", 8);
  ok_req.compute_dtype = Precision::kMXFP8;
  const CostContext c = MakeCostContext(ok_req);
  Plan q = test::MakePlan({1, 8, 1, 1, 1, 1, 1, false}, ok_req.seq, 1, 16);
  q.compute_dtype = Precision::kMXFP8;
  q.bf16_layers_first = 1;
  st = CheckPlanAgainstModel(c, q);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("bf16_layers_first/last=1/0"), std::string::npos) << st.message();
}

bool Has(const std::string& text, const std::string& s) { return text.find(s) != std::string::npos; }

// Megatron-LM: the switch and both counts (each defaults to 1 once the switch is on); Megatron-Bridge:
// the mixed-precision fields; torchtitan: a caveat. Without marked layers an fp8 export still turns
// Bridge's default bf16 first / last layers off, and no export carries the switch.
TEST(Bf16Layers, EveryExportWritesTheEnginesOwnSwitches) {
  test::ExportCase c = test::FindCase("llama-3.1-8b-full");
  c.plan.compute_dtype = Precision::kFP8;
  c.plan.bf16_layers_first = 1;
  c.plan.bf16_layers_last = 2;
  const LaunchShape shape = ShapeFor(c.plan, 8);
  const std::string megatron = ToMegatronScript(c.plan, c.model, shape);
  const std::string bridge = ToMegatronBridgeRecipe(c.plan, c.model, shape);
  const std::string titan = ToTorchtitanConfig(c.plan, c.model, shape);
  EXPECT_TRUE(Has(megatron, "--first-last-layers-bf16")) << megatron;
  EXPECT_TRUE(Has(megatron, "--num-layers-at-start-in-bf16 1")) << megatron;
  EXPECT_TRUE(Has(megatron, "--num-layers-at-end-in-bf16 2")) << megatron;
  EXPECT_TRUE(Has(bridge, "cfg.mixed_precision.first_last_layers_bf16 = True")) << bridge;
  EXPECT_TRUE(Has(bridge, "cfg.mixed_precision.num_layers_at_start_in_bf16 = 1")) << bridge;
  EXPECT_TRUE(Has(bridge, "cfg.mixed_precision.num_layers_at_end_in_bf16 = 2")) << bridge;
  EXPECT_TRUE(Has(titan, "bf16 first / last layers (1 / 2)")) << titan;
  c.plan.bf16_layers_first = c.plan.bf16_layers_last = 0;
  EXPECT_FALSE(Has(ToMegatronScript(c.plan, c.model, shape), "bf16-layers"));
  EXPECT_FALSE(Has(ToMegatronScript(c.plan, c.model, shape), "in-bf16"));
  EXPECT_TRUE(Has(ToMegatronBridgeRecipe(c.plan, c.model, shape), "first_last_layers_bf16 = False"));
}

}  // namespace
}  // namespace onboard
