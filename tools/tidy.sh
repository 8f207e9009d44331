#!/usr/bin/env bash
# clang-tidy 14 with the repo's .clang-tidy over the C++ translation units of the compile
# database (BUILD/compile_commands.json, written by every CMake configure); any finding fails
# (exit 1) and is printed once.
#   bash tools/tidy.sh [REGEX]   REGEX (extended, matched against the path relative to the repo)
#                                picks the sources; default: every .cpp of the database.
# BUILD (default build) must be configured; tidy needs no compiled objects. Headers are checked
# through the sources that include them (.clang-tidy's HeaderFilterRegex). The database holds
# GCC flags; those clang does not know are tolerated (-Wno-unknown-warning-option). CUDA
# sources (.cu) are compiled by nvcc, not in a form clang-tidy reads, and are skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
REGEX=${1:-'.*'}
TIDY=${CLANG_TIDY:-$(command -v clang-tidy-14 || echo clang-tidy)}
db="$BUILD/compile_commands.json"
if [ ! -f "$db" ]; then
  echo "tidy: $db missing (configure $BUILD with cmake first)" >&2
  exit 2
fi
start=$(date +%s)
mapfile -t files < <(python3 - "$db" "$PWD" <<'PY' | grep -E -- "$REGEX" | sort -u
import json, os, sys
root = sys.argv[2]
for e in json.load(open(sys.argv[1])):
    f = os.path.relpath(os.path.join(e["directory"], e["file"]), root)
    if f.endswith(".cpp") and not f.startswith(".."):
        print(f)
PY
)
if [ ${#files[@]} -eq 0 ]; then
  echo "tidy: no source matches '$REGEX'" >&2
  exit 2
fi
out=$(mktemp)
trap 'rm -f "$out"' EXIT
status=0
printf '%s\0' "${files[@]}" | xargs -0 -n 1 -P "$(nproc)" "$TIDY" -p "$BUILD" --quiet \
  --extra-arg=-Wno-unknown-warning-option >"$out" 2>&1 || status=$?
# A header's finding appears once per source that includes it: print each once.
grep -E '^[^ ].*:[0-9]+:[0-9]+: (warning|error): ' "$out" | sort -u || true
echo "tidy: ${#files[@]} sources in $(($(date +%s) - start)) s"
if [ "$status" -ne 0 ]; then
  echo "tidy: clang-tidy reported findings or failed (above)" >&2
  exit 1
fi
