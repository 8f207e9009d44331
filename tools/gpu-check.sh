#!/usr/bin/env bash
# For GPU owners: one command that checks the CUDA backend on a real GPU and writes a report.
#   1. builds moetrain with the CUDA backend (warnings as errors);
#   2. checks that `moetrain info` lists a usable cuda device;
#   3. runs the whole ctest suite (the op tests include cuda automatically when a device is
#      usable), then the op tests on cuda alone against the float64 reference;
#   4. runs the finite-difference gradient check on cuda (tiny preset, dense and MoE layers);
#   5. benchmarks dense-small, moe-mini and gpt2-124m training steps on cuda, fp32 and bf16,
#      with CUDA Graphs on and off;
#   6. on machines with two or more GPUs (and mpirun): NCCL collectives, data-parallel and
#      ZeRO-1 equivalence against one GPU, and a weak-scaling table of moe-mini over 1..G GPUs
#      (docs/DISTRIBUTED.md; expert parallelism is not implemented, so there is no EP check).
# The report goes to $OUT/gpu-check-<host>-<time>.md (default OUT=gpu-check-reports); the exit
# status is non-zero if any check failed. Environment: BUILD (build dir, default build-gpu),
# CUDA_ARCH (e.g. 90; default: the project's architecture list), PEAK_GFLOPS (for MFU; default:
# the device's own, which `bench` finds and names), BENCH_STEPS (default 20).
#
#   tools/gpu-check.sh --prebuilt DIR   runs instead from a bundle of tools/gpu-bundle.sh,
# compiling nothing (tools/gpu-check-prebuilt.sh: for a GPU host lent for minutes at a time).
set -uo pipefail
if [ "${1:-}" = --prebuilt ]; then
    exec bash "$(dirname "$0")/gpu-check-prebuilt.sh" "${2:?--prebuilt needs DIR (a moetrain-gpu-bundle directory or .tar.xz)}"
fi
cd "$(dirname "$0")/.." || exit 1
ROOT=$PWD
BUILD=${BUILD:-build-gpu}
OUT=${OUT:-gpu-check-reports}
PEAK_GFLOPS=${PEAK_GFLOPS:-}
BENCH_STEPS=${BENCH_STEPS:-20}
if [ -d /usr/local/cuda/bin ]; then export PATH="/usr/local/cuda/bin:$PATH"; fi
mkdir -p "$OUT"
REPORT="$ROOT/$OUT/gpu-check-$(hostname)-$(date +%Y%m%d-%H%M%S).md"
LOG="${REPORT%.md}.log"
status=0

say() { printf '%s\n' "$*" | tee -a "$REPORT"; }
run() {  # run "title" cmd...: output to the log, one result line to the report
    local title=$1
    shift
    echo "==== $title: $*" >>"$LOG"
    if "$@" >>"$LOG" 2>&1; then
        say "- $title: ok"
    else
        say "- $title: FAILED (see $(basename "$LOG"))"
        status=1
    fi
}

: >"$LOG"
say "# moetrain GPU check"
say ""
say "- commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
say "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
if command -v nvidia-smi >/dev/null; then
    say "- GPU: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | head -1)"
fi
say "- nvcc: $(nvcc --version 2>/dev/null | tail -1)"
say ""
say "## Build and tests"

arch_flag=()
if [ -n "${CUDA_ARCH:-}" ]; then arch_flag=(-DCMAKE_CUDA_ARCHITECTURES="$CUDA_ARCH"); fi
run "configure" cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DMOETRAIN_WERROR=ON "${arch_flag[@]}"
run "build" cmake --build "$BUILD" -j"$(nproc)"
MT="$BUILD/moetrain"
if [ ! -x "$MT" ] || [ ! -f "$BUILD/libmoetrain_backend_cuda.so" ]; then
    say "- the CLI or the CUDA module was not built: stopping"
    exit 1
fi
info=$("$MT" info 2>&1)
echo "$info" >>"$LOG"
dev_line=$(grep -E '^ +cuda:0 ' <<<"$info" || true)
if [ -z "$dev_line" ] || grep -q unavailable <<<"$dev_line"; then
    say "- moetrain info lists no usable cuda device:"
    grep -i -A2 '^cuda' <<<"$info" | sed 's/^/    /' | tee -a "$REPORT"
    exit 1
