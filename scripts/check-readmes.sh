#!/usr/bin/env bash
# Checks that every top-level folder's README.md names every source file directly in that folder
# (the convention of the top-level README: each folder's README says what it holds). A header and
# its implementation are one unit, and the READMEs name a unit by either file, so DIR/STEM.EXT
# counts as named when DIR/README.md holds, as a whole word:
#   STEM.X      for any source extension X, e.g. `plan_search.cpp`, `planner.h` (for planner.cpp too),
#               `block_kind.h/.cpp`
#   STEM.{      e.g. `plan_file.{h,cpp}`
#   bench_STEM  bench/ only: `bench/<name>.cpp -> bench_<name>` (bench/README.md)
# Source files: .cpp .cc .h .hpp .cu .cuh .py .sh .cmake, tracked or new but not ignored (CMakeLists.txt
# is not one).
# Subfolders with their own README.md (agent/rules/, ...) are not checked here.
# Usage: scripts/check-readmes.sh [ROOT]   Exit 0 = every file named, 1 = the missing ones are listed.
set -euo pipefail
root="${1:-$(dirname "$0")/..}"
cd "$root"
missing=0
for readme in */README.md; do
  dir="${readme%/README.md}"
  while IFS= read -r path; do
    file="${path#"$dir"/}"
    case "$file" in */*) continue ;; esac  # files of subfolders
    ext="${file##*.}"
    stem="${file%.*}"
    case "$ext" in cpp | cc | h | hpp | cu | cuh | py | sh | cmake) ;; *) continue ;; esac
    s="${stem//./\\.}"
    b='(^|[^A-Za-z0-9_])'
    e='([^A-Za-z0-9_]|$)'
    pattern="${b}${s}\\.((cpp|cc|h|hpp|cu|cuh|py|sh|cmake)${e}|\\{)"
    if [ "$dir" = bench ] && [ "$ext" = cpp ]; then pattern="${pattern}|${b}bench_${s}${e}"; fi
    if ! grep -qE "$pattern" "$readme"; then
      echo "check-readmes: $dir/README.md does not name $dir/$file" >&2
      missing=$((missing + 1))
    fi
  done < <(git ls-files --cached --others --exclude-standard -- "$dir")
done
if [ "$missing" -gt 0 ]; then
  echo "check-readmes: $missing source files are not named in their folder's README.md" >&2
  exit 1
fi
echo "check-readmes: every top-level folder's README.md names its source files"
