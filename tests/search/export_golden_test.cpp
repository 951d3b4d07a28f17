// Goldens of every export for the fixed plans of tests/data/exports/cases.json (5 real configs,
// full and LoRA, + the DeepSeek-V3 pp=16 case and DeepSeek-V3 on the DeepEP dispatcher).
// Regenerate on purpose only:
//   ONBOARD_REGEN_GOLDEN=1 build/tests/test_search --gtest_filter='ExportGolden*'
// Every golden Megatron-LM script is read back from disk and run through the Megatron rule checker;
// scripts are syntax-checked with `bash -n`, Python with python3's ast, TOML with tomllib.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "export_test_util.h"
#include "search/export_megatron.h"
#include "search/export_model.h"
#include "search/plan_export.h"
#include "search/planner.h"

namespace onboard {
namespace {

const std::string kGolden = std::string(ONBOARD_TEST_DATA) + "/exports";

TEST(ExportGolden, CasesAreValidPlans) {
  for (const test::ExportCase& c : test::ExportCases()) {
    int64_t experts = 0, heads = 0;
    for (const auto& l : c.model.layers) {
      experts = std::max(experts, l.moe.num_experts);
      heads = std::max(heads, l.attn.num_heads);
    }
    Status st = ValidatePlan(c.plan, c.plan.deg.world(), experts, heads, static_cast<int64_t>(c.model.layers.size()));
    EXPECT_TRUE(st.ok()) << c.name << ": " << st.ToString();
  }
}

TEST(ExportGolden, EveryExportMatchesItsGolden) {
  const bool regen = std::getenv("ONBOARD_REGEN_GOLDEN") != nullptr;
  for (const test::ExportCase& c : test::ExportCases()) {
    const std::string dir = kGolden + "/" + c.name;
    if (regen) {
      Status st = WriteAllExports(c.plan, c.model, dir);
      ASSERT_TRUE(st.ok()) << st.ToString();
      continue;
    }
    for (const ExportFile& f : BuildAllExports(c.plan, c.model)) {
      const std::string want = test::ReadText(dir + "/" + f.name);
      EXPECT_FALSE(want.empty()) << dir << "/" << f.name << " missing (ONBOARD_REGEN_GOLDEN=1 writes it)";
      EXPECT_EQ(f.text, want) << c.name << "/" << f.name << " differs from its golden";
    }
  }
}

TEST(ExportGolden, GoldenMegatronScriptsPassTheMegatronRules) {
  int checked = 0;
  for (const test::ExportCase& c : test::ExportCases()) {
    const std::string path = kGolden + "/" + c.name + "/plan.megatron.sh";
    auto args = ParseMegatronScript(test::ReadText(path), path);
    ASSERT_TRUE(args.ok()) << args.status().ToString();
    EXPECT_EQ(args->shape.world(), c.plan.deg.world()) << path;
    const auto failures = CheckMegatronArgs(*args);
    EXPECT_TRUE(failures.empty()) << path << ":\n" << FormatRuleFailures(failures);
    ++checked;
  }
  EXPECT_EQ(checked, 14);
}

// What the engines' own validation refused before (scripts/check-exports-with-engines.sh found it):
// Bridge allows offline sequence packing only with micro-batch 1 (ConfigContainer.validate);
// MindSpeed-LLM's parser has no Megatron-LM-main DSA / latent-MoE flags, and its hf2mg conversion
// reads the HF folder from --load (convert_checkpoint.py validate_args).
TEST(ExportGolden, BridgeAndMindSpeedExportsFollowTheRulesTheirEnginesRefusedThemFor) {
  int dsa = 0;
  for (const test::ExportCase& c : test::ExportCases()) {
    const std::string recipe = test::ReadText(kGolden + "/" + c.name + "/plan_megatron_bridge.py");
    if (c.plan.micro_batch > 1) {
      EXPECT_NE(recipe.find("cfg.dataset.enable_offline_packing = False"), std::string::npos) << c.name;
    } else {
      EXPECT_NE(recipe.find("packed_sequence_size = " + std::to_string(c.plan.seq) + "\n"), std::string::npos)
          << c.name;
    }
    const std::string ms = test::ReadText(kGolden + "/" + c.name + "/plan.mindspeed.sh");
    for (const char* flag : {"--experimental-attention-variant", "--dsa-indexer-", "--moe-latent-size"})
      EXPECT_EQ(ms.find(std::string("\n  ") + flag), std::string::npos) << c.name << ": " << flag;
    if (ms.find("--enable-hf2mg-convert") != std::string::npos) {
      EXPECT_NE(ms.find("--load \"${HF_MODEL_PATH:?required}\""), std::string::npos) << c.name;
    }
    dsa += ms.find("\n  --enable-dsa-indexer\n") != std::string::npos;
  }
  EXPECT_EQ(dsa, 2);  // flagship full and LoRA
}

// Bridge's LoRA matcher (scripts/engine_checks/megatron_bridge_validate.py, Step 4) found a dense-MLP
// target matching no module of an all-MoE model (Qwen3-30B-A3B); torchtitan main's
// Trainer.Config._validate_cuda_graphs refused pipeline / all-to-all expert parallelism with CUDA
// graphs on (its default).
TEST(ExportGolden, LoraTargetsAndCudaGraphsFollowTheRulesTheirEnginesRefusedThemFor) {
  int lora = 0, dense_targets = 0;
  for (const test::ExportCase& c : test::ExportCases()) {
    bool dense = false;
    for (const LayerSpec& l : c.model.layers) dense = dense || l.channel != ChannelKind::kMoE;
    const std::string recipe = test::ReadText(kGolden + "/" + c.name + "/plan_megatron_bridge.py");
    if (c.plan.mode == FinetuneMode::kLoRA) {
      ++lora;
      const bool has = recipe.find("\"*.mlp.linear_fc1\"") != std::string::npos;
      dense_targets += has;
      EXPECT_EQ(has, dense) << c.name << ": a dense-MLP LoRA target exactly where the model has a dense MLP";
    }
    const std::string titan = test::ReadText(kGolden + "/" + c.name + "/plan_torchtitan.py");
    if ((c.plan.deg.pp > 1 || c.plan.deg.ep > 1) &&
        titan.find("raise NotImplementedError") == std::string::npos) {
      EXPECT_NE(titan.find("disable_cuda_graphs=True"), std::string::npos) << c.name;
    }
  }
  EXPECT_EQ(lora, 5);
  EXPECT_EQ(dense_targets, 3);  // flagship (dense first layers), DeepSeek-V3 (first 3 dense), Llama-3.1-8B
}

// The plan's expert dispatcher reaches every engine that has it: Megatron-LM and Bridge as the
// flex dispatcher's backend (TransformerConfig moe_token_dispatcher_type / moe_flex_dispatcher_backend),
// torchtitan main as model_registry's moe_comm_backend, v0.2.2 as expert_parallel_comm_backend;
// MindSpeed-LLM (Ascend: no DeepEP) keeps the all-to-all and says so.
TEST(ExportGolden, ExportsCarryThePlansExpertDispatcher) {
  int flex_cases = 0;
  for (const test::ExportCase& c : test::ExportCases()) {
    const std::string dir = kGolden + "/" + c.name + "/", flex = PlanFlexDispatcher(c.plan);
    const MegatronArgs mg = test::GoldenArgs(c.name, "plan.megatron.sh");
    const std::string recipe = test::ReadText(dir + "plan_megatron_bridge.py"),
                      titan = test::ReadText(dir + "plan_torchtitan.py");
    const std::string toml = test::ReadText(dir + "plan.torchtitan-v0.2.toml"),
                      ms = test::ReadText(dir + "plan.mindspeed.sh");
    if (flex.empty()) {
      if (mg.Has("--num-experts")) {
        EXPECT_EQ(mg.Value("--moe-token-dispatcher-type"), "alltoall") << c.name;
      }
      EXPECT_FALSE(mg.Has("--moe-flex-dispatcher-backend")) << c.name;
      EXPECT_EQ(recipe.find("moe_flex_dispatcher_backend"), std::string::npos) << c.name;
      EXPECT_EQ(titan.find("moe_comm_backend"), std::string::npos) << c.name;
      continue;
    }
    ++flex_cases;
    EXPECT_EQ(mg.Value("--moe-token-dispatcher-type"), "flex") << c.name;
    EXPECT_EQ(mg.Value("--moe-flex-dispatcher-backend"), flex) << c.name;
    EXPECT_NE(
        recipe.find("model.moe_token_dispatcher_type = \"flex\"\n    model.moe_flex_dispatcher_backend = \"" +
                    flex + "\""),
        std::string::npos)
        << c.name;
    EXPECT_NE(titan.find("moe_comm_backend=\"" + flex + "\""), std::string::npos) << c.name;
    if (flex == "deepep") {
      EXPECT_NE(toml.find("\nexpert_parallel_comm_backend = \"deepep\"\n"), std::string::npos) << c.name;
    }
    EXPECT_NE(ms.find("\n  --moe-token-dispatcher-type alltoall\n"), std::string::npos) << c.name;
    EXPECT_NE(ms.find("#   - dispatcher " + flex + ": a CUDA kernel, not on Ascend"), std::string::npos)
        << c.name;
  }
  EXPECT_EQ(flex_cases, 1);  // deepseek-v3-deepep
}

TEST(ExportGolden, BrokenExportFailsTheChecker) {
  // Issue 14's measured failure: torch FSDP2 with the distributed optimizer, pipeline and experts.
  const std::string path = kGolden + "/deepseek-v3-pp16/plan.megatron.sh";
  auto args = ParseMegatronScript(test::ReadText(path), path);
  ASSERT_TRUE(args.ok()) << args.status().ToString();
  ASSERT_TRUE(CheckMegatronArgs(*args).empty());
  args->Add("--use-torch-fsdp2");
  const auto failures = CheckMegatronArgs(*args);
  const std::string text = FormatRuleFailures(failures);
  EXPECT_NE(text.find("torch_fsdp2_conflicts: --use-torch-fsdp2 with pipeline parallelism (pp=16)"), std::string::npos) << text;
  EXPECT_NE(text.find("--use-torch-fsdp2 with expert parallelism (ep=64)"), std::string::npos) << text;
  EXPECT_NE(text.find("--use-torch-fsdp2 with --use-distributed-optimizer"), std::string::npos) << text;
  EXPECT_NE(text.find("arguments.py: validate_args"), std::string::npos) << text;
}

TEST(ExportGolden, DeepSeekPp16LayoutPlacesAll61LayersAndMtpLast) {
  const std::string path = kGolden + "/deepseek-v3-pp16/plan.megatron.sh";
  auto args = ParseMegatronScript(test::ReadText(path), path);
  ASSERT_TRUE(args.ok());
  const auto stages = LayoutStages(args->Value("--pipeline-model-parallel-layout"));
  ASSERT_EQ(stages.size(), 16u) << args->Value("--pipeline-model-parallel-layout");
  int64_t t = 0;
  for (const auto& s : stages) t += std::count(s.begin(), s.end(), 't');
  EXPECT_EQ(t, 61);
  EXPECT_EQ(stages.front().front(), 'E');
  EXPECT_EQ(stages.back().substr(stages.back().size() - 2), "mL");
}

// Syntax of the written files, with the interpreters the users run them with (one bash and one
// python3 process for all files; each prints the files it rejects).
std::string Capture(const std::string& cmd) {
  std::string out;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return "popen failed";
  char buf[512];
  while (fgets(buf, sizeof buf, p)) out += buf;
  pclose(p);
  return out;
}

TEST(ExportGolden, ScriptsParseWithBashPythonAndToml) {
  std::string sh, py, toml;
  for (const test::ExportCase& c : test::ExportCases()) {
    const std::string dir = kGolden + "/" + c.name + "/";
    for (const char* f : {"plan.megatron.sh", "plan.mindspeed.sh", "plan.torchrun.sh", "plan.sbatch"}) sh += " '" + dir + f + "'";
    for (const char* f : {"plan_megatron_bridge.py", "plan_torchtitan.py"}) py += " '" + dir + f + "'";
    toml += " '" + dir + "plan.torchtitan-v0.2.toml'";
  }
  EXPECT_EQ(Capture("for f in" + sh + "; do bash -n \"$f\" || echo \"BAD $f\"; done"), "");
  if (Capture("python3 -c 'print(1)'") != "1\n") GTEST_SKIP() << "python3 not installed: Python/TOML syntax not checked (bash checked)";
  EXPECT_EQ(Capture("python3 -c \"import ast,sys\nfor f in sys.argv[1:]: ast.parse(open(f).read(), f)\"" + py), "");
  if (Capture("python3 -c 'import tomllib'") == "") {
    EXPECT_EQ(Capture("python3 -c \"import tomllib,sys\nfor f in sys.argv[1:]: tomllib.load(open(f,'rb'))\"" + toml), "");
  }
}

TEST(ExportGolden, HonestHeadersNameEngineAndGaps) {
  const test::ExportCase flag = test::FindCase("flagship-full");
  const LaunchShape shape = ShapeFor(flag.plan, 8);
  const std::string mega = ToMegatronScript(flag.plan, flag.model, shape);
  EXPECT_NE(mega.find("Target: NVIDIA/Megatron-LM main @ d98e8a64"), std::string::npos);
  EXPECT_NE(mega.find("KDA (Kimi Delta Attention) layers: Megatron-LM has no KDA layer"), std::string::npos) << mega;
  EXPECT_EQ(mega.find("ONBOARD_UNSUPPORTED=0"), std::string::npos);   // the script refuses to launch
  const test::ExportCase lora = test::FindCase("llama-3.1-8b-lora");
  const std::string mlora = ToMegatronScript(lora.plan, lora.model, ShapeFor(lora.plan, 8));
  EXPECT_NE(mlora.find("LoRA (rank 16): Megatron-LM has no LoRA"), std::string::npos) << mlora;
  const std::string bridge = ToMegatronBridgeRecipe(lora.plan, lora.model, ShapeFor(lora.plan, 8));
  EXPECT_NE(bridge.find("cfg.peft = LoRA(target_modules=[\"linear_qkv\", \"linear_proj\""), std::string::npos) << bridge;
  EXPECT_NE(bridge.find("UNSUPPORTED = 0"), std::string::npos) << bridge;
  const std::string titan = ToTorchtitanConfig(lora.plan, lora.model, ShapeFor(lora.plan, 8));
  EXPECT_NE(titan.find("LoRAConverter.Config(rank=16"), std::string::npos) << titan;
  EXPECT_NE(titan.find("initial_load_in_hf=True"), std::string::npos) << titan;
  const test::ExportCase mix = test::FindCase("mixtral-8x7b-full");
  const std::string tmix = ToTorchtitanConfig(mix.plan, mix.model, ShapeFor(mix.plan, 8));
  EXPECT_NE(tmix.find("no torchtitan model flavor matches mixtral"), std::string::npos) << tmix;
  EXPECT_NE(tmix.find("raise NotImplementedError"), std::string::npos) << tmix;
}

TEST(ExportGolden, V02TomlUsesTheMicroBatchAsLocalBatch) {
  const test::ExportCase q = test::FindCase("llama-3.1-8b-full");
  const std::string toml = ToTorchtitanV02Toml(q.plan, q.model, ShapeFor(q.plan, 8));
  EXPECT_NE(toml.find("local_batch_size = 4\n"), std::string::npos) << toml;   // mb=4, not 4x2
  EXPECT_NE(toml.find("[model]\nname = \"llama3\"\nflavor = \"8B\""), std::string::npos) << toml;
  EXPECT_NE(toml.find("initial_load_in_hf = true"), std::string::npos) << toml;
  const test::ExportCase pp = test::FindCase("qwen3-30b-a3b-full");
  const std::string tpp = ToTorchtitanV02Toml(pp.plan, pp.model, ShapeFor(pp.plan, 8));
  EXPECT_NE(tpp.find("pipeline_parallel_microbatch_size = 4"), std::string::npos) << tpp;
  EXPECT_NE(tpp.find("module_fqns_per_model_part = [\n  [\"tok_embeddings\", \"layers.0\""), std::string::npos) << tpp;
}

}  // namespace
}  // namespace onboard