fi
say "- device: ${dev_line#"${dev_line%%[! ]*}"}"
run "ctest (all backends)" ctest --test-dir "$BUILD" -j"$(nproc)" --output-on-failure --timeout 1800
run "op tests on cuda vs the float64 reference" env MOETRAIN_TEST_DEVICES=cuda "$BUILD/moetrain_tests" -tc="ops:*"

say ""
say "## Gradient check on cuda"
run "gradcheck tiny (dense + MoE)" "$MT" gradcheck --preset tiny --device cuda

say ""
say "## Benchmarks on cuda (training steps; unmeasured until this report exists)"
# fp32 and bf16, each with CUDA Graphs on (the default) and off, and bf16 with 16-bit attention.
variants=("" "--cuda-graphs off" "--precision bf16" "--precision bf16 --cuda-graphs off"
    "--precision bf16 --attention16")
say ""
say "| preset | variant | batch x seq | result (JSON) |"
say "|---|---|---|---|"
for spec in "dense-small 16 1024" "moe-mini 16 1024" "gpt2-124m 8 1024"; do
    read -r preset batch seq <<<"$spec"
    for v in "${variants[@]}"; do
        echo "==== bench $preset $v" >>"$LOG"
        # shellcheck disable=SC2086
        if out=$("$MT" bench --preset "$preset" --device cuda --batch "$batch" --seq "$seq" \
            --steps "$BENCH_STEPS" --warmup 3 ${PEAK_GFLOPS:+--peak-gflops "$PEAK_GFLOPS"} $v 2>&1); then
            say "| $preset | ${v:-fp32} | ${batch}x${seq} | \`$(tail -1 <<<"$out")\` |"
        else
            say "| $preset | ${v:-fp32} | ${batch}x${seq} | FAILED |"
            status=1
        fi
        echo "$out" >>"$LOG"
    done
done
say ""
say "## Multi-GPU (NCCL)"
gpus=$(grep -cE '^ +cuda:[0-9]+ ' <<<"$info" || true)
if [ "${gpus:-0}" -lt 2 ] || ! command -v mpirun >/dev/null; then
    say "- skipped: ${gpus:-0} CUDA GPU(s), mpirun $(command -v mpirun >/dev/null && echo found || echo missing)"
elif [ ! -f "$BUILD/libmoetrain_comm_nccl.so" ]; then
    say "- the nccl communicator module was not built: FAILED"
    status=1
else
    DT=(python3 tests/dist/dist_tests.py --mpirun mpirun --moetrain "$MT"
        --comm-check "$BUILD/moetrain_comm_check" --work "$BUILD/dist-work")
    for t in collectives_cuda_np2 dp_cuda_np2 zero_cuda_np2 ep_cuda_np2 ep_zero_cuda_np2; do
        run "dist $t" "${DT[@]}" "$t"
    done
    for t in capacity_dp_cuda_np2 capacity_ep_cuda_np2; do
        run "dist $t" python3 tests/dist/capacity_tests.py --mpirun mpirun --moetrain "$MT" \
            --work "$BUILD/dist-work" "$t"
    done
    say ""
    say "Weak scaling, moe-mini bf16, B=8 T=1024 per GPU, 20 steps (tokens/s of the last step):"
    say ""
    say "| GPUs | zero | tokens/s | per GPU |"
    say "|---|---|---|---|"
    scaling_data="$ROOT/$BUILD/dist-work/scaling-corpus.txt"
    mkdir -p "$(dirname "$scaling_data")"
    head -c 3000000 /dev/urandom | base64 >"$scaling_data"  # bytes tokenizer: any text
    n=1
    while [ "$n" -le "$gpus" ]; do
        for z in 0 1; do
            if [ "$n" -eq 1 ] && [ "$z" -eq 1 ]; then continue; fi
            log_json="$ROOT/$BUILD/dist-work/scaling-$n-$z.jsonl"
            rm -f "$log_json"
            if mpirun --allow-run-as-root -np "$n" "$MT" train --device cuda --preset moe-mini \
                --data "$scaling_data" --steps 20 --batch 8 --seq 1024 \
                --precision bf16 --zero "$z" --quiet --log-json "$log_json" >>"$LOG" 2>&1; then
                tps=$(tail -1 "$log_json" | python3 -c 'import json,sys; print(round(json.load(sys.stdin)["tokens_per_s"]))')
                say "| $n | $z | $tps | $((tps / n)) |"
            else
                say "| $n | $z | FAILED | |"
                status=1
            fi
        done
        n=$((n * 2))
    done
fi

say ""
say "Full output: $(basename "$LOG")"
echo "report: $REPORT"
exit $status
