// ToMegatronBridgeRecipe: a Python recipe for NVIDIA-NeMo/Megatron-Bridge that loads the HF
// checkpoint through AutoBridge and sets the plan's TP/PP/VP/CP/EP/ETP, batch, recompute,
// precision and PEFT LoRA (rank, alpha, target modules). Megatron-LM has no LoRA, so this is the
// launchable path for LoRA plans. Names used (Megatron-Bridge main @ 067f987d, 2026-08-22):
//   megatron.bridge.AutoBridge.{from_hf_pretrained, to_megatron_provider, import_ckpt}
//   megatron.bridge.recipes.common.{_peft_common, _sft_common}   (ConfigContainer templates)
//   megatron.bridge.peft.lora.LoRA(target_modules, dim, alpha, dropout, share_expert_adapters)
//   megatron.bridge.training.finetune.finetune(config, forward_step_func)
//   megatron.bridge.training.gpt_step.forward_step
//   megatron.bridge.training.mixed_precision.{bf16_mixed, fp16_mixed, bf16_with_fp8_current_scaling_mixed,
//   bf16_with_mxfp8_mixed, bf16_with_nvfp4_mixed}
// ConfigContainer.validate asserts cfg.checkpoint.pretrained_checkpoint is set when cfg.peft is,
// and that model.seq_length == dataset.seq_length: both are set below.
#include <algorithm>
#include <sstream>

#include "core/lora_targets.h"
#include "search/export_model.h"
#include "search/plan_export.h"

