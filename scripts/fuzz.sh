#!/usr/bin/env bash
# Builds the fuzz targets (clang, libFuzzer + ASan + UBSan) in build-fuzz: the parser targets
# (parsers/fuzz/) and the topology / layout-file targets (search/fuzz/). Seeds a corpus per target from
# past crashers and tests/data, and runs each target for SECONDS (default 60). Exits non-zero when any
# target finds a crash, leak, timeout or OOM; reproducers land in build-fuzz/artifacts/.
# Usage: scripts/fuzz.sh [SECONDS] [TARGET...]   (make fuzz == scripts/fuzz.sh 60; no TARGET = all)
set -euo pipefail
SECS="${1:-60}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
B="$ROOT/build-fuzz"
ALL=(fuzz_hf_config fuzz_safetensors_header fuzz_safetensors_index fuzz_onnx fuzz_topology fuzz_layout_file)
TARGETS=("${@:2}")
[ "${#TARGETS[@]}" -gt 0 ] || TARGETS=("${ALL[@]}")
# Folder of each target's binary under build-fuzz (and of its sources).
dir_of() { case "$1" in fuzz_topology | fuzz_layout_file) echo search/fuzz ;; *) echo parsers/fuzz ;; esac; }

cmake -S "$ROOT" -B "$B" -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DONBOARD_FUZZ=ON -DONBOARD_WITH_TORCH=OFF -DONBOARD_TESTS=OFF \
  -DONBOARD_BENCH=OFF >/dev/null
cmake --build "$B" -j "${JOBS:-$(nproc)}" --target "${TARGETS[@]}" onnx_fuzz_seed layout_fuzz_seed

# Seed corpora (copies: libFuzzer writes new inputs into the corpus directory).
C="$B/corpus"
for t in "${ALL[@]}"; do mkdir -p "$C/$t"; done
mkdir -p "$B/artifacts"
# Past crashers first ({parsers,search}/fuzz/regressions/<target>-*), then real inputs from tests/data.
for f in "$ROOT"/parsers/fuzz/regressions/* "$ROOT"/search/fuzz/regressions/*; do
  [ -f "$f" ] && cp -f "$f" "$C/fuzz_$(basename "$f" | cut -d- -f1)/"
done
cp -f "$ROOT"/tests/data/hf/*.json "$ROOT"/tests/data/hf/extra/*.json "$C/fuzz_hf_config/" 2>/dev/null || true
cp -f "$ROOT"/examples/*/config.json "$C/fuzz_hf_config/" 2>/dev/null || true
cp -f "$ROOT"/tests/data/safetensors/*.safetensors "$C/fuzz_safetensors_header/" 2>/dev/null || true
cp -f "$ROOT"/tests/data/safetensors/*.index.json "$C/fuzz_safetensors_index/" 2>/dev/null || true
for f in "$ROOT"/tests/data/onnx/*.onnx; do
  "$B/parsers/fuzz/onnx_fuzz_seed" "$f" "$C/fuzz_onnx/$(basename "$f")"
done
cp -f "$ROOT"/examples/topologies/*.json "$C/fuzz_topology/"
# Layout files: single layouts (search/fuzz/seeds), and the runs files split one run per seed.
cp -f "$ROOT"/search/fuzz/seeds/*.json "$C/fuzz_layout_file/"
for f in "$ROOT"/tests/data/{published_runs,megatron_2021_runs,measured_training_runs}.json; do
  "$B/search/fuzz/layout_fuzz_seed" "$f" "$C/fuzz_layout_file/$(basename "$f" .json)"
done

status=0
for t in "${TARGETS[@]}"; do
  max_len=65536
  [ "$t" = fuzz_onnx ] && max_len=1048576
  echo "== $t (${SECS}s)"
  log="$B/$t.log"
  dict=()  # <dir>/<target without fuzz_>.dict: keys and edge numbers the mutator would rarely spell
  [ -f "$ROOT/$(dir_of "$t")/${t#fuzz_}.dict" ] && dict=(-dict="$ROOT/$(dir_of "$t")/${t#fuzz_}.dict")
  if "$B/$(dir_of "$t")/$t" "$C/$t" -max_total_time="$SECS" -max_len="$max_len" -timeout=10 \
       -rss_limit_mb=2048 -artifact_prefix="$B/artifacts/$t-" -print_final_stats=1 "${dict[@]}" >"$log" 2>&1; then
    echo "   ok: $(grep -m1 'stat::number_of_executed_units' "$log" | awk '{print $2}') execs," \
         "corpus $(ls "$C/$t" | wc -l) files"
  else
    status=1
    echo "   FINDING (see $log):"
    grep -E 'ERROR|SUMMARY|runtime error|Test unit written' "$log" | head -5 | sed 's/^/   /'
  fi
done
exit $status
