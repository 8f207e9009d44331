#!/usr/bin/env bash
# Every measurement behind the CPU section of docs/BENCHMARKS.md, in one run:
#   bash bench/cpu_table.sh [build-dir] [out-dir]
# Runs moetrain and the PyTorch baseline alternately (bench/compare.py, medians of 5 runs),
# the 1-thread runs, the attention T-scaling table, KV-cache decoding and one --profile per
# MoE/dense preset. Needs /usr/bin/python3 with python3-torch for the PyTorch columns.
# Each result is one JSON line in OUT/<name>.json; the full output is in OUT/<name>.log.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
out=${2:-$here/../bench-results/$(date -u +%Y%m%dT%H%M)}
mt=$build/moetrain
mkdir -p "$out"
export OMP_WAIT_POLICY=passive
run() { # name, command...
  local name=$1; shift
  echo "== $name (load $(cut -d' ' -f1 /proc/loadavg), $(date -u +%H:%M:%S))"
  "$@" 2>&1 | tee "$out/$name.log" | tail -1 > "$out/$name.json"
  tail -1 "$out/$name.json"
}
{
  echo "commit $(git -C "$here" rev-parse --short HEAD), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
  "$build/moetrain_microbench" --benchmark_filter=fma_peak 2>/dev/null | grep -E 'fma_peak' || true
} | tee "$out/machine.txt"
cmp="python3 $here/compare.py --moetrain $mt"
run dense-small_b8_t256 $cmp --preset dense-small --batch 8 --seq 256 --runs 5 --steps 5
run moe-mini_b8_t256 $cmp --preset moe-mini --batch 8 --seq 256 --runs 5 --steps 3
run dense-small_b8_t256_1thread $cmp --preset dense-small --batch 8 --seq 256 --runs 5 --steps 3 --threads 1 --no-torch
run gpt2_b4_t64 $cmp --preset gpt2-124m --batch 4 --seq 64 --runs 5 --steps 5
run gpt2_b8_t256 $cmp --preset gpt2-124m --batch 8 --seq 256 --runs 5 --steps 2
run moe-mini_generate $cmp --preset moe-mini --batch 1 --seq 16 --generate 128 --runs 5
run attention_scaling python3 "$here/attention_scaling.py" --moetrain "$mt" --preset dense-small --runs 5 --steps 3
run profile_moe-mini "$mt" bench --device cpu --preset moe-mini --batch 8 --seq 256 --steps 2 --warmup 1 --threads 2 --profile
run profile_dense-small "$mt" bench --device cpu --preset dense-small --batch 8 --seq 256 --steps 2 --warmup 1 --threads 2 --profile
echo "done $(date -u +%H:%M:%S)"
