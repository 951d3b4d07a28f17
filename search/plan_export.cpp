// BuildAllExports / WriteAllExports: every engine export and launcher of one plan, plus an
// EXPORTS.md index of what each file targets; and ToMegatronArgs, the parallelism-only fragment for
// callers without the model (same flag mapping as the full export; ToTorchtitanToml is in
// export_torchtitan.cpp).
#include "search/plan_export.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "search/cross_entropy_cost.h"
#include "search/export_model.h"

namespace onboard {

std::string ToMegatronScript(const Plan& p, const ModelIR& ir, const LaunchShape& shape) {
  return RenderMegatronScript(BuildMegatronExport(p, ir, shape), "Megatron-LM", kMegatronTarget,
                              "${MEGATRON_LM_DIR:?set MEGATRON_LM_DIR}/pretrain_gpt.py");
}

std::vector<MegatronRuleFailure> CheckMegatronScript(const std::string& script) {
  auto args = ParseMegatronScript(script, "plan.megatron.sh");
  if (!args.ok()) return {{"parse", args.status().ToString(), "search/export_megatron_script.cpp"}};
  return CheckMegatronArgs(*args);
}

namespace {

std::string Index(const Plan& p, const ModelIR& ir, const LaunchShape& shape, const std::string& megatron_script) {
  std::ostringstream os;
  os << "# Exports of the plan for " << ir.name << "\n\n";
  os << "Plan: " << p.deg.world() << " devices as " << shape.nnodes << " node(s) x " << shape.gpus_per_node
     << "; dp_replicate=" << p.deg.dp_replicate << " dp_shard=" << p.deg.dp_shard << " tp=" << p.deg.tp << " pp="
     << p.deg.pp << " (interleave " << p.deg.interleave << ") ep=" << p.deg.ep << "; micro-batch " << p.micro_batch
     << ", global batch " << p.global_batch << " x " << p.seq << " tokens; "
     << (p.mode == FinetuneMode::kLoRA ? "LoRA rank " + std::to_string(p.lora_rank) : std::string("full fine-tuning"))
     << ".\n\n";
  os << "| file | engine | launch |\n|---|---|---|\n";
  os << "| plan.megatron.sh | " << kMegatronTarget << " | `bash plan.megatron.sh` (one node) |\n";
  os << "| plan_megatron_bridge.py | " << kBridgeTarget
     << "; the LoRA path | `python plan_megatron_bridge.py --import`, then torchrun |\n";
  os << "| plan_torchtitan.py | " << kTitanMain
     << ", Python config function | `torchrun -m torchtitan.train --module plan_torchtitan --config "
        "onboard_plan` |\n";
  os << "| plan.torchtitan-v0.2.toml | " << kTitanV02
     << " | `torchrun -m torchtitan.train --job.config_file plan.torchtitan-v0.2.toml` |\n";
  os << "| plan.mindspeed.sh | " << kMindSpeedTarget << " (Ascend) | `bash plan.mindspeed.sh` (one node) |\n";
  os << "| plan.torchrun.sh | torchrun, every node | `MASTER_ADDR=... ENGINE=... bash plan.torchrun.sh` |\n";
  os << "| plan.sbatch | Slurm | `sbatch plan.sbatch` |\n\n";
  os << "Each file's header says what its engine does not support for this plan and what you must supply.\n\n";
  // The written plan.megatron.sh, read back and checked against the Megatron-LM rules onboard encodes.
  const auto failures = CheckMegatronScript(megatron_script);
  os << "## Megatron-LM argument rules\n\n";
  if (failures.empty())
    os << "plan.megatron.sh passes all " << MegatronRules().size() << " rules of search/export_megatron_rules.cpp.\n";
  else
    for (const auto& f : failures) os << "- FAILS " << f.rule << ": " << f.message << " (" << f.source << ")\n";
  os << "\nThe rules are re-stated from Megatron-LM's source with citations. Megatron-LM's and "
        "torchtitan's own\nvalidation runs on these files with scripts/check-exports-with-engines.sh "
        "(it needs the engines' checkouts).\n";
  return os.str();
}

}  // namespace

std::vector<ExportFile> BuildAllExports(const Plan& p, const ModelIR& ir, const ExportOptions& o) {
  const LaunchShape shape = ShapeFor(p, o.devices_per_node);
  const std::string megatron = ToMegatronScript(p, ir, shape);
  return {
      {"plan.megatron.sh", megatron},
      {"plan_megatron_bridge.py", ToMegatronBridgeRecipe(p, ir, shape)},
      {"plan_torchtitan.py", ToTorchtitanConfig(p, ir, shape)},
      {"plan.torchtitan-v0.2.toml", ToTorchtitanV02Toml(p, ir, shape)},
      {"plan.mindspeed.sh", ToMindSpeedScript(p, ir, shape)},
      {"plan.torchrun.sh", ToTorchrunLauncher(p, shape)},
      {"plan.sbatch", ToSlurmSbatch(p, shape)},
      {"EXPORTS.md", Index(p, ir, shape, megatron)},
  };
}

Status WriteAllExports(const Plan& p, const ModelIR& ir, const std::string& dir, const ExportOptions& o) {
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
    return BadInput(dir, "--out", std::string("cannot create directory: ") + strerror(errno), dir);
  for (const ExportFile& f : BuildAllExports(p, ir, o)) {
    const std::string path = dir + "/" + f.name;
    std::ofstream out(path);
    out << f.text;
    if (!out) return IoError("cannot write " + path);
    if (f.name.size() > 3 && f.name.substr(f.name.size() - 3) == ".sh") chmod(path.c_str(), 0755);
  }
  return Status::Ok();
}

std::string ToMegatronArgs(const Plan& p) {
  // The parallelism / batch / optimizer flags of the full export, on a one-line list.
  ModelIR none;
  const MegatronExport e = BuildMegatronExport(p, none, ShapeFor(p, 8));
  static const char* const kKeep[] = {"--tensor-model-parallel-size",
                                      "--pipeline-model-parallel-size",
                                      "--context-parallel-size",
                                      "--expert-model-parallel-size",
                                      "--expert-tensor-parallel-size",
                                      "--sequence-parallel",
                                      "--use-megatron-fsdp",
                                      "--data-parallel-sharding-strategy",
                                      "--use-distributed-optimizer",
                                      "--ckpt-format",
                                      "--overlap-grad-reduce",
                                      "--overlap-param-gather",
                                      "--recompute-granularity",
                                      "--recompute-method",
                                      "--recompute-num-layers",
                                      "--bf16",
                                      "--fp16",
                                      "--fp8-format",
                                      "--fp8-recipe",
                                      "--fp4-format",
                                      "--fp4-recipe",
                                      "--micro-batch-size",
                                      "--global-batch-size",
                                      "--seq-length"};
  std::string line;
  for (const auto& [flag, value] : e.args.flags)
    for (const char* k : kKeep)
      if (flag == k) line += (line.empty() ? "" : " ") + flag + (value.empty() ? "" : " " + value);
  if (p.deg.interleave > 1) line += " --num-virtual-stages-per-pipeline-rank " + std::to_string(p.deg.interleave);
  return line;
}

std::string ExportEngineLoss(const std::string& engine) {
  if (engine.rfind("torchtitan", 0) == 0) return "torch";
  if (engine == "megatron" || engine == "bridge" || engine == "mindspeed") return "megatron";
  return "";
}

EngineDataParallel ExportEngineDataParallel(const std::string& engine) {
  if (engine.rfind("torchtitan", 0) == 0) return {3, FsdpPipelining::kPerStep};
  return {};
}

std::string CostedLoss(const std::string& named, const std::string& engine) {
  if (!named.empty()) return named;
  const std::string runs = ExportEngineLoss(engine);
  return runs.empty() ? kDefaultCrossEntropy : runs;
}

}  // namespace onboard
