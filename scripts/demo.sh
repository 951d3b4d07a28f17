#!/usr/bin/env bash
# The main job on the bundled flagship example. Usage: scripts/demo.sh [BUILD_DIR] [OUT_DIR]
#   Step 1: what the model is (`onboard inspect`).
#   Step 2: the whole agent loop (`onboard run`): templates, plan on the Atlas 950 SuperPoD (128
#           devices), generated + checked KDA/DSA kernels, probe rounds on a proxy over c10d/Gloo,
#           rule-driven adjustments, reports. Wall time per stage is printed as each stage ends.
# The probe rounds train the probe's own recipe (DefaultProbeConfig, as `onboard probe`: LoRA = a
# 400-step base phase, then 150 adapter steps) on 2 ranks, at most 3 rounds.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
OUT=${2:-demo-out}
ONBOARD="$BUILD/onboard"
MODEL=examples/flagship/config.json
TOPOLOGY=examples/topologies/atlas-950-superpod-128.json

echo "== onboard inspect $MODEL --seq 4096"
"$ONBOARD" inspect "$MODEL" --seq 4096

echo
echo "== onboard run $MODEL --topology $TOPOLOGY --mode lora --out $OUT"
start=$(date +%s)
"$ONBOARD" run "$MODEL" --topology "$TOPOLOGY" --mode lora --lora-rank 16 --seq 4096 \
  --probe-ranks 2 --max-rounds 3 --threads 2 --out "$OUT"
end=$(date +%s)
echo
echo "demo: onboard run took $((end - start)) s; open $OUT/report.html (review copy: $OUT/report.md)"
