// MindSpeed-LLM's rules (search/export_mindspeed_rules.cpp), the ones its own validation refused
// exports for: every golden plan.mindspeed.sh passes them all; each rule is broken once on a golden
// that passes, and the checker must name the rule and cite a MindSpeed(-LLM) file. CI has no engine
// code, so these are what CI checks of what the engines taught us (the engines' own run is
// ExportGolden.EnginesOwnValidation, skipped without checkouts).
#include <gtest/gtest.h>

#include <functional>
#include <set>

#include "export_test_util.h"
#include "search/export_mindspeed_rules.h"

namespace onboard {
namespace {

MegatronArgs Golden(const std::string& name) { return test::GoldenArgs(name, "plan.mindspeed.sh"); }
using test::SetFlag;

struct RuleCase {
  std::string rule, golden, expect;
  std::function<void(MegatronArgs*)> change;
  std::string label = "";
};
void PrintTo(const RuleCase& c, std::ostream* os) { *os << (c.label.empty() ? c.rule : c.label); }

std::vector<RuleCase> Cases() {
  const std::string pp16 = "deepseek-v3-pp16", dsl = "deepseek-v3-lora", q = "qwen3-30b-a3b-lora";
  return {
      // The export before this fix: 61 layers as --num-layer-list over pp 16 (3 >= 61 // 16).
      {"first_k_dense_per_stage", pp16, "--first-k-dense-replace 3 >= --num-layers 61 // pp 16",
       [](MegatronArgs* a) {
         a->Remove("--noop-layers");
         SetFlag(a, "--num-layers", "61");
         SetFlag(a, "--num-layer-list", "4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,1");
       }},
      {"num_layer_list", dsl, "--num-layer-list has 1 entries for pp 2",
       [](MegatronArgs* a) { SetFlag(a, "--num-layer-list", "61"); }},
      {"num_layer_list", dsl, "--num-layer-list with a virtual pipeline",
       [](MegatronArgs* a) { a->Add("--num-layers-per-virtual-pipeline-stage", "10"); },
       "num_layer_list_vpp"},
      {"noop_layers", pp16, "noop layer 64 not below --num-layers 64",
       [](MegatronArgs* a) { SetFlag(a, "--noop-layers", "61,62,64"); }},
      {"noop_layers", pp16, "pipeline stage 15 holds only noop layers",
       [](MegatronArgs* a) {
         SetFlag(a, "--noop-layers", "60,61,62,63");
         a->Add("--lora-target-modules", "linear_proj");
         SetFlag(a, "--moe-token-dispatcher-type", "alltoall_seq");
       },
       "noop_layers_all_noop_stage"},
      {"hf2mg_convert", pp16, "not the HF folder",
       [](MegatronArgs* a) { SetFlag(a, "--load", "${MEGATRON_CHECKPOINT_DIR:?required}"); }},
      {"hf2mg_convert", pp16, "--ckpt-format torch_dist with --enable-hf2mg-convert",
       [](MegatronArgs* a) { SetFlag(a, "--ckpt-format", "torch_dist"); }, "hf2mg_convert_torch_dist"},
      {"lora_on_moe", q, "--moe-token-dispatcher-type alltoall (only alltoall_seq)",
       [](MegatronArgs* a) { SetFlag(a, "--moe-token-dispatcher-type", "alltoall"); }},
      {"flags_its_parser_lacks", pp16, "unrecognized argument --moe-latent-size",
       [](MegatronArgs* a) { a->Add("--moe-latent-size", "1024"); }},
      // The DeepEP plan's Megatron flag: MindSpeed-LLM's Megatron base (core_r0.12) has none.
      {"flags_its_parser_lacks", "deepseek-v3-deepep", "unrecognized argument --moe-flex-dispatcher-backend",
       [](MegatronArgs* a) { a->Add("--moe-flex-dispatcher-backend", "deepep"); },
       "flags_its_parser_lacks_flex_backend"},
  };
}

class MindSpeedRuleTest : public ::testing::TestWithParam<RuleCase> {};

TEST_P(MindSpeedRuleTest, BreakingTheRuleIsCaughtAndCited) {
  const RuleCase& c = GetParam();
  MegatronArgs a = Golden(c.golden);
  ASSERT_TRUE(CheckMindSpeedArgs(a).empty()) << c.golden << " must pass before the change:\n"
                                             << FormatRuleFailures(CheckMindSpeedArgs(a));
  c.change(&a);
  const auto failures = CheckMindSpeedArgs(a);
  bool found = false;
  for (const auto& f : failures)
    if (f.rule == c.rule && f.message.find(c.expect) != std::string::npos) {
      found = true;
      EXPECT_NE(f.source.find("mindspeed"), std::string::npos) << f.source;
    }
  EXPECT_TRUE(found) << "rule " << c.rule << " did not fail with '" << c.expect << "'; got:\n"
                     << FormatRuleFailures(failures);
}

INSTANTIATE_TEST_SUITE_P(EachRule, MindSpeedRuleTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<RuleCase>& i) {
                           return i.param.label.empty() ? i.param.rule : i.param.label;
                         });

TEST(MindSpeedRules, EveryRuleHasACase) {
  std::set<std::string> covered;
  for (const RuleCase& c : Cases()) covered.insert(c.rule);
  for (const MegatronRule& r : MindSpeedRules())
    EXPECT_TRUE(covered.count(r.id)) << "rule " << r.id << " has no test case";
}

TEST(MindSpeedRules, EveryGoldenPassesThem) {
  for (const test::ExportCase& c : test::ExportCases())
    EXPECT_EQ(FormatRuleFailures(CheckMindSpeedArgs(Golden(c.name))), "") << c.name;
}

// Issue 14's refused plan: DeepSeek-V3's 61 layers over pp 16, stages of 4 and a last one of 1,
// exported in MindSpeed-LLM's own DeepSeek-V3 form (64 layers, 61..63 noop): same split, accepted.
TEST(MindSpeedRules, DeepSeekPp16IsExportedWithNoopLayersThatKeepThePlansSplit) {
  const MegatronArgs a = Golden("deepseek-v3-pp16");
  EXPECT_EQ(a.Value("--num-layers"), "64");
  EXPECT_EQ(a.Value("--noop-layers"), "61,62,63");
  EXPECT_FALSE(a.Has("--num-layer-list"));
  EXPECT_EQ(a.Value("--first-k-dense-replace"), "3");
  const int64_t per_stage = a.Int("--num-layers", 0) / a.Int("--pipeline-model-parallel-size", 1);
  EXPECT_EQ(per_stage, 4);  // stages 0..14: 4 real layers each (60); stage 15: layer 60 + 3 noop
  EXPECT_TRUE(MindSpeedDenseLayersFit(3, 64, 16));
  EXPECT_FALSE(MindSpeedDenseLayersFit(3, 61, 16));
}

}  // namespace
}  // namespace onboard
