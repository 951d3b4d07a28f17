// Issue 10: the plan's compute precision reaches every export as its own value. mxfp8 is TE's
// MXFP8BlockScaling recipe, not per-tensor fp8: Megatron-LM gets --fp8-format e4m3 --fp8-recipe
// mxfp8 (arguments.py), Megatron-Bridge bf16_with_mxfp8_mixed (training/mixed_precision.py),
// torchtitan a caveat naming it. Before, mxfp8 exported as plain bf16 with no caveat.
#include <gtest/gtest.h>

#include "export_test_util.h"
#include "search/export_megatron.h"
#include "search/plan_export.h"

namespace onboard {
namespace {

struct Exported {
  std::string megatron, bridge, titan;
};

Exported ExportWith(Precision compute) {
  test::ExportCase c = test::FindCase("llama-3.1-8b-full");
  c.plan.compute_dtype = compute;
  const LaunchShape shape = ShapeFor(c.plan, 8);
  return {ToMegatronScript(c.plan, c.model, shape), ToMegatronBridgeRecipe(c.plan, c.model, shape),
          ToTorchtitanConfig(c.plan, c.model, shape)};
}

bool Has(const std::string& text, const std::string& s) { return text.find(s) != std::string::npos; }

TEST(ExportPrecision, Mxfp8IsExportedAsTheMxfp8RecipeNotAsFp8OrBf16) {
  const Exported mx = ExportWith(Precision::kMXFP8);
  EXPECT_TRUE(Has(mx.megatron, "--fp8-format e4m3")) << mx.megatron;
  EXPECT_TRUE(Has(mx.megatron, "--fp8-recipe mxfp8")) << mx.megatron;
  EXPECT_TRUE(CheckMegatronScript(mx.megatron).empty());  // the flag and its value are Megatron's own
  EXPECT_TRUE(Has(mx.bridge, "mixed_precision.bf16_with_mxfp8_mixed()")) << mx.bridge;
  EXPECT_TRUE(Has(mx.titan, "mxfp8 GEMMs: not exported")) << mx.titan;
  // The negatives: per-tensor fp8 and bf16 do not get the MXFP8 recipe.
  const Exported f8 = ExportWith(Precision::kFP8);
  EXPECT_TRUE(Has(f8.megatron, "--fp8-format hybrid")) << f8.megatron;
  EXPECT_FALSE(Has(f8.megatron, "--fp8-recipe")) << f8.megatron;
  EXPECT_TRUE(Has(f8.bridge, "bf16_with_fp8_current_scaling_mixed")) << f8.bridge;
  EXPECT_TRUE(Has(f8.titan, "fp8 GEMMs: not exported")) << f8.titan;
  const Exported bf = ExportWith(Precision::kBF16);
  EXPECT_FALSE(Has(bf.megatron, "--fp8")) << bf.megatron;
  EXPECT_TRUE(Has(bf.bridge, "mixed_precision.bf16_mixed()")) << bf.bridge;
  EXPECT_FALSE(Has(bf.titan, "GEMMs: not exported")) << bf.titan;
}

// How FSDP meets PP (plan fsdp_pipelining) reaches each export as what its engine runs: Megatron-LM
// and Bridge run Megatron-FSDP (per micro-batch), torchtitan keeps the stage gathered (per step).
// Qwen3-30B-A3B, zero 3, pp 2: a per_step plan is noted on Megatron and Bridge and not on torchtitan;
// a per_micro_batch plan the other way round.
TEST(ExportFsdpPipelining, EachEngineSaysWhatItRunsInstead) {
  test::ExportCase c = test::FindCase("qwen3-30b-a3b-full");
  ASSERT_EQ(c.plan.zero_stage, 3);
  ASSERT_GT(c.plan.deg.pp, 1);
  auto exported = [&](FsdpPipelining f) {
    Plan p = c.plan;
    p.fsdp_pipelining = f;
    const LaunchShape shape = ShapeFor(p, 8);
    return Exported{ToMegatronScript(p, c.model, shape), ToMegatronBridgeRecipe(p, c.model, shape),
                    ToTorchtitanConfig(p, c.model, shape)};
  };
  const std::string megatron_note = "Megatron-FSDP's optim_grads_params gathers the weights";
  const std::string titan_note = "torchtitan with PP keeps the stage gathered";
  const Exported step = exported(FsdpPipelining::kPerStep);
  EXPECT_TRUE(Has(step.megatron, megatron_note)) << step.megatron;
  EXPECT_TRUE(Has(step.bridge, megatron_note)) << step.bridge;
  EXPECT_FALSE(Has(step.titan, titan_note)) << step.titan;
  const Exported mb = exported(FsdpPipelining::kPerMicroBatch);
  EXPECT_FALSE(Has(mb.megatron, megatron_note)) << mb.megatron;
  EXPECT_FALSE(Has(mb.bridge, megatron_note)) << mb.bridge;
  EXPECT_TRUE(Has(mb.titan, titan_note)) << mb.titan;
}

}  // namespace
}  // namespace onboard
