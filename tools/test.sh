#!/usr/bin/env bash
# The test command of the README and of CI: install dependencies, build everything with
# warnings as errors, run the whole ctest suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install-deps.sh
if [ -d /usr/local/cuda/bin ]; then export PATH="/usr/local/cuda/bin:$PATH"; fi
BUILD=${BUILD:-build}
PYENV=${MOETRAIN_PYENV:-$HOME/.cache/moetrain/pyenv}
launcher=(); if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache); fi
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DMOETRAIN_WERROR=ON "${launcher[@]}" \
  -DMOETRAIN_TEST_PYTHON="$PYENV/bin/python"
cmake --build "$BUILD" -j"$(nproc)"
# Tests run two at a time on two cores: OpenMP threads sleep instead of spinning when idle.
export OMP_WAIT_POLICY=passive
export POCL_CACHE_DIR="$PWD/$BUILD/pocl-cache" MOETRAIN_CL_CACHE="$PWD/$BUILD/cl-cache"
ctest --test-dir "$BUILD" -j"$(nproc)" --output-on-failure --timeout 900
# Every parser of outside input under libFuzzer for FUZZ_SECONDS (60) each (docs/RELIABILITY.md).
bash tools/fuzz.sh
