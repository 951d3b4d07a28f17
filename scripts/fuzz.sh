#!/usr/bin/env bash
# Builds the parser fuzz targets (clang, libFuzzer + ASan + UBSan) in build-fuzz, seeds a corpus from
# tests/data, and runs each target for SECONDS (default 60). Exits non-zero when any target finds a
# crash, leak, timeout or OOM; reproducers land in build-fuzz/artifacts/.
# Usage: scripts/fuzz.sh [SECONDS]        (make fuzz == scripts/fuzz.sh 60)
set -euo pipefail
SECS="${1:-60}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
B="$ROOT/build-fuzz"
TARGETS=(fuzz_hf_config fuzz_safetensors_header fuzz_safetensors_index fuzz_onnx)

cmake -S "$ROOT" -B "$B" -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DONBOARD_FUZZ=ON -DONBOARD_WITH_TORCH=OFF -DONBOARD_TESTS=OFF \
  -DONBOARD_BENCH=OFF >/dev/null
cmake --build "$B" -j "${JOBS:-$(nproc)}" --target "${TARGETS[@]}" onnx_fuzz_seed

# Seed corpora (copies: libFuzzer writes new inputs into the corpus directory).
C="$B/corpus"
mkdir -p "$C"/{fuzz_hf_config,fuzz_safetensors_header,fuzz_safetensors_index,fuzz_onnx} "$B/artifacts"
# Past crashers first (parsers/fuzz/regressions/<target>-*), then real inputs from tests/data.
for f in "$ROOT"/parsers/fuzz/regressions/*; do
  [ -f "$f" ] && cp -f "$f" "$C/fuzz_$(basename "$f" | cut -d- -f1)/"
done
cp -f "$ROOT"/tests/data/hf/*.json "$ROOT"/tests/data/hf/extra/*.json "$C/fuzz_hf_config/" 2>/dev/null || true
cp -f "$ROOT"/examples/*/config.json "$C/fuzz_hf_config/" 2>/dev/null || true
cp -f "$ROOT"/tests/data/safetensors/*.safetensors "$C/fuzz_safetensors_header/" 2>/dev/null || true
cp -f "$ROOT"/tests/data/safetensors/*.index.json "$C/fuzz_safetensors_index/" 2>/dev/null || true
for f in "$ROOT"/tests/data/onnx/*.onnx; do
  "$B/parsers/fuzz/onnx_fuzz_seed" "$f" "$C/fuzz_onnx/$(basename "$f")"
done

status=0
for t in "${TARGETS[@]}"; do
  max_len=65536
  [ "$t" = fuzz_onnx ] && max_len=1048576
  echo "== $t (${SECS}s)"
  log="$B/$t.log"
  if "$B/parsers/fuzz/$t" "$C/$t" -max_total_time="$SECS" -max_len="$max_len" -timeout=10 \
       -rss_limit_mb=2048 -artifact_prefix="$B/artifacts/$t-" -print_final_stats=1 >"$log" 2>&1; then
    echo "   ok: $(grep -m1 'stat::number_of_executed_units' "$log" | awk '{print $2}') execs," \
         "corpus $(ls "$C/$t" | wc -l) files"
  else
    status=1
    echo "   FINDING (see $log):"
    grep -E 'ERROR|SUMMARY|runtime error|Test unit written' "$log" | head -5 | sed 's/^/   /'
  fi
done
exit $status
