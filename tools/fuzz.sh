#!/usr/bin/env bash
# Build the libFuzzer targets of tests/fuzz (clang, -fsanitize=fuzzer,address,undefined) and
# run each for FUZZ_SECONDS (default 60) from its seed corpus tests/fuzz/<name>/, with
# memory limits so that a crafted input asking for gigabytes is a finding, not a swap storm.
# Prints one line per target with the executions reached; exits non-zero on any finding
# (crash, leak, undefined behaviour, timeout, out-of-memory), leaving the reproducer in
# $FUZZ_OUT/<name>/. Usage: tools/fuzz.sh [target ...]   (default: every target)
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER_TARGET=${FUZZ_SECONDS:-60}
BUILD=${FUZZ_BUILD:-build-fuzz}
OUT=${FUZZ_OUT:-$BUILD/findings}
CXX_FUZZ=${FUZZ_CXX:-clang++}
command -v "$CXX_FUZZ" >/dev/null || { echo "fuzz.sh: $CXX_FUZZ not found (apt-get install clang libclang-rt-14-dev)"; exit 1; }
cmake -S tests/fuzz -B "$BUILD" -DCMAKE_CXX_COMPILER="$CXX_FUZZ" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$BUILD" -j"$(nproc)" >/dev/null
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for f in tests/fuzz/targets/*.cpp; do targets+=("$(basename "$f" .cpp)"); done
fi
status=0
for t in "${targets[@]}"; do
  corpus="$BUILD/corpus/$t"  # a working copy: the seeds plus what the run finds
  mkdir -p "$corpus" "$OUT/$t"
  cp -n tests/fuzz/"$t"/* "$corpus"/ 2>/dev/null || true
  log="$BUILD/$t.log"
  set +e
  "$BUILD/fuzz_$t" "$corpus" -max_total_time="$SECONDS_PER_TARGET" -rss_limit_mb=2048 \
    -malloc_limit_mb=1024 -timeout=10 -max_len=65536 -print_final_stats=1 \
    -artifact_prefix="$OUT/$t/" >"$log" 2>&1
  rc=$?
  set -e
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)
  if [ $rc -eq 0 ]; then
    echo "fuzz $t: ${runs} executions in ${SECONDS_PER_TARGET} s, no finding"
  else
    echo "fuzz $t: FINDING after ${runs} executions (exit $rc); reproducer in $OUT/$t/, log $log"
    grep -m5 -E "ERROR|runtime error|SUMMARY" "$log" || true
    status=1
  fi
done
exit $status
