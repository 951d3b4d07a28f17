#!/usr/bin/env bash
# Runs every benchmark built from bench/*.cpp; each prints its own table with ratios against a
# baseline measured in the same run. Usage: scripts/bench.sh [BUILD_DIR]
set -euo pipefail
BUILD=${1:-build}
status=0
for b in "$BUILD"/bench/bench_*; do
  [ -x "$b" ] || continue
  echo "== $(basename "$b")"
  "$b" || status=1
  echo
done
exit $status
