// Exports of a Plan for the engines users already run, and launchers. Each export names the
// engine and version it targets, says what that engine does not support for this model/plan and
// what the user must still supply. One file per engine:
//   search/export_megatron*.cpp   Megatron-LM argument list (+ checker of Megatron's rules)
//   search/export_bridge.cpp      Megatron-Bridge (NeMo) Python recipe: the launchable path for LoRA
//   search/export_torchtitan.cpp  torchtitan main Python config function; torchtitan v0.2.x TOML
//   search/export_mindspeed.cpp   MindSpeed-LLM (Ascend) arguments where they differ from Megatron's
//   search/export_launchers.cpp   torchrun command line and Slurm sbatch script
#pragma once

#include <string>
#include <vector>

#include "core/model_ir.h"
#include "core/plan.h"
#include "core/status.h"
#include "search/export_megatron.h"

namespace onboard {

struct ExportFile {
  std::string name;      // file name inside the export folder ("plan.megatron.sh")
  std::string text;
};

struct ExportOptions {
  int64_t devices_per_node = 8;   // GPUs/NPUs per node (topology's first tier)
};

// Every export of `plan` for `model` (plan.megatron.sh, plan_megatron_bridge.py,
// plan.torchtitan.py, plan.torchtitan-v0.2.toml, plan.mindspeed.sh, plan.torchrun.sh,
// plan.sbatch, EXPORTS.md), in that order.
std::vector<ExportFile> BuildAllExports(const Plan& plan, const ModelIR& model, const ExportOptions& options = {});

// Writes BuildAllExports into `dir` (created if missing; files overwritten). Errors name the path.
Status WriteAllExports(const Plan& plan, const ModelIR& model, const std::string& dir,
                       const ExportOptions& options = {});

// plan.megatron.sh as written, read back (ParseMegatronScript: ${VAR:-default} read as default)
// and checked against the Megatron-LM rules; a script that does not parse is one failure.
std::vector<MegatronRuleFailure> CheckMegatronScript(const std::string& script);

// One export each (the files above).
std::string ToMegatronScript(const Plan& plan, const ModelIR& model, const LaunchShape& shape);
std::string ToMegatronBridgeRecipe(const Plan& plan, const ModelIR& model, const LaunchShape& shape);
std::string ToTorchtitanConfig(const Plan& plan, const ModelIR& model, const LaunchShape& shape);
std::string ToTorchtitanV02Toml(const Plan& plan, const ModelIR& model, const LaunchShape& shape);
std::string ToMindSpeedScript(const Plan& plan, const ModelIR& model, const LaunchShape& shape);
std::string ToTorchrunLauncher(const Plan& plan, const LaunchShape& shape);
std::string ToSlurmSbatch(const Plan& plan, const LaunchShape& shape);

// The loss over the logits the engine of export `engine` (a plan --export name) runs, as a
// PlanRequest::cross_entropy name (search/cross_entropy_cost.h): torchtitan and torchtitan-v0.2: torch
// (torchtitan components/loss.py cross_entropy_loss); megatron, bridge, mindspeed: megatron
// (Megatron-Core's vocab_parallel_cross_entropy: the exports set no --cross-entropy-loss-fusion, and
// Bridge's default 'native' fusion keeps the same tensors); all, torchrun, slurm: "" (the engine is
// picked at launch, each with its own).
std::string ExportEngineLoss(const std::string& engine);
// The loss a plan is costed with: `named` (plan --cross-entropy) when given, else the engine's of
// export `engine` (ExportEngineLoss), else Megatron-Core's ("megatron", PlanRequest's default).
std::string CostedLoss(const std::string& named, const std::string& engine);
// The data parallelism the engine of export `engine` runs, as the search's inputs. torchtitan and
// torchtitan-v0.2: zero_stage 3 (FSDP2 is its only sharded data parallelism, no ZeRO-1 mode) and
// fsdp_pipelining per_step (torch FSDP2 under torch.distributed.pipelining); every other: zero_stage 0
// (searched: FSDP and the distributed optimizer) and per_micro_batch (Megatron-FSDP).
struct EngineDataParallel {
  int64_t zero_stage = 0;                                           // PlanConstraints::zero_stage
  FsdpPipelining fsdp_pipelining = FsdpPipelining::kPerMicroBatch;  // PlanRequest::fsdp_pipelining
};
EngineDataParallel ExportEngineDataParallel(const std::string& engine);

// Parallelism-only fragments of a Plan without its model (kept for callers that have no IR:
// agent/orchestrator_stages.cpp). Same flag mapping as the full exports, no model section.
std::string ToTorchtitanToml(const Plan& plan);   // [parallelism] [activation_checkpoint] [training], v0.2.x keys
std::string ToMegatronArgs(const Plan& plan);     // one line of Megatron-LM parallelism/batch/optimizer flags

}  // namespace onboard
