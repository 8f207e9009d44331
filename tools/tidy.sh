#!/usr/bin/env bash
# clang-tidy 19 with the repo's .clang-tidy over every C++ source of the tree; any finding fails
# (exit 1) and is printed once. CI runs it (tools/test.sh).
#   bash tools/tidy.sh [REGEX]   REGEX (Python syntax, searched in the repo-relative path)
#                                picks the sources; default: all of them.
# The compile commands come from two configure-only CMake trees under TIDY_BUILD (default
# build-tidy; nothing is compiled there): the project with every optional part on (the CUDA
# backend when nvcc is found, the Python module, the benchmarks) and the libFuzzer project
# tests/fuzz. tools/tidy.py checks that every tracked .cpp has a command, runs clang-tidy on the
# cores in parallel and skips sources that are unchanged since a clean run (its cache, keyed by
# the preprocessed source; see there) on this machine or, through tools/tidy-clean.txt (commit
# it with your change), on the committer's: a clean clone re-checks only what changed, plus a
# sample of the recorded sources. Headers are checked through the sources that include
# them (.clang-tidy's HeaderFilterRegex). CUDA sources (.cu) are compiled by nvcc, not in a form
# clang-tidy reads, and are skipped; the kernels they include are checked through the SIMT
# harness tests.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -d /usr/local/cuda/bin ]; then export PATH="/usr/local/cuda/bin:$PATH"; fi
DB=${TIDY_BUILD:-build-tidy}
PYENV=${MOETRAIN_PYENV:-$HOME/.cache/moetrain/pyenv}
start=$(date +%s)
mkdir -p "$DB"
python_flags=()
if [ -x "$PYENV/bin/python" ]; then
  python_flags=(-DMOETRAIN_PYTHON=ON -DPython_EXECUTABLE="$PYENV/bin/python"
    -DMOETRAIN_TEST_PYTHON="$PYENV/bin/python")
fi
cmake -S . -B "$DB/main" -DCMAKE_BUILD_TYPE=Release -DCMAKE_EXPORT_COMPILE_COMMANDS=ON \
  -DMOETRAIN_BUILD_BENCH=ON "${python_flags[@]}" >"$DB/main.log" 2>&1 ||
  { cat "$DB/main.log"; echo "tidy: configuring $DB/main failed" >&2; exit 2; }
cmake -S tests/fuzz -B "$DB/fuzz" -DCMAKE_CXX_COMPILER="${FUZZ_CXX:-clang++}" \
  -DCMAKE_EXPORT_COMPILE_COMMANDS=ON >"$DB/fuzz.log" 2>&1 ||
  { cat "$DB/fuzz.log"; echo "tidy: configuring $DB/fuzz failed" >&2; exit 2; }
echo "tidy: compile databases configured in $(($(date +%s) - start)) s"
python3 tools/tidy.py . "${1:-.*}" "$DB/main/compile_commands.json" "$DB/fuzz/compile_commands.json"