namespace onboard {

const char* const kBridgeTarget = "NVIDIA-NeMo/Megatron-Bridge main @ 067f987d (2026-08-22)";

namespace {

std::string Py(bool b) { return b ? "True" : "False"; }
std::string S(int64_t v) { return std::to_string(v); }

bool HasDenseMlp(const ExportModel& m) {
  return std::find(m.moe_layer.begin(), m.moe_layer.end(), false) != m.moe_layer.end();
}

// LoRA targets in Megatron-Core module names: the plan's adapters (kLoraTargets and
// AdaptsRoutedExperts, core/lora_targets.h): attention projections, the dense / shared-expert MLPs,
// and the routed experts of MoE layers without a shared expert. A dense-MLP pattern only where the
// model has a dense layer: Bridge's matcher (PEFT.__call__) only warns on a target that matches no
// module, and LoRA then silently adapts less (scripts/engine_checks/megatron_bridge_validate.py,
// Step 4, found "*.mlp.linear_fc1" matching nothing on Qwen3-30B-A3B, whose every layer is MoE).
// Routed experts: Bridge's grouped experts (TEGroupedMLP, moe_grouped_gemm, which the Qwen3-MoE and
// DeepSeek bridges set) are the modules decoder.layers.N.mlp.experts.linear_fc1/2. Bridge @067f987d
// matches a target by `name == pattern or wildcard_match(pattern, full_name)` (module_matcher.py),
// wildcard_match = re.match("^" + pattern.replace("*", "(.*)") + "$") (peft/utils.py; '.' is left
// unescaped, any one character). So "*.mlp.experts.linear_fc1" = ^(.*).mlp.experts.linear_fc1$:
//   decoder.layers.3.mlp.experts.linear_fc1                  matches (grouped routed experts)
//   decoder.layers.3.mlp.shared_experts.linear_fc1           no: "mlp" + 1 char + "experts" absent
//   decoder.layers.3.mlp.linear_fc1                          no: "experts" absent
//   decoder.layers.3.mlp.experts.local_experts.0.linear_fc1  no (SequentialMLP; not built here)
// and "*.mlp.linear_fc1" matches none of the expert names ("mlp" + 1 char + "linear_fc1" at the end).
// These are is_grouped_expert_linear names (".*mlp\..*experts.*\.linear_fc[1-2]$", no
// ".shared_experts.", no ".local_experts."), so share_expert_adapters=False gives each expert its own
// adapter (GroupedExpertLinearAdapter), as the probe trains (backends/proxy_layout.cpp).
std::vector<std::string> LoraTargets(const ExportModel& m) {
  std::vector<std::string> t;
  if (m.mla) {
    t = {m.q_lora_rank > 0 ? "linear_q_down_proj" : "linear_q_proj", "linear_kv_down_proj",
         "linear_kv_up_proj", "linear_proj"};
    if (m.q_lora_rank > 0) t.insert(t.begin() + 1, "linear_q_up_proj");
  } else {
    t = {"linear_qkv", "linear_proj"};
  }
  if (kLoraTargets.dense_mlp && HasDenseMlp(m)) {
    t.push_back("*.mlp.linear_fc1");
    t.push_back("*.mlp.linear_fc2");
  }
  if (kLoraTargets.shared_experts && m.shared_experts > 0) {
    t.push_back("*.mlp.shared_experts.linear_fc1");
    t.push_back("*.mlp.shared_experts.linear_fc2");
  }
  if (m.lora_adapts_routed_experts()) {
    t.push_back("*.mlp.experts.linear_fc1");
    t.push_back("*.mlp.experts.linear_fc2");
  }
  return t;
}

std::string PyList(const std::vector<std::string>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::string("\"") + v[i] + "\"";
  return s + "]";
}

void Header(std::ostringstream& os, const ExportCaveats& c, const LaunchShape& shape) {
  os << "# Megatron-Bridge recipe for this plan, written by `onboard plan --export`.\n";
  os << "# Target: " << kBridgeTarget << ".\n";
  os << "# Run once, in one process, to convert the HF checkpoint:  python THIS --import\n";
  os << "# Then launch on every node:  torchrun --nnodes " << shape.nnodes << " --nproc-per-node "
     << shape.gpus_per_node << " --rdzv-backend c10d --rdzv-endpoint $MASTER_ADDR:29500 THIS\n";
  auto bullets = [&](const char* title, const std::vector<std::string>& items) {
    if (items.empty()) return;
    os << "# " << title << "\n";
    for (const std::string& s : items) os << "#   - " << s << "\n";
  };
  bullets("NOT SUPPORTED (the recipe exits 3 unless ONBOARD_FORCE=1):", c.unsupported);
  bullets("Exported differently from the plan:", c.approximations);
  bullets("You must supply:", c.user_supplies);
}

// Step 2 helper: the plan's degrees, batch, recompute, precision and data-parallel sharding.
void ParallelismAndTraining(std::ostringstream& os, const Plan& p, const ExportModel& m,
                            const std::string& layout) {
  const Recompute r = StrongestRecompute(p);
  os << "    model.tensor_model_parallel_size = " << p.deg.tp << "\n";
  os << "    model.sequence_parallel = " << Py(p.deg.tp > 1 && p.deg.sequence_parallel) << "\n";
  os << "    model.pipeline_model_parallel_size = " << p.deg.pp << "\n";
  os << "    model.virtual_pipeline_model_parallel_size = "
     << (p.deg.interleave > 1 ? S(p.deg.interleave) : "None") << "\n";
  if (p.deg.pp > 1) {
    os << "    model.pipeline_dtype = torch."
       << (p.compute_dtype == Precision::kFP16 ? "float16" : "bfloat16") << "\n";
    os << "    model.pipeline_model_parallel_layout = \"" << layout << "\"\n";
  } else {
    os << "    model.pipeline_dtype = None\n    model.pipeline_model_parallel_layout = None\n";
  }
  os << "    model.context_parallel_size = " << PlanContextParallel(p) << "\n";
  os << "    model.expert_model_parallel_size = " << p.deg.ep << "\n";
  os << "    model.expert_tensor_parallel_size = "
     << (m.experts > 0 ? std::to_string(p.deg.etp) : std::string("None")) << "\n";
  if (m.experts > 0) {  // the plan's dispatcher: DeepEP / HybridEP are the flex dispatcher's backends
    const std::string flex = PlanFlexDispatcher(p);
    os << "    model.moe_token_dispatcher_type = \"" << (flex.empty() ? "alltoall" : "flex") << "\"\n";
    if (!flex.empty()) os << "    model.moe_flex_dispatcher_backend = \"" << flex << "\"\n";
  }
  os << "    model.seq_length = " << p.seq << "\n";
  os << "    cfg.dataset.seq_length = " << p.seq << "\n";
  // The templates' SQuAD set packs sequences offline; Bridge's validate() allows packing only with
  // micro-batch 1 (config.py, "Micro batch size should be 1 when training with packed sequence").
  if (p.micro_batch > 1) {
    os << "    cfg.dataset.enable_offline_packing = False\n    cfg.dataset.offline_packing_specs = None\n";
  } else {
    os << "    if cfg.dataset.offline_packing_specs is not None:\n";
    os << "        cfg.dataset.offline_packing_specs.packed_sequence_size = " << p.seq << "\n";
  }
  os << "    cfg.train.micro_batch_size = " << p.micro_batch << "\n";
  os << "    cfg.train.global_batch_size = " << p.global_batch << "\n";
  if (r == Recompute::kFull)
    os << "    model.recompute_granularity = \"full\"\n    model.recompute_method = \"uniform\"\n    "
          "model.recompute_num_layers = 1\n";
  else if (r == Recompute::kSelective)
    os << "    model.recompute_granularity = \"selective\"\n    model.recompute_modules = "
       << PyList(m.experts > 0 ? std::vector<std::string>{"core_attn", "moe_act"}
                               : std::vector<std::string>{"core_attn"})
       << "\n";
  else
    os << "    model.recompute_granularity = None\n";
  const char* mp = p.compute_dtype == Precision::kFP16  ? "fp16_mixed"
                   : p.compute_dtype == Precision::kFP8 ? "bf16_with_fp8_current_scaling_mixed"
                   : p.compute_dtype == Precision::kMXFP8
                       ? "bf16_with_mxfp8_mixed"  // Bridge mixed_precision.py
                   : p.compute_dtype == Precision::kNVFP4
                       ? "bf16_with_nvfp4_mixed"  // fp4 "e2m1", fp4_recipe "nvfp4", fp4_param_gather
                       : "bf16_mixed";
  os << "    cfg.mixed_precision = mixed_precision." << mp << "()\n";
  if (p.bf16_layers_first > 0 || p.bf16_layers_last > 0)  // the plan's bf16 first / last layers
    os << "    cfg.mixed_precision.first_last_layers_bf16 = True\n"
       << "    cfg.mixed_precision.num_layers_at_start_in_bf16 = " << p.bf16_layers_first << "\n"
       << "    cfg.mixed_precision.num_layers_at_end_in_bf16 = " << p.bf16_layers_last << "\n";
  else if (p.compute_dtype == Precision::kFP8)  // the recipe keeps layers 1 and L in bf16; the plan, none
    os << "    # every layer in fp8, as planned (Bridge's perf recipes do the same)\n"
          "    cfg.mixed_precision.first_last_layers_bf16 = False\n";
  const bool fsdp = p.zero_stage >= 3 && p.mode == FinetuneMode::kFull;
  if (fsdp) {
    os << "    cfg.dist.use_megatron_fsdp = True\n    cfg.ddp.use_megatron_fsdp = True\n";
    os << "    cfg.ddp.data_parallel_sharding_strategy = \"optim_grads_params\"\n";
    os << "    cfg.checkpoint.ckpt_format = \"fsdp_dtensor\"\n";
  }
  os << "    cfg.ddp.use_distributed_optimizer = " << Py(p.zero_stage >= 1) << "\n";
  os << "    cfg.optimizer.use_distributed_optimizer = " << Py(p.zero_stage >= 1) << "\n";
}

// Step 1 of ToMegatronBridgeRecipe: what the recipe cannot express, approximates, or leaves to the user
// (the Megatron export's caveats, minus its LoRA refusal: Bridge has PEFT).
ExportCaveats BridgeCaveats(const Plan& p, const ModelIR& ir, const MegatronExport& mex,
                            const ExportModel& m) {
  ExportCaveats c;
  for (const std::string& u : mex.caveats.unsupported)
    if (u.rfind("LoRA", 0) != 0) c.unsupported.push_back(u);
  // AutoBridge refuses an architecture no bridge is registered for (models/*/..._bridge.py at 067f987d:
  // Mistral's dense bridge only, no Mixtral), as the engine check found.
  if (ir.architecture == "MixtralForCausalLM")
    c.unsupported.push_back(
        "MixtralForCausalLM: Megatron-Bridge has no bridge for it (AutoBridge refuses it)");
  c.approximations = {"model architecture comes from the HF config via AutoBridge (not from onboard's IR)"};
  if (p.mode == FinetuneMode::kFull && FsdpGathersOncePerStep(p))  // Bridge shards full training only
    c.approximations.push_back(MegatronFsdpPerMicroBatchNote());
  if (p.mode == FinetuneMode::kLoRA && p.base_dtype != Precision::kBF16)
    c.approximations.push_back("frozen base in " + std::string(PrecisionName(p.base_dtype)) +
                               ": the recipe keeps it in bf16 (Bridge has no " + PrecisionName(p.base_dtype) +
                               " base for LoRA here)");
  if (p.mode == FinetuneMode::kLoRA) {
    c.approximations.push_back("LoRA alpha = " + std::to_string(kLoraAlphaPerRank) +
                               " * rank (the plan has no alpha; the probe's default ratio)");
    if (m.experts > 0 && !m.lora_adapts_routed_experts()) {
      std::string t;
      for (const std::string& x : LoraTargets(m)) t += (t.empty() ? "" : ", ") + x;
      c.approximations.push_back("LoRA targets " + t +
                                 ": the routed experts are not adapted (the shared experts are the MoE "
                                 "layers' trainable path, core/lora_targets.h)");
    }
    if (p.zero_stage >= 3 && p.deg.dp_shard > 1)
      c.approximations.push_back(
          "the plan FSDP-shards the frozen base over dp_shard=" + S(p.deg.dp_shard) +
          "; this recipe uses the distributed optimizer (Bridge's PEFT recipes do), so base weights "
          "are replicated over data-parallel ranks: check per-device memory");
  }
  if (p.micro_batch > 1)
    c.approximations.push_back(
        "offline sequence packing (the templates' default) is off: Bridge packs only with "
        "micro-batch 1, and the plan's micro-batch is " +
        S(p.micro_batch));
  c.user_supplies = {
      "HF_MODEL_PATH - Hugging Face model id or folder",
      "MEGATRON_CHECKPOINT_DIR - where --import writes the Megatron checkpoint (read as "
      "pretrained_checkpoint)",
      "dataset: the template's default (SQuAD through HF datasets); replace cfg.dataset for your data",
      "optimizer / schedule: the template's defaults (_peft_common: lr 1e-4 cosine; _sft_common: its own)"};
  return c;
}

}  // namespace

std::string ToMegatronBridgeRecipe(const Plan& p, const ModelIR& ir, const LaunchShape& shape) {
  // Step 1: model facts, caveats.
  MegatronExport mex = BuildMegatronExport(p, ir, shape);
  std::vector<std::string> ignored;
  const ExportModel m = DescribeModel(ir, &ignored);
  const ExportCaveats c = BridgeCaveats(p, ir, mex, m);
  // Step 2: the recipe.
  std::ostringstream os;
  Header(os, c, shape);
  os << "import os\nimport sys\n\nimport torch\n";
  os << "from megatron.bridge import AutoBridge\n";
  os << "from megatron.bridge.peft.lora import LoRA\n";
  os << "from megatron.bridge.recipes.common import _peft_common, _sft_common\n";
  os << "from megatron.bridge.training.finetune import finetune\n";
  os << "from megatron.bridge.training.gpt_step import forward_step\n";
  os << "from megatron.bridge.training import mixed_precision\n\n";
  os << "HF_MODEL_PATH = os.environ.get(\"HF_MODEL_PATH\", \"<set HF_MODEL_PATH>\")\n";
  os << "MEGATRON_CHECKPOINT_DIR = os.environ.get(\"MEGATRON_CHECKPOINT_DIR\", \"<set "
        "MEGATRON_CHECKPOINT_DIR>\")\n";
  os << "UNSUPPORTED = " << c.unsupported.size() << "\n";
  os << "LORA = " << Py(p.mode == FinetuneMode::kLoRA) << "\n\n\n";
  os << "def plan_config():\n";
  os << "    cfg = _peft_common() if LORA else _sft_common()\n";
  os << "    cfg.model = "
        "AutoBridge.from_hf_pretrained(HF_MODEL_PATH).to_megatron_provider(load_weights=False)\n";
  os << "    cfg.tokenizer.tokenizer_model = HF_MODEL_PATH\n";
  os << "    cfg.checkpoint.pretrained_checkpoint = MEGATRON_CHECKPOINT_DIR\n";
  os << "    model = cfg.model\n";
  ParallelismAndTraining(os, p, m, mex.args.Value("--pipeline-model-parallel-layout"));
  if (p.mode == FinetuneMode::kLoRA)
    os << "    cfg.peft = LoRA(target_modules=" << PyList(LoraTargets(m)) << ", dim=" << p.lora_rank
       << ", alpha=" << kLoraAlphaPerRank * p.lora_rank << ", dropout=0.0"
       << (m.lora_adapts_routed_experts() ? ", share_expert_adapters=False" : "") << ")\n";
  else
    os << "    cfg.peft = None\n";
  os << "    return cfg\n\n\n";
  os << "if __name__ == \"__main__\":\n";
  os << "    if \"--import\" in sys.argv:\n";
  os << "        AutoBridge.import_ckpt(HF_MODEL_PATH, MEGATRON_CHECKPOINT_DIR)\n";
  os << "        sys.exit(0)\n";
  os << "    if UNSUPPORTED and os.environ.get(\"ONBOARD_FORCE\") != \"1\":\n";
  os << "        print(\"onboard: this plan uses what Megatron-Bridge does not support (see the header)\", "
        "file=sys.stderr)\n";
  os << "        sys.exit(3)\n";
  os << "    finetune(config=plan_config(), forward_step_func=forward_step)\n";
  return os.str();
}

}  // namespace onboard
