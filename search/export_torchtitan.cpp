// torchtitan exports:
//   ToTorchtitanConfig: a Python config function for torchtitan main (configured by Python
//     functions returning Trainer.Config since early 2026; no TOML), derived from the model's own
//     baseline in torchtitan/models/<family>/config_registry.py and overriding parallelism,
//     training (token form of the batch), activation checkpointing, LoRA (LoRAConverter) and HF
//     checkpoint loading (CheckpointManager.Config initial_load_in_hf).
//   ToTorchtitanV02Toml: the job TOML for torchtitan v0.2.x, with local_batch_size = the
//     micro-batch (gradient accumulation = global / (local * dp)), the stage split as
//     module_fqns_per_model_part, a [model] section and HF checkpoint loading.
// Names: torchtitan main @ b5bcd76c (2026-08-21) and tag v0.2.2 (torchtitan/config/job_config.py).
#include <sstream>

#include "core/lora_targets.h"
#include "search/export_model.h"
#include "search/plan_export.h"

namespace onboard {

const char* const kTitanMain = "pytorch/torchtitan main @ b5bcd76c (2026-08-21)";
const char* const kTitanV02 = "pytorch/torchtitan v0.2.2 (TOML job config)";

namespace {

// One torchtitan model flavor: which HF models it is, by model_type and (layers, hidden).
struct TitanFlavor {
  const char* hf_model_type;
  int64_t layers, hidden;
  const char* module;   // torchtitan.models.<module>
  const char* flavor;   // model_registry key (main) / model.flavor (v0.2.x)
  const char* base_fn;  // baseline config function in <module>/config_registry.py (main)
  bool in_v02;          // flavor present in v0.2.2
};
const TitanFlavor kFlavors[] = {
    {"llama", 32, 4096, "llama3", "8B", "llama3_8b", true},
    {"llama", 80, 8192, "llama3", "70B", "llama3_70b", true},
    {"llama", 126, 16384, "llama3", "405B", "llama3_405b", true},
    {"qwen3", 28, 1024, "qwen3", "0.6B", "qwen3_0_6b", true},
    {"qwen3", 28, 2048, "qwen3", "1.7B", "qwen3_1_7b", true},
    {"qwen3", 40, 5120, "qwen3", "14B", "qwen3_14b", true},
    {"qwen3", 64, 5120, "qwen3", "32B", "qwen3_32b", true},
    {"qwen3_moe", 48, 2048, "qwen3", "30B-A3B", "qwen3_30b_a3b", true},
    {"deepseek_v3", 27, 2048, "deepseek_v3", "16B", "deepseek_v3_16b", true},
    {"deepseek_v3", 61, 7168, "deepseek_v3", "671B", "deepseek_v3_671b", true},
};

const TitanFlavor* FindFlavor(const ExportModel& m) {
  for (const TitanFlavor& f : kFlavors)
    if (m.model_type == f.hf_model_type && m.layers == f.layers && m.hidden == f.hidden) return &f;
  return nullptr;
}

std::string S(int64_t v) { return std::to_string(v); }

// LoRA targets: last FQN segments of torchtitan's Linear configs for attention and dense /
// shared-expert FFNs: the set kLoraTargets names (core/lora_targets.h) but the routed experts, which
// are grouped parameters, not Linear configs (TitanCaveats states it where the plan adapts them).
std::vector<std::string> LoraTargets(const ExportModel& m) {
  static_assert(kLoraTargets.attention && kLoraTargets.dense_mlp && kLoraTargets.shared_experts &&
                    kLoraTargets.routed_experts_without_shared && !kLoraTargets.output_head,
                "torchtitan's targets below are this set: attention (wq..wo) + dense/shared FFN (w1..w3); "
                "its converter cannot wrap routed experts (grouped parameters)");
  if (m.mla) return {"wq", "wq_a", "wq_b", "wkv_a", "wkv_b", "wo", "w1", "w2", "w3"};
  return {"wq", "wk", "wv", "wqkv", "wo", "w1", "w2", "w3"};
}

// module_fqns_per_model_part from the stage split: tok_embeddings on the first, norm + output on
// the last part.
std::vector<std::vector<std::string>> ModelParts(const Plan& p, const ModelIR& ir, int64_t layers) {
  const std::vector<int64_t> starts = ExportStageStarts(p, ir);
  const std::vector<int64_t> sizes = StageSizes(starts, layers);
  std::vector<std::vector<std::string>> parts;
  for (size_t s = 0; s < starts.size(); ++s) {
    std::vector<std::string> part;
    if (s == 0) part.push_back("tok_embeddings");
    for (int64_t l = starts[s]; l < starts[s] + sizes[s]; ++l) part.push_back("layers." + S(l));
    if (s + 1 == starts.size()) {
      part.push_back("norm");
      part.push_back("output");
    }
    parts.push_back(part);
  }
  return parts;
}

// A basic string, valid in TOML and Python alike: backslashes and quotes escaped.
std::string Quoted(const std::string& v) {
  std::string s = "\"";
  for (char ch : v) s += (ch == '"' || ch == '\\') ? std::string("\\") + ch : std::string(1, ch);
  return s + "\"";
}

std::string List(const std::vector<std::string>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + Quoted(v[i]);
  return s + "]";
}

// Caveats shared by both torchtitan exports.
ExportCaveats TitanCaveats(const ExportModel& m, const Plan& p, const TitanFlavor* f, bool v02) {
  ExportCaveats c;
  if (m.n_kda > 0) c.unsupported.push_back(S(m.n_kda) + " KDA layers: torchtitan has no KDA layer");
  if (!f)
    c.unsupported.push_back("no torchtitan model flavor matches " + m.model_type + " with " + S(m.layers) +
                            " layers, hidden " + S(m.hidden) +
                            " (torchtitan/models has llama3, qwen3, deepseek_v3, gpt_oss, ...): add one");
  else if (v02 && !f->in_v02)
    c.unsupported.push_back("flavor " + std::string(f->flavor) + " is not in v0.2.2");
  if (p.mode == FinetuneMode::kLoRA && v02)
    c.unsupported.push_back("LoRA: torchtitan v0.2.x has no LoRA (main has LoRAConverter)");
  if (p.pipeline_schedule == PipelineSchedule::kDualPipe)
    c.unsupported.push_back(
        "DualPipe schedule: torchtitan's DualPipeV is another schedule (one copy of the stages, "
        "V-shaped); not exported");
  if (p.compute_dtype == Precision::kFP16)
    c.approximations.push_back(
        "fp16 compute: torchtitan's mixed_precision_param is bfloat16|float32; bfloat16 exported");
  if (p.compute_dtype == Precision::kFP8 || p.compute_dtype == Precision::kMXFP8)
    c.approximations.push_back(std::string(PrecisionName(p.compute_dtype)) +
                               " GEMMs: not exported (add a Float8/MXFP8 converter by hand)");
  if (p.compute_dtype == Precision::kNVFP4)
    c.approximations.push_back(
        "nvfp4 GEMMs: not exported (torchtitan has no NVFP4 training converter); bfloat16 exported");
  if (p.bf16_layers_first > 0 || p.bf16_layers_last > 0)
    c.approximations.push_back("bf16 first / last layers (" + S(p.bf16_layers_first) + " / " +
                               S(p.bf16_layers_last) + "): not exported with the quantised GEMMs above");
  if (p.mode == FinetuneMode::kLoRA && p.base_dtype != Precision::kBF16)
    c.approximations.push_back("frozen base in " + std::string(PrecisionName(p.base_dtype)) +
                               ": exported as bf16");
  if (p.mode == FinetuneMode::kLoRA && !v02 && m.lora_adapts_routed_experts())
    c.approximations.push_back(
        "LoRA leaves the routed experts frozen: LoRAConverter wraps Linear configs only and the experts "
        "are grouped parameters (GroupedExperts); the plan adapts them, one adapter per expert, in MoE "
        "layers without a shared expert (core/lora_targets.h), so these MoE layers train no FFN weight "
        "here");
  if (v02 && PlanFlexDispatcher(p) == "hybridep")
    c.approximations.push_back(
        "dispatcher hybridep: v0.2.2 has standard|deepep (expert_parallel_comm_backend); standard exported");
  if (m.mtp_layers > 0)
    c.approximations.push_back("MTP layers: not trained (the baseline's MTP setting is kept)");
  if (p.zero_stage >= 3 && p.deg.dp_shard > 1 && p.deg.pp > 1 && !FsdpGathersOncePerStep(p))
    c.approximations.push_back(
        "fsdp_pipelining per_micro_batch (gathers and reduce-scatters every micro-batch): torchtitan with "
        "PP keeps the stage gathered and reduce-scatters once per step (fsdp_reshard_after_forward "
        "\"default\"; more memory, less traffic than planned; plan with --export torchtitan to cost that)");
  if (p.zero_stage < 3 && p.deg.dp_shard > 1)
    c.approximations.push_back(
        "zero_stage " + S(p.zero_stage) +
        " (weights and gradients replicated over the data ranks): torchtitan has no such "
        "mode; FSDP2 over data_parallel_shard_degree=" +
        S(p.deg.dp_shard) +
        " shards them too (less memory, an all-gather per micro-batch; plan with "
        "--zero-stage 3 to cost that)");
  const std::string mixed = MixedRecomputeNote(p);
  if (!mixed.empty()) c.approximations.push_back(mixed);
  c.user_supplies = {
      "HF_MODEL_PATH - absolute path of the Hugging Face model folder (tokenizer + safetensors)",
      "dataset: the baseline's (c4 through HF datasets); replace it for your data",
      "optimizer / schedule / steps: the baseline's, except steps"};
  return c;
}

void Header(std::ostringstream& os, const char* comment, const char* target, const ExportCaveats& c) {
  os << comment << " torchtitan config for this plan, written by `onboard plan --export`.\n";
  os << comment << " Target: " << target << ".\n";
  auto bullets = [&](const char* title, const std::vector<std::string>& items) {
    if (items.empty()) return;
    os << comment << " " << title << "\n";
    for (const std::string& s : items) os << comment << "   - " << s << "\n";
  };
  bullets("NOT SUPPORTED:", c.unsupported);
  bullets("Exported differently from the plan:", c.approximations);
  bullets("You must supply:", c.user_supplies);
}

// The model, its torchtitan flavor (nullptr = none) and the caveats, for one of the two exports.
struct TitanContext {
  ExportModel m;
  const TitanFlavor* f = nullptr;
  ExportCaveats c;
};
TitanContext Describe(const Plan& p, const ModelIR& ir, bool v02) {
  TitanContext t;
  std::vector<std::string> notes;
  t.m = DescribeModel(ir, &notes);
  t.f = FindFlavor(t.m);
  t.c = TitanCaveats(t.m, p, t.f, v02);
  return t;
}

// v0.2.x [training] / [parallelism] / [activation_checkpoint] sections (parts: the stage split as
// module_fqns_per_model_part, empty = not exported).
void V02Training(std::ostringstream& os, const Plan& p) {
  const bool pp = p.deg.pp > 1;
  os << "\n[training]\n";
  os << "# local_batch_size = sequences per data-parallel rank per forward: the micro-batch";
  os << (pp ? " times the pipeline micro-batches (split by pipeline_parallel_microbatch_size)\n" : "\n");
  os << "local_batch_size = " << (pp ? p.micro_batch * p.num_micro_batches : p.micro_batch) << "\n";
  os << "global_batch_size = " << p.global_batch << "\n";
  os << "seq_len = " << p.seq << "\n";
  os << "steps = 1000\n";
  os << "mixed_precision_param = \"bfloat16\"\n";
  os << "dataset = \"c4\"\n";
}
void V02Parallelism(std::ostringstream& os, const Plan& p,
                    const std::vector<std::vector<std::string>>& parts) {
  os << "\n[parallelism]\n";
  os << "data_parallel_replicate_degree = " << p.deg.dp_replicate << "\n";
  os << "data_parallel_shard_degree = " << p.deg.dp_shard << "\n";
  os << "tensor_parallel_degree = " << p.deg.tp << "\n";
  os << "context_parallel_degree = " << PlanContextParallel(p) << "\n";
  os << "pipeline_parallel_degree = " << p.deg.pp << "\n";
  if (p.deg.pp > 1) {
    os << "pipeline_parallel_schedule = \"" << (p.deg.interleave > 1 ? "Interleaved1F1B" : "1F1B") << "\"\n";
    os << "pipeline_parallel_microbatch_size = " << p.micro_batch << "\n";
  }
  if (!parts.empty()) {
    os << "module_fqns_per_model_part = [\n";
    for (const auto& part : parts) os << "  " << List(part) << ",\n";
    os << "]\n";
  }
  os << "expert_parallel_degree = " << p.deg.ep << "\n";
  os << "expert_tensor_parallel_degree = " << p.deg.etp << "\n";
  if (PlanFlexDispatcher(p) == "deepep") os << "expert_parallel_comm_backend = \"deepep\"\n";
}
void V02ActivationCheckpoint(std::ostringstream& os, const Plan& p) {
  const Recompute r = StrongestRecompute(p);
  os << "\n[activation_checkpoint]\nmode = \""
     << (r == Recompute::kFull        ? "full"
         : r == Recompute::kSelective ? "selective"
                                      : "none")
     << "\"\n";
  if (r == Recompute::kSelective) os << "selective_ac_option = \"op\"\n";
}

// The plan's ParallelismConfig (degrees; with PP the schedule, micro-batches and each stage's modules).
void TitanParallelism(std::ostringstream& os, const Plan& p, const ModelIR& ir, const ExportModel& m) {
  os << "    config.parallelism = ParallelismConfig(\n";
  os << "        data_parallel_replicate_degree=" << p.deg.dp_replicate << ",\n";
  os << "        data_parallel_shard_degree=" << p.deg.dp_shard << ",\n";
  os << "        tensor_parallel_degree=" << p.deg.tp << ",\n";
  os << "        enable_sequence_parallel=" << (p.deg.sequence_parallel ? "True" : "False") << ",\n";
  os << "        context_parallel_degree=" << PlanContextParallel(p) << ",\n";
  os << "        expert_parallel_degree=" << p.deg.ep << ",\n";
  os << "        pipeline_parallel_degree=" << p.deg.pp << ",\n";
  if (p.deg.pp > 1) {
    os << "        pipeline_parallel_schedule=\"" << (p.deg.interleave > 1 ? "Interleaved1F1B" : "1F1B")
       << "\",\n";
    os << "        num_pp_microbatches=" << p.num_micro_batches << ",\n";
    os << "        module_fqns_per_model_part=[\n";
    for (const auto& part : ModelParts(p, ir, m.layers)) os << "            " << List(part) << ",\n";
    os << "        ],\n";
  }
  os << "    )\n";
}

// The plan's TrainingConfig (tokens per micro-batch and step, bf16 params); `flex` = the plan's flex
// dispatcher ("" = all-to-all).
void TitanTraining(std::ostringstream& os, const Plan& p, const std::string& flex) {
  os << "    config.training = TrainingConfig(\n";
  os << "        num_tokens_per_microbatch_per_dp_rank=" << p.micro_batch << " * " << p.seq << ",\n";
  os << "        num_tokens_per_train_step=" << p.global_batch << " * " << p.seq << ",\n";
  os << "        max_context_length=" << p.seq << ",\n";
  os << "        steps=int(os.environ.get(\"TRAIN_STEPS\", \"1000\")),\n";
  os << "        mixed_precision_param=\"bfloat16\",\n";
  // Trainer.Config._validate_cuda_graphs (trainer.py): CUDA graphs (on by default) refuse pipeline
  // parallelism, and expert parallelism over the default all-to-all dispatcher (it syncs with the CPU).
  if (p.deg.pp > 1 || p.deg.ep > 1)
    os << "        disable_cuda_graphs=True,  # torchtitan's CUDA graphs refuse "
       << (p.deg.pp > 1   ? "pipeline"
           : flex.empty() ? "all-to-all expert"
                          : flex + " expert")
       << " parallelism\n";
  os << "    )\n";
}

}  // namespace

std::string ToTorchtitanConfig(const Plan& p, const ModelIR& ir, const LaunchShape& shape) {
  const TitanContext t = Describe(p, ir, false);
  const ExportModel& m = t.m;
  const TitanFlavor* f = t.f;
  const ExportCaveats& c = t.c;
  std::ostringstream os;
  Header(os, "#", kTitanMain, c);
  os << "# Launch on every node (this file importable as plan_torchtitan):\n";
  os << "#   torchrun --nnodes " << shape.nnodes << " --nproc-per-node " << shape.gpus_per_node
     << " -m torchtitan.train --module plan_torchtitan --config onboard_plan\n";
  os << "import os\n\n";
  if (!c.unsupported.empty() || !f) {
    os << "\ndef onboard_plan():\n";
    os << "    raise NotImplementedError(\"onboard: torchtitan cannot train this plan: see the header\")\n";
    return os.str();
  }
  const Recompute r = StrongestRecompute(p);
  os << "from torchtitan.components.checkpointer import CheckpointManager\n";
  os << "from torchtitan.components.lora import LoRAConverter\n";
  os << "from torchtitan.config import ParallelismConfig, TrainingConfig\n";
  os << "from torchtitan.distributed.activation_checkpoint import FullAC, SelectiveAC\n";
  os << "from torchtitan.models." << f->module << " import model_registry\n";
  os << "from torchtitan.models." << f->module << ".config_registry import " << f->base_fn << "\n";
  os << "from torchtitan.trainer import Trainer\n\n";
  os << "HF_MODEL_PATH = os.environ.get(\"HF_MODEL_PATH\", \"/set/HF_MODEL_PATH\")\n\n\n";
  os << "def onboard_plan() -> Trainer.Config:\n";
  os << "    config = " << f->base_fn << "()\n";
  // The plan's dispatcher (model_registry's moe_comm_backend: standard | deepep | hybridep) and LoRA.
  const std::string flex = m.experts > 0 ? PlanFlexDispatcher(p) : "";
  std::string spec_args;
  if (!flex.empty()) spec_args += ", moe_comm_backend=" + Quoted(flex);
  if (p.mode == FinetuneMode::kLoRA)
    spec_args += ", converters=[LoRAConverter.Config(rank=" + S(p.lora_rank) +
                 ", alpha=" + S(kLoraAlphaPerRank * p.lora_rank) +
                 ".0, target_modules=" + List(LoraTargets(m)) + ")]";
  if (!spec_args.empty())
    os << "    config.model_spec = model_registry(\"" << f->flavor << "\"" << spec_args << ")\n";
  os << "    config.hf_assets_path = HF_MODEL_PATH\n";
  TitanParallelism(os, p, ir, m);
  TitanTraining(os, p, flex);
  os << "    config.activation_checkpoint = "
     << (r == Recompute::kFull        ? "FullAC.Config()"
         : r == Recompute::kSelective ? "SelectiveAC.Config()"
                                      : "None")
     << "\n";
  os << "    config.checkpoint = CheckpointManager.Config(\n";
  os << "        enable=True,\n        initial_load_path=HF_MODEL_PATH,\n        initial_load_in_hf=True,\n";
  os << "        initial_load_model_only=True,\n        interval=500,\n    )\n";
  os << "    return config\n";
  return os.str();
}

std::string ToTorchtitanV02Toml(const Plan& p, const ModelIR& ir, const LaunchShape& shape) {
  const TitanContext t = Describe(p, ir, true);
  std::ostringstream os;
  Header(os, "#", kTitanV02, t.c);
  os << "# Launch on every node: torchrun --nnodes " << shape.nnodes << " --nproc-per-node "
     << shape.gpus_per_node << " -m torchtitan.train --job.config_file THIS\n";
  os << "# The placeholders <HF_MODEL_PATH> must be replaced (TOML does not expand environment variables).\n";
  if (!t.c.unsupported.empty()) {
    // A comment alone does not stop a launch (v0.2.2 trains a LoRA plan as a full fine-tune): an
    // unknown section makes torchtitan's ConfigManager refuse the file until the user removes it.
    os << "# onboard: NOT LAUNCHABLE as is (see NOT SUPPORTED above); torchtitan refuses the next section.\n";
    os << "\n[onboard_not_launchable]\nreason = " << Quoted(t.c.unsupported.front()) << "\n";
  }
  os << "\n[job]\ndump_folder = \"./outputs\"\ndescription = \"onboard plan export\"\n";
  os << "\n[model]\nname = \"" << (t.f ? t.f->module : "UNSUPPORTED") << "\"\nflavor = \""
     << (t.f ? t.f->flavor : "UNSUPPORTED") << "\"\n";
  os << "hf_assets_path = \"<HF_MODEL_PATH>\"\n";
  V02Training(os, p);
  V02Parallelism(os, p,
                 p.deg.pp > 1 ? ModelParts(p, ir, t.m.layers) : std::vector<std::vector<std::string>>{});
  os << "\n[checkpoint]\nenable = true\nfolder = \"checkpoint\"\ninitial_load_path = \"<HF_MODEL_PATH>\"\n";
  os << "initial_load_in_hf = true\ninitial_load_model_only = true\n";
  V02ActivationCheckpoint(os, p);
  return os.str();
}

std::string ToTorchtitanToml(const Plan& p) {
  std::ostringstream os;
  os << "# torchtitan v0.2.x parallelism fragment (no model section: see plan.torchtitan-v0.2.toml from "
        "--export all)\n";
  V02Parallelism(os, p, {});
  V02ActivationCheckpoint(os, p);
  V02Training(os, p);
  return os.str();
}

}  // namespace onboard
