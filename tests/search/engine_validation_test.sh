#!/usr/bin/env bash
# ctest ExportGolden.EnginesOwnValidation: the engines' own validation of every golden export
# (scripts/check-exports-with-engines.sh --self-test tests/data/exports/cases.json).
# SKIPPED (exit 77) unless a checkout is named (MEGATRON_LM_DIR, TORCHTITAN_V02_DIR, TORCHTITAN_DIR)
# and ${PYTHON:-/usr/bin/python3} imports torch: CI cannot download the engines.
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
if [[ -z "${MEGATRON_LM_DIR:-}${TORCHTITAN_V02_DIR:-}${TORCHTITAN_DIR:-}" ]]; then
  echo "SKIPPED: no engine checkout named (set MEGATRON_LM_DIR, TORCHTITAN_V02_DIR and/or TORCHTITAN_DIR)"; exit 77
fi
if ! "${PYTHON:-/usr/bin/python3}" -c 'import torch' 2>/dev/null; then
  echo "SKIPPED: ${PYTHON:-/usr/bin/python3} cannot import torch (apt-get install python3-torch)"; exit 77
fi
exec "$root/scripts/check-exports-with-engines.sh" --self-test "$root/tests/data/exports/cases.json"
