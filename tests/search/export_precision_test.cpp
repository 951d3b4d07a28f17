// Issue 10: the plan's compute precision reaches every export as its own value (nvfp4 since issue 13). mxfp8
// is TE's MXFP8BlockScaling recipe, not per-tensor fp8: Megatron-LM gets --fp8-format e4m3 --fp8-recipe mxfp8
// (arguments.py), Megatron-Bridge bf16_with_mxfp8_mixed (training/mixed_precision.py), torchtitan a caveat
// naming it. Before, mxfp8 exported as plain bf16 with no caveat.
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

// Each precision's recipe, per engine: the Megatron-LM flags it must and must not carry, Bridge's
// mixed-precision recipe, torchtitan's caveat ("" = none). fp8 is per-tensor current scaling, the
// recipe the cost model charges (expert_host_ops.cpp) and Bridge's bf16_with_fp8_current_scaling_mixed
// sets: --fp8-recipe tensorwise, not Megatron's default delayed scaling. nvfp4 is TE's
// NVFP4BlockScaling: --fp4-format e2m1 --fp4-recipe nvfp4 (transformer_config.py fp4 / fp4_recipe) and
// never an fp8 flag (arguments.py: "--fp4-format and --fp8-format cannot be used simultaneously").
struct Recipe {
  Precision p;
  std::vector<std::string> megatron_has, megatron_lacks;
  std::string bridge, titan;
};

TEST(ExportPrecision, EachPrecisionIsExportedAsItsOwnRecipe) {
  const Recipe recipes[] = {
      {Precision::kMXFP8,
       {"--fp8-format e4m3", "--fp8-recipe mxfp8"},
       {"--fp4"},
       "mixed_precision.bf16_with_mxfp8_mixed()",
       "mxfp8 GEMMs: not exported"},
      {Precision::kFP8,
       {"--fp8-format hybrid", "--fp8-recipe tensorwise"},
       {"--fp8-recipe mxfp8", "--fp4"},
       "mixed_precision.bf16_with_fp8_current_scaling_mixed()",
       "fp8 GEMMs: not exported"},
      {Precision::kNVFP4,
       {"--bf16", "--fp4-format e2m1", "--fp4-recipe nvfp4"},
       {"--fp8"},
       "mixed_precision.bf16_with_nvfp4_mixed()",
       "nvfp4 GEMMs: not exported"},
      {Precision::kBF16, {"--bf16"}, {"--fp8", "--fp4"}, "mixed_precision.bf16_mixed()", ""},
  };
  for (const Recipe& r : recipes) {
    const Exported e = ExportWith(r.p);
    const char* name = PrecisionName(r.p);
    for (const std::string& flag : r.megatron_has) EXPECT_TRUE(Has(e.megatron, flag)) << name << ": " << flag;
    for (const std::string& flag : r.megatron_lacks)
      EXPECT_FALSE(Has(e.megatron, flag)) << name << ": " << flag;
    EXPECT_TRUE(CheckMegatronScript(e.megatron).empty()) << name;  // flags and values are Megatron's own
    EXPECT_TRUE(Has(e.bridge, r.bridge)) << name << ": " << e.bridge;
    if (r.titan.empty())
      EXPECT_FALSE(Has(e.titan, "GEMMs: not exported")) << name;
    else
      EXPECT_TRUE(Has(e.titan, r.titan)) << name;
  }
  // Bridge's current-scaling recipe keeps the first and last layers bf16 (mixed_precision.py); the plan
  // costs every layer in fp8, so the export turns that off, as Bridge's perf recipes do
  // (perf_recipes/_common.py: fp8_cs -> first_last_layers_bf16 = False). The other recipes leave it.
  EXPECT_TRUE(Has(ExportWith(Precision::kFP8).bridge, "cfg.mixed_precision.first_last_layers_bf16 = False"));
  EXPECT_FALSE(Has(ExportWith(Precision::kMXFP8).bridge, "first_last_layers_bf16"));
  // MindSpeed-LLM (Ascend, Megatron core_r0.12) cannot run NVFP4: the export says so and drops the flags
  // its parser lacks, so the script refuses to launch rather than fail in the parser.
  test::ExportCase ms = test::FindCase("llama-3.1-8b-full");
  ms.plan.compute_dtype = Precision::kNVFP4;
  const std::string mindspeed = ToMindSpeedScript(ms.plan, ms.model, ShapeFor(ms.plan, 8));
  EXPECT_TRUE(Has(mindspeed, "nvfp4 GEMMs: an NVIDIA Blackwell recipe")) << mindspeed;
  EXPECT_FALSE(Has(mindspeed, "--fp4-format e2m1")) << mindspeed;
  // The one-line Megatron flags list carries the recipe too.
  test::ExportCase c = test::FindCase("llama-3.1-8b-full");
  c.plan.compute_dtype = Precision::kNVFP4;
  EXPECT_TRUE(Has(ToMegatronArgs(c.plan), "--fp4-format e2m1 --fp4-recipe nvfp4")) << ToMegatronArgs(c.plan);
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
