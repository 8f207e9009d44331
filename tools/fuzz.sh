#!/usr/bin/env bash
# Build the libFuzzer targets of tests/fuzz (clang, -fsanitize=fuzzer,address,undefined) and
# run each for FUZZ_SECONDS (default 60) from its seed corpus tests/fuzz/<name>/, with
# memory limits so that a crafted input asking for gigabytes is a finding, not a swap storm.
# Prints one line per target with the executions reached; exits non-zero on any finding
# (crash, leak, undefined behaviour, timeout, out-of-memory), leaving the reproducer in
# $FUZZ_OUT/<name>/. Usage: tools/fuzz.sh [target ...]   (default: every target)
# FUZZ_JOBS targets run at once (default: the number of cores).
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
# One libFuzzer process per target, FUZZ_JOBS (default: the number of cores) at a time: each
# process is single-threaded, so two cores fuzz two targets at once for the same per-target
# budget. Each target's verdict goes to $BUILD/<target>.verdict and is printed in order at the end.
# sentencepiece fuzzes a thin wrapper around libsentencepiece: half the time, so that the nine
# targets fit about 4.5 rounds of FUZZ_SECONDS on two cores (CI: under 5 minutes).
seconds_of() {
  case $1 in
    sentencepiece) echo $(( (SECONDS_PER_TARGET + 1) / 2 )) ;;
    *) echo "$SECONDS_PER_TARGET" ;;
  esac
}
fuzz_one() {
  local t=$1 corpus="$BUILD/corpus/$1" log="$BUILD/$1.log" rc runs  # corpus: seeds + finds
  local seconds
  seconds=$(seconds_of "$t")
  mkdir -p "$corpus" "$OUT/$t"
  cp -n tests/fuzz/"$t"/* "$corpus"/ 2>/dev/null || true
  set +e
  "$BUILD/fuzz_$t" "$corpus" -max_total_time="$seconds" -rss_limit_mb=2048 \
    -malloc_limit_mb=1024 -timeout=10 -max_len=65536 -print_final_stats=1 \
    -artifact_prefix="$OUT/$t/" >"$log" 2>&1
  rc=$?
  set -e
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)
  if [ $rc -eq 0 ]; then
    echo "fuzz $t: ${runs} executions in ${seconds} s, no finding" >"$BUILD/$t.verdict"
  else
    { echo "fuzz $t: FINDING after ${runs} executions (exit $rc); reproducer in $OUT/$t/, log $log"
      grep -m5 -E "ERROR|runtime error|SUMMARY" "$log" || true; } >"$BUILD/$t.verdict"
  fi
}
JOBS=${FUZZ_JOBS:-$(nproc)}
for t in "${targets[@]}"; do
  rm -f "$BUILD/$t.verdict"
  while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n || true; done
  fuzz_one "$t" &
done
wait
status=0
for t in "${targets[@]}"; do
  if [ -f "$BUILD/$t.verdict" ]; then cat "$BUILD/$t.verdict"; else echo "fuzz $t: no verdict"; fi
  grep -q "no finding" "$BUILD/$t.verdict" 2>/dev/null || status=1
done
exit $status
