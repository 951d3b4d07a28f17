// Launchers of a plan: plan.torchrun.sh (one torchrun per node, c10d rendezvous at MASTER_ADDR)
// and plan.sbatch (Slurm: one task per node, each running plan.torchrun.sh through srun; the first
// node of the allocation is the rendezvous host). The engine scripts (plan.megatron.sh,
// plan.mindspeed.sh) define onboard_launch, which the torchrun launcher calls with the
// rendezvous arguments; the Python exports are launched directly.
#include <sstream>

#include "search/plan_export.h"

namespace onboard {

std::string ToTorchrunLauncher(const Plan& p, const LaunchShape& shape) {
  const bool lora = p.mode == FinetuneMode::kLoRA;
  std::ostringstream os;
  os << "#!/usr/bin/env bash\n";
  os << "# torchrun launch of this plan, written by `onboard plan --export`: run it on each of the " << shape.nnodes
     << " node(s)\n";
  os << "# with the same MASTER_ADDR (the first node) and RUN_ID. Target: torchrun of PyTorch >= 2.4 (c10d rendezvous).\n";
  os << "# ENGINE picks the export to launch: megatron (Megatron-LM), bridge (Megatron-Bridge), torchtitan (main),\n";
  os << "# mindspeed (MindSpeed-LLM on Ascend). Default: " << (lora ? "bridge (LoRA plan: Megatron-LM has no LoRA)" : "megatron")
     << ".\n";
  os << "# You must supply: MASTER_ADDR; the variables the chosen export names in its header.\n";
  os << "set -euo pipefail\n";
  os << "HERE=\"$(cd \"$(dirname \"${BASH_SOURCE[0]}\")\" && pwd)\"\n";
  os << "NNODES=" << shape.nnodes << "\n";
  os << "GPUS_PER_NODE=" << shape.gpus_per_node << "\n";
  os << ": \"${MASTER_ADDR:?set MASTER_ADDR to the first node address}\"\n";
  os << "MASTER_PORT=\"${MASTER_PORT:-29500}\"\n";
  os << "RUN_ID=\"${RUN_ID:-onboard}\"\n";
  os << "ENGINE=\"${ENGINE:-" << (lora ? "bridge" : "megatron") << "}\"\n";
  os << "RDZV=(--nnodes \"$NNODES\" --nproc-per-node \"$GPUS_PER_NODE\" --rdzv-backend c10d\n";
  os << "      --rdzv-endpoint \"$MASTER_ADDR:$MASTER_PORT\" --rdzv-id \"$RUN_ID\")\n";
  os << "case \"$ENGINE\" in\n";
  os << "  megatron) source \"$HERE/plan.megatron.sh\"; onboard_launch \"${RDZV[@]}\" ;;\n";
  os << "  mindspeed) source \"$HERE/plan.mindspeed.sh\"; onboard_launch \"${RDZV[@]}\" ;;\n";
  os << "  bridge) exec torchrun \"${RDZV[@]}\" \"$HERE/plan_megatron_bridge.py\" ;;\n";
  os << "  torchtitan) export PYTHONPATH=\"$HERE:${PYTHONPATH:-}\"\n";
  os << "    exec torchrun \"${RDZV[@]}\" -m torchtitan.train --module plan_torchtitan --config onboard_plan ;;\n";
  os << "  *) echo \"ENGINE must be megatron, bridge, torchtitan or mindspeed, got '$ENGINE'\" >&2; exit 2 ;;\n";
  os << "esac\n";
  return os.str();
}

std::string ToSlurmSbatch(const Plan& p, const LaunchShape& shape) {
  std::ostringstream os;
  os << "#!/usr/bin/env bash\n";
  os << "#SBATCH --job-name=onboard-plan\n";
  os << "#SBATCH --nodes=" << shape.nnodes << "\n";
  os << "#SBATCH --ntasks-per-node=1\n";
  os << "#SBATCH --gpus-per-node=" << shape.gpus_per_node << "\n";
  os << "#SBATCH --exclusive\n";
  os << "#SBATCH --output=onboard-plan-%j.out\n";
  os << "# Slurm batch script of this plan (" << p.deg.world() << " devices), written by `onboard plan --export`.\n";
  os << "# Target: Slurm >= 22.05 (sbatch/srun). Submit from the export folder: sbatch plan.sbatch\n";
  os << "# One task per node runs plan.torchrun.sh; the first node of the allocation hosts the rendezvous.\n";
  os << "# Ascend clusters: replace --gpus-per-node by the site's NPU resource (e.g. --gres=npu:" << shape.gpus_per_node << ").\n";
  os << "# You must supply: the account/partition/time flags of your site; ENGINE and the variables its export names.\n";
  os << "set -euo pipefail\n";
  os << "HERE=\"${SLURM_SUBMIT_DIR:-$(pwd)}\"\n";
  os << "MASTER_ADDR=\"$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n 1)\"\n";
  os << "export MASTER_ADDR\n";
  os << "export MASTER_PORT=\"${MASTER_PORT:-29500}\"\n";
  os << "export RUN_ID=\"onboard-${SLURM_JOB_ID}\"\n";
  os << "srun --kill-on-bad-exit=1 --ntasks-per-node=1 bash \"$HERE/plan.torchrun.sh\"\n";
  return os.str();
}

}  // namespace onboard