namespace onboard {
namespace {

TEST(ExportGolden, EveryFileNamesItsTargetAndWhatToSupply) {
  for (const test::ExportCase& c : test::ExportCases())
    for (const ExportFile& f : BuildAllExports(c.plan, c.model)) {
      if (f.name == "EXPORTS.md") continue;
      EXPECT_NE(f.text.find("Target: "), std::string::npos) << c.name << "/" << f.name;
      EXPECT_NE(f.text.find("You must supply"), std::string::npos) << c.name << "/" << f.name;
    }
}

// A plan the search finds now (not a frozen one) exports to arguments Megatron's rules accept.
TEST(ExportGolden, SearchedPlansExportToValidMegatronArgs) {
  for (const char* model : {"llama-3.1-8b", "qwen3-30b-a3b"}) {
    PlanRequest req;
    auto m = LoadModel(std::string(ONBOARD_TEST_DATA) + "/hf/" + model + ".config.json");
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    req.model = *m;
    req.topology = test::ShippedTopology("h200-16x8");
    req.mode = FinetuneMode::kFull;
    auto r = SearchPlans(req);
    ASSERT_TRUE(r.ok() && r->feasible) << model;
    const std::string script = ToMegatronScript(r->best.plan, req.model, ShapeFor(r->best.plan, 8));
    auto args = ParseMegatronScript(script, model);
    ASSERT_TRUE(args.ok()) << args.status().ToString();
    const auto failures = CheckMegatronArgs(*args);
    EXPECT_TRUE(failures.empty()) << model << " " << PlanSummary(r->best.plan) << ":\n" << FormatRuleFailures(failures);
  }
}

}  // namespace
}  // namespace onboard

namespace onboard {
namespace {

TEST(ExportGolden, IndexReportsMegatronRuleFailures) {
  test::ExportCase c = test::FindCase("llama-3.1-8b-full");
  c.plan.global_batch = 1000;   // not a multiple of micro-batch 4 x data-parallel 128
  const std::vector<ExportFile> files = BuildAllExports(c.plan, c.model);
  const std::string& index = files.back().text;
  EXPECT_NE(index.find("- FAILS global_batch: --global-batch-size 1000 not divisible"), std::string::npos) << index;
}

}  // namespace
}  // namespace onboard
