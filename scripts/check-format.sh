#!/usr/bin/env bash
# Checks that the C++ lines changed since BASE follow .clang-format (clang-format 14, Debian).
# Usage: scripts/check-format.sh [BASE]   (default: the parent of HEAD; CI checks the last commit)
# Exit 0 = formatted (or nothing to check), 1 = lines to reformat (the diff is printed).
set -euo pipefail
cd "$(dirname "$0")/.."
base="${1:-HEAD~1}"
if ! git rev-parse -q --verify "$base^{commit}" >/dev/null; then
  echo "check-format: no base commit '$base'; nothing to check"
  exit 0
fi
if ! command -v git-clang-format >/dev/null; then
  echo "check-format: git-clang-format missing (Debian package clang-format)" >&2
  exit 1
fi
out=$(git clang-format --quiet --diff --extensions cpp,h,cc,hpp,cu,cuh "$base" -- 2>&1 || true)
case "$out" in
  ""|*"no modified files to format"*|*"clang-format did not modify any files"*)
    echo "check-format: changed lines since $base are formatted"; exit 0 ;;
esac
echo "$out"
echo "check-format: the lines above need 'git clang-format $base'" >&2
exit 1
