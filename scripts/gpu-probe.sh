#!/usr/bin/env bash
# Probe section of the GPU check (backends/, h5): builds `onboard` against the device's LibTorch
# 2.x (CUDA, so USE_C10D_NCCL is defined and c10d_compat.cpp compiles its NCCL lines), then runs a
# short 2-process probe of the flagship proxy (Gloo, CPU tensors) and the backends tests.
#   usage: scripts/gpu-probe.sh [BUILD_DIR] [MODEL]   (defaults: build-gpu, examples/flagship/config.json)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build-gpu}
MODEL=${2:-$ROOT/examples/flagship/config.json}
PREFIX=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)' 2>/dev/null || true)
if [ -z "$PREFIX" ]; then
  echo "gpu-probe: no Python torch found; skipping" >&2
  exit 0
fi
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_PREFIX_PATH="$PREFIX" >/dev/null
cmake --build "$BUILD" --target onboard test_backends -j "$(nproc)"
"$BUILD/onboard" probe "$MODEL" --ranks 2 --steps 10 --out "$BUILD/gpu-probe" || echo "gpu-probe: probe exit $?"
"$BUILD/tests/test_backends" || echo "gpu-probe: backends tests failed"
