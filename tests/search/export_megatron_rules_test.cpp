// One test per Megatron-LM rule of search/export_megatron_rules.cpp: a golden export that passes
// every rule, changed in one place so that exactly this rule's condition breaks; the checker
// must name the rule and cite the Megatron-LM file it comes from. A last test checks that every
// rule of the checker has its case here.
#include <gtest/gtest.h>

#include <functional>
#include <set>

#include "export_test_util.h"
#include "search/export_megatron.h"

namespace onboard {
namespace {

MegatronArgs Golden(const std::string& name) { return test::GoldenArgs(name, "plan.megatron.sh"); }
using test::SetFlag;

struct RuleCase {
  std::string rule;       // MegatronRule::id the change must trip
  std::string golden;     // tests/data/exports/<golden>/plan.megatron.sh
  std::string expect;     // substring of the failure message
  std::function<void(MegatronArgs*)> change;
  std::string label = "";  // test name when a rule has more than one case (default: the rule id)
};

// Printed as its rule id: gtest_discover_tests puts GetParam() in ctest's test names, which must
// not hold addresses.
void PrintTo(const RuleCase& c, std::ostream* os) { *os << (c.label.empty() ? c.rule : c.label); }

std::vector<RuleCase> Cases() {
  const std::string ds = "deepseek-v3-pp16", ll = "llama-3.1-8b-full";
  return {
      {"known_flags", ll, "unrecognized argument --no-such-flag",
       [](MegatronArgs* a) { a->Add("--no-such-flag"); }},
      {"world_divisible", ds, "not divisible by tp*pp*cp=48",
       [](MegatronArgs* a) { SetFlag(a, "--tensor-model-parallel-size", "3"); }},
      {"global_batch", ds, "--global-batch-size 1000 not divisible by micro-batch 1 * data-parallel 128",
       [](MegatronArgs* a) { SetFlag(a, "--global-batch-size", "1000"); }},
      {"torch_fsdp2_conflicts", ds, "--use-torch-fsdp2 with pipeline parallelism",
       [](MegatronArgs* a) { a->Add("--use-torch-fsdp2"); }},
      {"megatron_fsdp", ds, "--use-megatron-fsdp needs --ckpt-format fsdp_dtensor",
       [](MegatronArgs* a) { a->Add("--use-megatron-fsdp"); }},
      {"ckpt_format_owner", ds, "fsdp_dtensor without --use-megatron-fsdp",
       [](MegatronArgs* a) { SetFlag(a, "--ckpt-format", "fsdp_dtensor"); }},
      {"cuda_max_connections", ds, "needs CUDA_DEVICE_MAX_CONNECTIONS=1, got '32'",
       [](MegatronArgs* a) {
         SetFlag(a, "--tensor-model-parallel-size", "2");
         a->env["CUDA_DEVICE_MAX_CONNECTIONS"] = "32";
       }},
      {"one_virtual_pipeline_option", ds, "more than one of",
       [](MegatronArgs* a) { a->Add("--num-virtual-stages-per-pipeline-rank", "2"); }},
      {"pipeline_layout", ds, "layout has 60 decoder layers, --num-layers 61",
       [](MegatronArgs* a) {
         std::string l = a->Value("--pipeline-model-parallel-layout");
         SetFlag(a, "--pipeline-model-parallel-layout", l.substr(0, l.size() - 3) + "mL");
       }},
      {"even_layers_without_layout", ds, "--num-layers 61 not divisible by pp=16",
       [](MegatronArgs* a) { a->Remove("--pipeline-model-parallel-layout"); }},
      {"interleaved_pipeline", "qwen3-30b-a3b-full",
       "needs pp > 1, or pp > 2 with --no-overlap-p2p-communication; pp=2",
       [](MegatronArgs* a) { a->Add("--no-overlap-p2p-communication"); }},
      // Found by Megatron's own parse_args (scripts/check-exports-with-engines.sh): the flag the
      // interleaved exports used to carry does not exist.
      {"known_flags", "qwen3-30b-a3b-full", "unrecognized argument --overlap-p2p-comm",
       [](MegatronArgs* a) { a->Add("--overlap-p2p-comm"); }, "known_flags_overlap_p2p_comm"},
      // Found by Megatron's validate_args on the flagship export (7168 hidden over 96 heads).
      {"kv_channels_derivable", "flagship-full",
       "no --kv-channels and --hidden-size 7168 not a multiple of --num-attention-heads 96",
       [](MegatronArgs* a) { a->Remove("--kv-channels"); }},
      // Found by Megatron's TransformerConfig.__post_init__ on the flagship export (DSA layers).
      {"dsa_attention", "flagship-full", "DSA attention needs --no-rope-fusion",
       [](MegatronArgs* a) { a->Remove("--no-rope-fusion"); }},
      {"dsa_attention", "flagship-full", "DSA attention with cp=2 needs --cp-comm-type allgather, got ''",
       [](MegatronArgs* a) { SetFlag(a, "--context-parallel-size", "2"); }, "dsa_attention_cp"},
      // Found by Megatron's TransformerConfig.__post_init__ on the flagship export (MLA with an output gate).
      {"mla_output_gate", "flagship-full", "--attention-output-gate with --multi-latent-attention",
       [](MegatronArgs* a) { a->Add("--attention-output-gate"); }},
      // HSDP on Megatron-FSDP: mixtral-8x7b-full has dp 128 (8 replicas x 16 shards), expert dp 16.
      {"optimizer_instances", "mixtral-8x7b-full",
       "expert data-parallel size 16 not divisible by --num-distributed-optimizer-instances 32",
       [](MegatronArgs* a) { SetFlag(a, "--num-distributed-optimizer-instances", "32"); }},
      {"heads_divide_tp", ll, "--num-attention-heads 36 not a multiple of tp=8",
       [](MegatronArgs* a) {
         SetFlag(a, "--tensor-model-parallel-size", "8");
         SetFlag(a, "--num-attention-heads", "36");
       }},
      {"experts_divide_ep", ds, "--num-experts 192 not a multiple of ep=128",
       [](MegatronArgs* a) {
         SetFlag(a, "--num-experts", "192");
         SetFlag(a, "--expert-model-parallel-size", "128");
       }},
      {"expert_grid", ds, "not divisible by etp*ep*pp=3072",
       [](MegatronArgs* a) { SetFlag(a, "--expert-tensor-parallel-size", "3"); }},
      {"expert_bias_score_function", ds, "needs score function sigmoid|sqrtsoftplus, got softmax",
       [](MegatronArgs* a) { SetFlag(a, "--moe-router-score-function", "softmax"); }},
      {"top1_softmax_pre_softmax", "mixtral-8x7b-full",
       "--moe-router-topk 1 with softmax needs --moe-router-pre-softmax",
       [](MegatronArgs* a) { SetFlag(a, "--moe-router-topk", "1"); }},
      {"group_limited_routing", ds, "--moe-router-group-topk 9 > --moe-router-num-groups 8",
       [](MegatronArgs* a) { SetFlag(a, "--moe-router-group-topk", "9"); }},
      {"selective_recompute", ds, "--recompute-method with selective recompute",
       [](MegatronArgs* a) { a->Add("--recompute-method", "uniform"); }},
      {"mla_not_gqa", ds, "--multi-latent-attention with --group-query-attention",
       [](MegatronArgs* a) { a->Add("--group-query-attention"); }},
      {"seq_length", ds, "--max-position-embeddings 1024 < --seq-length 4096",
       [](MegatronArgs* a) { SetFlag(a, "--max-position-embeddings", "1024"); }},
      {"moe_bias_etp", ds, "MoE with linear biases needs --expert-tensor-parallel-size 1, got 2",
       [](MegatronArgs* a) {
         a->Remove("--disable-bias-linear");
         SetFlag(a, "--expert-tensor-parallel-size", "2");
       }},
      {"one_precision", ds, "--fp16 and --bf16 together", [](MegatronArgs* a) { a->Add("--fp16"); }},
      // Found by Megatron's own TransformerConfig.__post_init__ on broken copies of the fp8 golden with
      // bf16 first / last layers (scripts/check-exports-with-engines.sh, issue 13).
      {"bf16_end_layers", "llama-3.1-8b-fp8-bf16-ends",
       "--num-layers-at-start-in-bf16 40 not in [0, num_layers / pp = 32]",
       [](MegatronArgs* a) { SetFlag(a, "--num-layers-at-start-in-bf16", "40"); }},
      {"bf16_end_layers", "llama-3.1-8b-fp8-bf16-ends", "--first-last-layers-bf16 with delayed scaling",
       [](MegatronArgs* a) { SetFlag(a, "--fp8-recipe", "delayed"); }, "bf16_end_layers_delayed"},
      {"mtp_position_embedding", ds, "--mtp-num-layers with --position-embedding-type learned_absolute",
       [](MegatronArgs* a) { SetFlag(a, "--position-embedding-type", "learned_absolute"); }},
      {"save_interval", ds, "--save needs --save-interval > 0",
       [](MegatronArgs* a) { SetFlag(a, "--save-interval", "0"); }},
      {"overlap_param_gather", ds,
       "--overlap-param-gather needs --use-distributed-optimizer or --use-megatron-fsdp",
       [](MegatronArgs* a) { a->Remove("--use-distributed-optimizer"); }},
      {"min_lr", ds, "--min-lr 1 > --lr 1e-5", [](MegatronArgs* a) { SetFlag(a, "--min-lr", "1"); }},
      {"one_data_source", ds, "--mock-data with --data-path", [](MegatronArgs* a) { a->Add("--mock-data"); }},
      // The flex dispatcher of the DeepEP plan: DeepEP needs expert TP x EP > 1; ncclep needs flex.
      {"flex_dispatcher", "deepseek-v3-deepep",
       "flex dispatcher with DeepEP needs expert TP x EP > 1, got etp=1 ep=1",
       [](MegatronArgs* a) { SetFlag(a, "--expert-model-parallel-size", "1"); }},
      {"flex_dispatcher", ds,
       "--moe-flex-dispatcher-backend ncclep needs --moe-token-dispatcher-type flex, got 'alltoall'",
       [](MegatronArgs* a) { a->Add("--moe-flex-dispatcher-backend", "ncclep"); }, "flex_dispatcher_ncclep"},
      {"moe_fields_need_experts", ll, "--moe-latent-size without --num-experts",
       [](MegatronArgs* a) { a->Add("--moe-latent-size", "128"); }},
  };
}

class MegatronRuleTest : public ::testing::TestWithParam<RuleCase> {};

TEST_P(MegatronRuleTest, BreakingTheRuleFailsIt) {
  const RuleCase& c = GetParam();
  MegatronArgs a = Golden(c.golden);
  ASSERT_TRUE(CheckMegatronArgs(a).empty()) << c.golden << " must pass before the change:\n" << FormatRuleFailures(CheckMegatronArgs(a));
  c.change(&a);
  const auto failures = CheckMegatronArgs(a);
  const MegatronRule* rule = nullptr;
  for (const MegatronRule& r : MegatronRules())
    if (c.rule == r.id) rule = &r;
  ASSERT_NE(rule, nullptr) << "no rule " << c.rule;
  bool found = false;
  for (const auto& f : failures)
    if (f.rule == c.rule && f.message.find(c.expect) != std::string::npos) {
      found = true;
      EXPECT_EQ(f.source, rule->source);
      EXPECT_NE(f.source.find("megatron/"), std::string::npos) << "citation names a Megatron-LM file: " << f.source;
    }
  EXPECT_TRUE(found) << "rule " << c.rule << " did not fail with '" << c.expect << "'; got:\n" << FormatRuleFailures(failures);
}

INSTANTIATE_TEST_SUITE_P(EachRule, MegatronRuleTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<RuleCase>& i) {
                           return i.param.label.empty() ? i.param.rule : i.param.label;
                         });

TEST(MegatronRules, EveryRuleHasACase) {
  std::set<std::string> covered;
  for (const RuleCase& c : Cases()) covered.insert(c.rule);
  for (const MegatronRule& r : MegatronRules()) EXPECT_TRUE(covered.count(r.id)) << "rule " << r.id << " has no test case";
}

TEST(MegatronRules, KnownFlagsRejectsValuesOnSwitchesAndBadChoices) {
  MegatronArgs a = Golden("llama-3.1-8b-full");
  SetFlag(&a, "--bf16", "yes");
  SetFlag(&a, "--normalization", "FooNorm");
  const std::string text = FormatRuleFailures(CheckMegatronArgs(a));
  EXPECT_NE(text.find("--bf16 takes no value, got 'yes'"), std::string::npos) << text;
  EXPECT_NE(text.find("--normalization FooNorm: invalid choice"), std::string::npos) << text;
}

TEST(MegatronRules, ParserRejectsAScriptWithoutArgs) {
  auto a = ParseMegatronScript("NNODES=2\nGPUS_PER_NODE=8\n", "x.sh");
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("no ARGS"), std::string::npos) << a.status().ToString();
  auto b = ParseMegatronScript("NNODES=zero\nARGS=(\n  --bf16\n)\n", "y.sh");
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().ToString().find("NNODES"), std::string::npos) << b.status().ToString();
}

TEST(MegatronRules, LayoutGrammarExpandsRepeatsAndGroups) {
  const auto st = LayoutStages("Et*3|(tt|)*2,m|L");   // Ettt | tt | tt | m | L
  ASSERT_EQ(st.size(), 5u);
  EXPECT_EQ(st[0], "Ettt");
  EXPECT_EQ(st[2], "tt");
  EXPECT_EQ(st[3], "m");
  EXPECT_EQ(st[4], "L");
  EXPECT_EQ(LayoutStages("E|(tt|)*2,(t|)*4,mL").size(), 8u);   // Megatron's docstring example: pp=2, vpp=4
  EXPECT_TRUE(LayoutStages("Ex*2").empty());
}

}  // namespace
}  // namespace onboard
