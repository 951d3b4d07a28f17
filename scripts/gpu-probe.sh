#!/usr/bin/env bash
# Probe section of the GPU check (backends/, issue 5): builds `onboard` + test_backends against the
# device's Python torch 2.x (a CUDA LibTorch, so backends/CMakeLists.txt defines USE_C10D_NCCL and
# c10d_compat.cpp compiles its NCCL lines), then runs the probes one machine allows.
#   usage: scripts/gpu-probe.sh [BUILD_DIR] [MODEL]   (defaults: build-gpu, examples/flagship/config.json)
#   env:   GPU_PROBE_STEPS (60), GPU_PROBE_TIMEOUT (s per probe, 180), GPU_PROBE_BUDGET_S (s for the
#          whole script, 480: later steps are skipped, and say so, once it is spent),
#          GPU_PROBE_TEST_FILTER (gtest filter for test_backends, default all), ONBOARD_NVCC
# What runs, by GPU count (NCCL needs one GPU per rank: 2 ranks on one GPU is refused by NCCL):
#   >= 2 GPUs: 2-rank probe with ONBOARD_PROBE_BACKEND=nccl --device cuda (rank r on cuda:r)
#   always:    2-rank probe on Gloo (CPU tensors: the 2.x c10d::Backend path of the same binary)
#   >= 1 GPU:  1-rank probe with --device cuda (CUDA tensors, no communication)
#   So on one GPU (one H200) NCCL is compiled and linked but its collectives do not run.
#   (The --device runs are skipped, with a message, if `onboard probe --help` lacks --device.)
# Step 1  Python torch: cmake prefix, version, CUDA, C++11 ABI, GPU count; nccl.h (pip nvidia-nccl, CUDA)
# Step 2  configure + build onboard and test_backends (log: BUILD/gpu-probe/build.log)
# Step 3  probes (each under `timeout`), Step 4  test_backends
# Exit: 0 = all ran and passed, or no Python torch (skipped, says so); 1 = something failed or was
#       skipped for the time budget. Measured here (CPU, Debian torch through a stand-in module):
#       probe 9.6 s, test_backends 42-62 s, cold build 1068 s on 2 shared cores.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build-gpu}
MODEL=${2:-$ROOT/examples/flagship/config.json}
STEPS=${GPU_PROBE_STEPS:-60}  # 60: the 2-rank flagship proxy converges (9.7 s on 2 CPU cores)
PROBE_TIMEOUT=${GPU_PROBE_TIMEOUT:-180}
BUDGET=${GPU_PROBE_BUDGET_S:-480}
FILTER=${GPU_PROBE_TEST_FILTER:-*}
LOGDIR="$BUILD/gpu-probe"
status=0
say() { echo "gpu-probe: $*"; }
over_budget() {  # $1 = step name; true (and says so) when the budget is spent
  if [ "$SECONDS" -ge "$BUDGET" ]; then
    say "SKIPPED $1: ${SECONDS}s of the ${BUDGET}s budget spent (counts as a failure)"; status=1; return 0
  fi
  return 1
}

# Step 1
info=$(python3 - <<'EOF' 2>/dev/null || true
import os, torch
nccl = ""
try:
    import nvidia.nccl as m  # pip wheels ship nccl.h here, not under torch/include
    for p in list(m.__path__):
        if os.path.exists(os.path.join(p, "include", "nccl.h")):
            nccl = os.path.join(p, "include")
except Exception:
    pass
print(torch.utils.cmake_prefix_path)
print(torch.__version__)
print(torch.version.cuda or "")
print(int(torch.compiled_with_cxx11_abi()))
print(torch.cuda.device_count() if torch.cuda.is_available() else 0)
print(nccl)
EOF
)
if [ -z "$info" ]; then
  say "no Python torch found (python3 -c 'import torch' fails): probe section skipped"
  exit 0
fi
mapfile -t f <<<"$info"
PREFIX=${f[0]}; TVER=${f[1]:-?}; TCUDA=${f[2]:-}; ABI=${f[3]:-0}; NGPU=${f[4]:-0}; NCCL_INC=${f[5]:-}
say "torch $TVER (CUDA ${TCUDA:-none}, C++11 ABI $ABI) at $PREFIX; $NGPU GPU(s)"
if [ "$ABI" != 1 ]; then
  say "FAIL: torch $TVER uses the pre-C++11 ABI (_GLIBCXX_USE_CXX11_ABI=0); onboard's other libraries"
  say "      (Debian fmt, protobuf, sqlite, CLI11) use the C++11 ABI, so a mixed build cannot link."
  say "      Use a torch >= 2.7 wheel or the cxx11-abi LibTorch zip (CMAKE_PREFIX_PATH)."
  exit 1
fi
if [ -z "$NCCL_INC" ]; then
  for d in "${CUDA_HOME:-/usr/local/cuda}/include" /usr/include; do
    if [ -f "$d/nccl.h" ]; then NCCL_INC=$d; break; fi
  done
