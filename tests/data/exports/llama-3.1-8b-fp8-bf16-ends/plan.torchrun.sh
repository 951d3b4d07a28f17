#!/usr/bin/env bash
# torchrun launch of this plan, written by `onboard plan --export`: run it on each of the 16 node(s)
# with the same MASTER_ADDR (the first node) and RUN_ID. Target: torchrun of PyTorch >= 2.4 (c10d rendezvous).
# ENGINE picks the export to launch: megatron (Megatron-LM), bridge (Megatron-Bridge), torchtitan (main),
# mindspeed (MindSpeed-LLM on Ascend). Default: megatron.
# You must supply: MASTER_ADDR; the variables the chosen export names in its header.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
NNODES=16
GPUS_PER_NODE=8
: "${MASTER_ADDR:?set MASTER_ADDR to the first node address}"
MASTER_PORT="${MASTER_PORT:-29500}"
RUN_ID="${RUN_ID:-onboard}"
ENGINE="${ENGINE:-megatron}"
RDZV=(--nnodes "$NNODES" --nproc-per-node "$GPUS_PER_NODE" --rdzv-backend c10d
      --rdzv-endpoint "$MASTER_ADDR:$MASTER_PORT" --rdzv-id "$RUN_ID")
case "$ENGINE" in
  megatron) source "$HERE/plan.megatron.sh"; onboard_launch "${RDZV[@]}" ;;
  mindspeed) source "$HERE/plan.mindspeed.sh"; onboard_launch "${RDZV[@]}" ;;
  bridge) exec torchrun "${RDZV[@]}" "$HERE/plan_megatron_bridge.py" ;;
  torchtitan) export PYTHONPATH="$HERE:${PYTHONPATH:-}"
    exec torchrun "${RDZV[@]}" -m torchtitan.train --module plan_torchtitan --config onboard_plan ;;
  *) echo "ENGINE must be megatron, bridge, torchtitan or mindspeed, got '$ENGINE'" >&2; exit 2 ;;
esac
