#!/usr/bin/env bash
# The test command of the README and of CI: install dependencies, check the formatting, run
# clang-tidy (tools/tidy.sh), build everything with warnings as errors, run the whole ctest suite,
# fuzz the input parsers (tools/fuzz.sh), then build with AddressSanitizer +
# UndefinedBehaviorSanitizer and run the cpu, opencl and SIMT-harness tests there. Each stage
# prints its wall time. Every stage runs by default (CI); a developer may skip the two slowest
# with RUN_TIDY=0 and RUN_SANITIZE=0.
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$(date +%s)
stage() { echo "== test.sh: $1 done after $(( $(date +%s) - t0 )) s"; }
bash tools/install-deps.sh
if [ -d /usr/local/cuda/bin ]; then export PATH="/usr/local/cuda/bin:$PATH"; fi
# The static checks first. Formatting drift fails before anything is built. clang-tidy needs no
# compiled objects (configure-only databases in build-tidy/; sources unchanged since a clean run,
# here or by the committer's tools/tidy-clean.txt, are skipped: tools/tidy.py); its findings are
# printed here, the other stages still run
# so that one run shows everything, and the script then fails at the end.
bash tools/format-check.sh
stage format-check
tidy_status=0
if [ "${RUN_TIDY:-1}" != 0 ]; then
  bash tools/tidy.sh || tidy_status=$?
  stage clang-tidy
fi
BUILD=${BUILD:-build}
PYENV=${MOETRAIN_PYENV:-$HOME/.cache/moetrain/pyenv}
launcher=(); if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache); fi
# The CUDA kernels are compiled (never run: no GPU here) for the oldest and the newest target:
# sm_75 takes the kernels' pre-sm_80 branches, sm_90 the sm_80+ ones (tensor-core bf16), so every
# branch compiles with warnings as errors and passes the ptxas check, at a third of the nvcc time
# of the six default targets (CMAKE_CUDA_ARCHITECTURES in backends/cuda/CMakeLists.txt).
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DMOETRAIN_WERROR=ON "${launcher[@]}" \
  -DCMAKE_CUDA_ARCHITECTURES="${MOETRAIN_TEST_CUDA_ARCHS:-75-real;90-real}" \
  -DMOETRAIN_TEST_PYTHON="$PYENV/bin/python" \
  -DMOETRAIN_PYTHON=ON -DPython_EXECUTABLE="$PYENV/bin/python"
cmake --build "$BUILD" -j"$(nproc)"
stage build
# Tests run two at a time on two cores: OpenMP threads sleep instead of spinning when idle.
export OMP_WAIT_POLICY=passive
export POCL_CACHE_DIR="$PWD/$BUILD/pocl-cache" MOETRAIN_CL_CACHE="$PWD/$BUILD/cl-cache"
# With ../shared hidden (tools/without-shared.sh): the suite must pass from the repository alone.
bash tools/without-shared.sh ctest --test-dir "$BUILD" -j"$(nproc)" --output-on-failure --timeout 900
stage tests
# Every parser of outside input under libFuzzer for FUZZ_SECONDS (60) each (docs/RELIABILITY.md).
bash tools/fuzz.sh
stage fuzz

if [ "${RUN_SANITIZE:-1}" != 0 ]; then
  # A second build with ASan + UBSan (cmake/MoetrainSanitize.cmake), CUDA off: the SIMT harness
  # (tests/simt) compiles the CUDA kernels with g++ and runs them on the CPU, so their
  # out-of-bounds accesses are caught without a GPU. It runs the tests labelled cxx: every
  # doctest case of moetrain_tests (on the cpu and opencl devices) and the SIMT harness. The
  # CLI, Python and install tests are left out (they test the tool and the packaging through
  # processes, not the memory safety of the library, and would need the CLI built here too).
  SAN=${SAN_BUILD:-build-sanitize}
  cmake -S . -B "$SAN" -DCMAKE_BUILD_TYPE=Release -DMOETRAIN_WERROR=ON "${launcher[@]}" \
    -DMOETRAIN_WITH_CUDA=OFF -DMOETRAIN_SANITIZE=address,undefined
  cmake --build "$SAN" -j"$(nproc)" --target moetrain_tests moetrain_simt_tests \
    moetrain_backend_opencl moetrain_backend_wrong_abi moetrain_backend_unloadable
  stage sanitize-build
  export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1"
  export LSAN_OPTIONS="suppressions=$PWD/tools/sanitize/lsan.supp:print_suppressions=0"
  export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
  export POCL_CACHE_DIR="$PWD/$SAN/pocl-cache" MOETRAIN_CL_CACHE="$PWD/$SAN/cl-cache"
  # LeakSanitizer's tracer sometimes crashes at exit after a passing test (a runtime fault, not a
  # finding; tools/sanitize/tracer_crash_only.py): only such tests are run once more.
  if ! ctest --test-dir "$SAN" -j"$(nproc)" --output-on-failure --timeout 900 -L '^cxx$' \
    --output-junit "$PWD/$SAN/sanitize-tests.xml"; then
    python3 tools/sanitize/tracer_crash_only.py "$SAN/sanitize-tests.xml"
    ctest --test-dir "$SAN" --output-on-failure --timeout 900 --rerun-failed
  fi
  stage sanitize-tests
fi
if [ "$tidy_status" -ne 0 ]; then
  echo "test.sh: clang-tidy failed (exit $tidy_status; its findings are printed above)" >&2
  exit 1
fi