fi
if [ -n "$NCCL_INC" ]; then say "nccl.h in $NCCL_INC"; else say "no nccl.h found: the build will be Gloo-only (CMake warns)"; fi
NVCC=${ONBOARD_NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
# torch's CMake config enables the CUDA language: it needs nvcc and an arch list.
export CUDACXX=${CUDACXX:-$NVCC}
export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0}

# Step 2
cached=$(sed -n 's/^Torch_DIR:[A-Z]*=//p' "$BUILD/CMakeCache.txt" 2>/dev/null || true)
if [ -n "$cached" ] && [ "$(realpath -m "$cached")" != "$(realpath -m "$PREFIX/Torch")" ]; then
  say "$BUILD is configured against $cached, not this torch: using $BUILD-pytorch"
  BUILD=$BUILD-pytorch
  LOGDIR="$BUILD/gpu-probe"
fi
mkdir -p "$LOGDIR"
cmake_args=(-S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_PREFIX_PATH="$PREFIX")
[ -n "$NCCL_INC" ] && cmake_args+=(-DONBOARD_NCCL_INCLUDE_DIR="$NCCL_INC")
if ! cmake "${cmake_args[@]}" >"$LOGDIR/build.log" 2>&1; then
  say "FAIL: configure against torch $TVER failed; last lines of $LOGDIR/build.log:"
  tail -25 "$LOGDIR/build.log"
  grep -q "nvToolsExt" "$LOGDIR/build.log" &&
    say "known cause: torch <= 2.4's CMake config wants libnvToolsExt, gone from CUDA >= 12.6 toolkits"
  exit 1
fi
grep "onboard:" "$LOGDIR/build.log" || true  # the NCCL line of backends/CMakeLists.txt
if ! cmake --build "$BUILD" --target onboard test_backends -j "$(nproc)" >>"$LOGDIR/build.log" 2>&1; then
  say "FAIL: build against torch $TVER failed; first errors:"
  grep -m 20 -E "error|undefined reference" "$LOGDIR/build.log" || tail -25 "$LOGDIR/build.log"
  exit 1
fi
nccl_in=$(grep -c "USE_C10D_NCCL" "$BUILD/compile_commands.json" || true)
say "built onboard + test_backends in ${SECONDS}s ($nccl_in compile commands with USE_C10D_NCCL)"

# Step 3
has_device=0
probe_help=$("$BUILD/onboard" probe --help 2>&1 || true)
case "$probe_help" in *--device*) has_device=1 ;; esac
run_probe() {  # $1 = label, rest = env/args; output under LOGDIR/$1
  local label=$1; shift
  over_budget "probe $label" && return 0
  say "probe $label: $*"
  if timeout "$PROBE_TIMEOUT" env "$@" --out "$LOGDIR/$label" >"$LOGDIR/$label.txt" 2>&1; then
    grep -E "^probe of|verdict|converged|diverged|step [0-9.]+ ms|wall" "$LOGDIR/$label.txt" | head -8 || true
  else
    say "FAIL: probe $label exit $? (log $LOGDIR/$label.txt):"; tail -15 "$LOGDIR/$label.txt"; status=1
  fi
}
probe=("$BUILD/onboard" probe "$MODEL" --steps "$STEPS" --timeout "$PROBE_TIMEOUT")
if [ "$NGPU" -ge 2 ] && [ "$has_device" = 1 ]; then
  run_probe nccl-2rank ONBOARD_PROBE_BACKEND=nccl "${probe[@]}" --ranks 2 --device cuda
elif [ "$NGPU" -ge 2 ]; then
  say "SKIPPED NCCL probe: $NGPU GPUs, but \`onboard probe\` has no --device to put rank r on cuda:r"
fi
run_probe gloo-2rank ONBOARD_PROBE_BACKEND=gloo "${probe[@]}" --ranks 2
if [ "$NGPU" -ge 1 ] && [ "$has_device" = 1 ]; then
  run_probe cuda-1rank "${probe[@]}" --ranks 1 --device cuda
elif [ "$NGPU" -ge 1 ]; then
  say "SKIPPED 1-rank CUDA probe: \`onboard probe\` has no --device option in this build"
fi

# Step 4
if ! over_budget "test_backends"; then
  if timeout $((BUDGET > SECONDS + 60 ? BUDGET - SECONDS : 60)) \
      "$BUILD/tests/test_backends" --gtest_filter="$FILTER" >"$LOGDIR/test_backends.txt" 2>&1; then
    say "test_backends passed ($(grep -c '^\[       OK' "$LOGDIR/test_backends.txt") tests)"
  else
    say "FAIL: test_backends (log $LOGDIR/test_backends.txt):"
    grep -E "FAILED|Failure" "$LOGDIR/test_backends.txt" | head -15 || tail -15 "$LOGDIR/test_backends.txt"
    status=1
  fi
fi
say "done in ${SECONDS}s, status $status"
exit $status
