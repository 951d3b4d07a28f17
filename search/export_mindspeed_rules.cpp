// CheckMindSpeedArgs (see export_mindspeed_rules.h): one function per rule. Paths are relative to
// the Ascend/MindSpeed-LLM repository root at c77308a1 (2026-08-21), "mindspeed:" to Ascend/MindSpeed
// at 028de58c. Units: layers, degrees and list entries are counts.
#include "search/export_mindspeed_rules.h"

#include <functional>
#include <set>
#include <sstream>
#include <string>

namespace onboard {
namespace {

using Fail = std::function<void(const std::string&)>;

constexpr const char* kBlock =
    "mindspeed_llm/features_manager/transformer/transformer_block.py: validate_args";
constexpr const char* kLayerList =
    "mindspeed_llm/features_manager/pipeline_parallel/num_layer_list.py: validate_args";
constexpr const char* kNoop =
    "mindspeed: mindspeed/features_manager/pipeline_parallel/noop_layers.py: post_validate_args; "
    "mindspeed_llm/training/utils.py: check_pipeline_config (with LoRA)";
constexpr const char* kConvert =
    "mindspeed_llm/features_manager/convert_checkpoint/convert_checkpoint.py: validate_args";
constexpr const char* kLora = "mindspeed_llm/features_manager/finetune/lora.py: validate_args";
constexpr const char* kParser =
    "mindspeed_llm/features_manager (every feature's register_args) over megatron/training/arguments.py of "
    "Megatron-LM a845aa7e (core_r0.12, MindSpeed-LLM's pin): argparse 'unrecognized arguments'";

std::string S(int64_t v) { return std::to_string(v); }
int64_t Pp(const MegatronArgs& a) { return a.Int("--pipeline-model-parallel-size", 1); }

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string t; std::getline(in, t, sep);) out.push_back(t);
  return out;
}

void FirstKDense(const MegatronArgs& a, const Fail& fail) {
  const int64_t k = a.Int("--first-k-dense-replace", 0), layers = a.Int("--num-layers", 0);
  if (k <= 0) return;
  if (layers <= k)
    fail("--num-layers " + S(layers) + " must be greater than --first-k-dense-replace " + S(k));
  if (!MindSpeedDenseLayersFit(k, layers, Pp(a)))
    fail("--first-k-dense-replace " + S(k) + " >= --num-layers " + S(layers) + " // pp " + S(Pp(a)) +
         " (every layer of a stage would be dense; --num-layer-list is not read here)");
}

void NumLayerList(const MegatronArgs& a, const Fail& fail) {
  if (!a.Has("--num-layer-list")) return;
  const auto entries = Split(a.Value("--num-layer-list"), ',');
  if (static_cast<int64_t>(entries.size()) != Pp(a))
    fail("--num-layer-list has " + S(entries.size()) + " entries for pp " + S(Pp(a)));
  if (Pp(a) <= 1) fail("--num-layer-list needs pipeline parallelism (pp " + S(Pp(a)) + ")");
  if (a.Has("--num-layers-per-virtual-pipeline-stage") || a.Has("--num-virtual-stages-per-pipeline-rank"))
    fail("--num-layer-list with a virtual pipeline");
}

void NoopLayers(const MegatronArgs& a, const Fail& fail) {
  if (!a.Has("--noop-layers")) return;
  const int64_t layers = a.Int("--num-layers", 0), pp = Pp(a);
  std::set<int64_t> noop;
  for (const std::string& x : Split(a.Value("--noop-layers"), ',')) {
    if (x.empty() || x.find_first_not_of("0123456789") != std::string::npos) {
      fail("noop layer '" + x + "' is not a number");
      continue;
    }
    const int64_t l = std::stoll(x);
    if (l >= layers) fail("noop layer " + x + " not below --num-layers " + S(layers));
    noop.insert(l);
  }
  if (a.Has("--pipeline-model-parallel-layout")) fail("--noop-layers with --pipeline-model-parallel-layout");
  if (!a.Has("--lora-target-modules") || pp <= 0) return;  // check_pipeline_config runs only for LoRA
  const int64_t per = layers / pp;
  for (int64_t s = 0; s < pp && per > 0; ++s) {
    bool all = true;
    for (int64_t l = s * per; l < (s + 1) * per; ++l) all = all && noop.count(l);
    if (all) fail("pipeline stage " + S(s) + " holds only noop layers");
  }
}

void Hf2mgConvert(const MegatronArgs& a, const Fail& fail) {
  if (!a.Has("--enable-hf2mg-convert")) return;
  if (a.Value("--ckpt-format") == "torch_dist") fail("--ckpt-format torch_dist with --enable-hf2mg-convert");
  // --load must hold the HF *.safetensors; the export's only HF folder is HF_MODEL_PATH.
  if (a.Value("--load").find("HF_MODEL_PATH") == std::string::npos)
    fail("--enable-hf2mg-convert converts from --load, which is '" + a.Value("--load") +
         "', not the HF folder");
}

void LoraOnMoe(const MegatronArgs& a, const Fail& fail) {
  if (!a.Has("--lora-target-modules") || a.Int("--num-experts", 0) <= 0) return;
  if (a.Value("--moe-token-dispatcher-type") != "alltoall_seq")
    fail("LoRA on MoE with --moe-token-dispatcher-type " + a.Value("--moe-token-dispatcher-type") +
         " (only alltoall_seq)");
  if (a.Has("--moe-tp-extend-ep")) fail("LoRA with --moe-tp-extend-ep");
}

void FlagsItsParserLacks(const MegatronArgs& a, const Fail& fail) {
  for (const auto& [flag, value] : a.flags)
    for (const char* absent : {"--experimental-attention-variant", "--dsa-indexer-", "--moe-latent-size",
                               "--moe-flex-dispatcher-backend"})
      if (flag.rfind(absent, 0) == 0) fail("unrecognized argument " + flag);
}

const std::vector<MegatronRuleFn>& RuleTable() {
  static const std::vector<MegatronRuleFn> t = {
      {{"first_k_dense_per_stage", kBlock}, FirstKDense},
      {{"num_layer_list", kLayerList}, NumLayerList},
      {{"noop_layers", kNoop}, NoopLayers},
      {{"hf2mg_convert", kConvert}, Hf2mgConvert},
      {{"lora_on_moe", kLora}, LoraOnMoe},
      {{"flags_its_parser_lacks", kParser}, FlagsItsParserLacks},
  };
  return t;
}

}  // namespace

bool MindSpeedDenseLayersFit(int64_t first_k_dense, int64_t num_layers, int64_t pp) {
  return first_k_dense <= 0 || pp <= 1 || first_k_dense < num_layers / pp;
}

const std::vector<MegatronRule>& MindSpeedRules() {
  static const std::vector<MegatronRule> rules = RulesOf(RuleTable());
  return rules;
}

std::vector<MegatronRuleFailure> CheckMindSpeedArgs(const MegatronArgs& args) {
  return RunRules(RuleTable(), args);
}

}  // namespace onboard
