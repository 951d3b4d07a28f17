#!/usr/bin/env bash
# GPU check of the generated CUDA kernels.
#   usage: scripts/gpu-check.sh [BUILD_DIR] [MODEL]     (defaults: build, examples/flagship/config.json)
#   env:   ONBOARD_CUDA_ARCH (90 | 80, default 90), GPU_CHECK_OUT (default BUILD/gpu-check),
#          GPU_CHECK_T (tokens of the timing runs, default 8192), ONBOARD_NVCC
# Step 1  build `onboard` if missing (against Python torch's LibTorch when installed)
# Step 2  `onboard kernels MODEL --target cuda --out OUT`: .cu + manifests + cubins for the model's kernels
#         and the check variants, plus check cases (random inputs + CPU fp64 reference outputs)
# Step 3  nvcc one host harness per kernel (codegen/cuda/{kda,dsa}_harness.cu including the kernel)
# Step 4  no GPU: say so and exit 0 (everything above compiled)
# Step 5  check variants against the CPU reference cases (poisoned outputs, NaN check, 1e-5 / 1e-2 bf16)
# Step 6  time the model's kernels (cudaEvent, median) and print TFLOP/s (KDA) and gather GB/s (DSA)
#         against the device ceilings (H200: 989 TFLOP/s bf16 dense, 4.8 TB/s HBM)
# Step 7  bench/expert_gemm_sweep.cu: the routed experts' GEMMs (fprop, dgrad, wgrad) issued as Transformer
#         Engine's GroupedLinear issues them (one cuBLASLt call per expert on 4 streams) against one dense GEMM of the same
#         FLOPs, per tokens per expert (issue 13's small-m residual); its sampled outputs are checked
#         against a host reference before anything is timed. GPU_CHECK_SWEEP=quick|full|off|only
#         (default full; only: this step alone, first, then exit: it needs neither `onboard` nor LibTorch)
# Then  scripts/gpu-probe.sh BUILD MODEL: the distributed probe against the same build
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build}
MODEL=${2:-$ROOT/examples/flagship/config.json}
ARCH=${ONBOARD_CUDA_ARCH:-90}
OUT=${GPU_CHECK_OUT:-$BUILD/gpu-check}
T=${GPU_CHECK_T:-8192}
SWEEP=${GPU_CHECK_SWEEP:-full}
PEAK_TFLOPS=${GPU_PEAK_TFLOPS:-989}
PEAK_GBS=${GPU_PEAK_GBS:-4800}
NVCC=${ONBOARD_NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
if [ ! -x "$NVCC" ]; then
  echo "gpu-check: nvcc not found (set ONBOARD_NVCC or put CUDA's bin on PATH)" >&2
  exit 1
fi

# Step 7 first when asked for alone (GPU_CHECK_SWEEP=only): no build of `onboard` before it.
run_sweep() {
  mkdir -p "$OUT/bin"
  "$NVCC" -std=c++17 -O3 -arch="sm_$ARCH" "$ROOT/bench/expert_gemm_sweep.cu" -lcublasLt -o "$OUT/bin/expert_gemm_sweep"
  local args=()
  [ "$SWEEP" = quick ] && args=(--quick)
  "$OUT/bin/expert_gemm_sweep" "${args[@]}" | tee "$OUT/expert_gemm_sweep.txt"
}
if [ "$SWEEP" = only ]; then
  run_sweep
  exit $?
fi

# Step 1 (against the device's Python torch when there is one, so that gpu-probe.sh reuses this build)
if [ ! -x "$BUILD/onboard" ]; then
  TORCH_PREFIX=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)' 2>/dev/null || true)
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    ${TORCH_PREFIX:+-DCMAKE_PREFIX_PATH="$TORCH_PREFIX"} >/dev/null
  cmake --build "$BUILD" --target onboard
fi

# Step 2
rm -rf "$OUT"
mkdir -p "$OUT/bin"
"$BUILD/onboard" kernels "$MODEL" --target cuda --arch "$ARCH" --out "$OUT"

# Step 3
kernels=()
for manifest in "$OUT"/*.json; do
  name=$(basename "$manifest" .json)
  op=$(grep -o '"op": *"[a-z]*"' "$manifest" | sed 's/.*"\([a-z]*\)"$/\1/')
  "$NVCC" -std=c++17 -O3 -arch="sm_$ARCH" -I"$ROOT/codegen/cuda" -DKERNEL_CU="\"$OUT/$name.cu\"" \
    "$ROOT/codegen/cuda/${op}_harness.cu" -o "$OUT/bin/$name"
  kernels+=("$name:$op")
done
echo "gpu-check: compiled ${#kernels[@]} kernels and their harnesses for sm_$ARCH"

# Step 4
if ! nvidia-smi -L >/dev/null 2>&1; then
  echo "gpu-check: no GPU on this machine: kernels and harnesses compiled only; numerics and timings need a GPU"
  exit 0
fi
nvidia-smi -L

# Step 5 and Step 6
status=0
log="$OUT/results.txt"
: >"$log"
for entry in "${kernels[@]}"; do
  name=${entry%%:*}
  op=${entry##*:}
  if [ -d "$OUT/cases/$name" ]; then
    "$OUT/bin/$name" check "$OUT"/cases/"$name"/* | tee -a "$log" || status=1
  else
    "$OUT/bin/$name" time 1 "$T" | tee -a "$log" || status=1
  fi
done

echo
printf '%-56s %-6s %10s %10s %12s %10s %12s\n' kernel op ms TFLOP/s "% of peak" "GB/s" "% of HBM"
grep '^TIME' "$log" | while read -r _ name op rest; do
  ms=$(sed -n 's/.*ms=\([0-9.]*\).*/\1/p' <<<"$rest")
  tf=$(sed -n 's/.*tflops=\([0-9.]*\).*/\1/p' <<<"$rest")
  gbs=$(sed -n 's/.*gather_gbs=\([0-9.]*\).*/\1/p' <<<"$rest")
  pct=$(awk -v a="$tf" -v p="$PEAK_TFLOPS" 'BEGIN { printf "%.2f", 100 * a / p }')
  if [ -n "$gbs" ]; then
    gpct=$(awk -v a="$gbs" -v p="$PEAK_GBS" 'BEGIN { printf "%.2f", 100 * a / p }')
  else
    gbs="-"; gpct="-"
  fi
  printf '%-56s %-6s %10s %10s %12s %10s %12s\n' "$name" "$op" "$ms" "$tf" "$pct" "$gbs" "$gpct"
done
echo
checks=$(grep -c '^CHECK' "$log" || true)
fails=$(grep -c '^CHECK.*FAIL' "$log" || true)
echo "gpu-check: $checks checks against the CPU reference, $fails failed (peak ${PEAK_TFLOPS} TFLOP/s, ${PEAK_GBS} GB/s)"
[ "$fails" -eq 0 ] || status=1

# Step 7
if [ "$SWEEP" != off ]; then
  run_sweep || status=1
fi
# ---- probe (backends/) ------------------------------------------------------------------------
# The distributed-training probe on the same machine: builds `onboard` + test_backends against the
# device's LibTorch 2.x (CUDA, so c10d_compat.cpp compiles its USE_C10D_NCCL lines) and runs the
# probes one machine allows (see gpu-probe.sh: NCCL needs >= 2 GPUs; one GPU runs Gloo + 1-rank CUDA).
bash "$(dirname "$0")/gpu-probe.sh" "$BUILD" "$MODEL" || status=1
exit $status
