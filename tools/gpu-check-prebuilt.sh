#!/usr/bin/env bash
# `tools/gpu-check.sh --prebuilt DIR`: the GPU check from a bundle of tools/gpu-bundle.sh (DIR:
# the unpacked moetrain-gpu-bundle directory or its .tar.xz), for a GPU host that is lent for
# minutes at a time: nothing is compiled. In about 8 minutes (BUDGET_S, default 480) it runs,
# each part under its own timeout so that one hang cannot eat the rest:
#   1. `moetrain info` (a usable cuda device, the attention implementation it reports);
#   2. the doctest suite on cpu + cuda (MOETRAIN_TEST_DEVICES=cpu,cuda);
#   3. gradcheck on cuda, the attention tests on moetrain's own kernels
#      (MOETRAIN_CUDA_ATTENTION=own; the suite ran cuDNN's where it loads), then the grouped GEMM
#      and MoE tests on cuda with the cuBLAS tiling
#      (MOETRAIN_CUDA_GROUPED_GEMM=cublas; the suite above ran the default, CUTLASS on Hopper);
#   4. the training table against the PyTorch peers of bench/pytorch_peer_cuda.py measured in
#      the same run: gpt2-124m bf16 16x1024 (eager + SDPA, torch.compile), gpt2-124m fp32 (no
#      TF32) 16x1024, moe-mini bf16 64x256 and seed-moe with 8 layers bf16 8x1024 (experts
#      through torch._grouped_mm); then the two MoE rows again with the cuBLAS tiling;
#   5. decode ms/token of gpt2-124m bf16 at batch 1 against the bandwidth bound (run before
#      the training table, so that a short budget still measures it);
#   6. one `bench --profile` (gpt2-124m bf16 16x1024) and attention forward + backward per
#      layer from it against SDPA at the same shape (bench/attention_sdpa.py), and the same
#      at seed-moe's MQA shape and at head_dim 128 from 2-layer models' profiles; the same step's
#      products by shape (`--profile-shapes`), decode's and the fp32 step's profiles, and
#      PyTorch's bf16 GEMMs at one gpt2 layer's products (bench/gemm_torch_cuda.py);
#   7. the grouped products' rows of a moe-mini bf16 profile on each grouped GEMM path.
# Parts left when the budget is spent are listed as skipped. The report goes to
# $OUT/gpu-check-prebuilt-<host>-<time>.md with the full log next to it; the exit status is
# non-zero when a part failed. Environment: OUT (default gpu-check-reports), BUDGET_S,
# BENCH_STEPS (default 10), PYTHON (the host's Python with torch, default python3),
# DOCTEST_ARGS (e.g. -tc='ops:*'), QUICK=1 (skips the reruns on the WMMA attention kernels and the
# cuBLAS-tiled grouped GEMM, the MQA / head_dim 128 attention lines and the grouped profiles:
# the parts a change elsewhere leaves as they were), PEER_ARGS (more arguments for every peer), CHECK_DEVICE (default cuda; cpu: a dry run of this script on
# a machine without a GPU, every size shrunk to B=1 T=64 and 2 steps).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
ROOT=$PWD
SRC=${1:?usage: tools/gpu-check.sh --prebuilt DIR (a moetrain-gpu-bundle directory or .tar.xz)}
OUT=${OUT:-gpu-check-reports}
BUDGET_S=${BUDGET_S:-480}
BENCH_STEPS=${BENCH_STEPS:-10}
PYTHON=${PYTHON:-python3}
DEV=${CHECK_DEVICE:-cuda}
QUICK=${QUICK:-0}
read -r -a DOCTEST_EXTRA <<<"${DOCTEST_ARGS:-}"
read -r -a PEER_EXTRA <<<"${PEER_ARGS:-}"  # e.g. --attention math on a dry run with torch 1.x
# shape B T: the batch and sequence of a benchmark (B=1 T=64 on a dry run)
shape() { if [ "$DEV" = cuda ]; then echo "$1 $2"; else echo "1 64"; fi; }
if [ "$DEV" != cuda ]; then BENCH_STEPS=2; fi
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
START=$(date +%s)
REPORT="$OUT/gpu-check-prebuilt-$(hostname)-$(date +%Y%m%d-%H%M%S).md"
LOG="${REPORT%.md}.log"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/moetrain-gpu-check.XXXXXX")
status=0
declare -A best_peer  # config name -> the best peer's tokens/s of its row
: >"$LOG"
say() { printf '%s\n' "$*" | tee -a "$REPORT"; }
elapsed() { echo $(($(date +%s) - START)); }
# cap SECONDS: SECONDS, or what is left of the budget when less (at least 10 s).
cap() {
    local left=$((BUDGET_S - $(elapsed)))
    if [ "$left" -lt 10 ]; then left=10; fi
    if [ "$1" -lt "$left" ]; then echo "$1"; else echo "$left"; fi
}
# within SECONDS: true while the budget has SECONDS left; otherwise notes the part as skipped.
within() {
    if [ $(($(elapsed) + $1)) -le "$BUDGET_S" ]; then return 0; fi
    say "- $2: skipped (the ${BUDGET_S} s budget is spent: $(elapsed) s used)"
    return 1
}
# part TITLE TIMEOUT CMD...: the command's output to the log, one line to the report.
part() {
    local title=$1 limit
    within "$(($2 / 4))" "$title" || return 1
    limit=$(cap "$2")
    shift 2
    echo "==== $title ($(elapsed) s): $*" >>"$LOG"
    local t0 rc
    t0=$(date +%s)
    timeout --kill-after=10 "$limit" "$@" >>"$LOG" 2>&1
    rc=$?
    local dt=$(($(date +%s) - t0))
    if [ $rc -eq 0 ]; then
        say "- $title: ok (${dt} s)"
    elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
        say "- $title: TIMED OUT after ${limit} s"
        status=1
    else
        say "- $title: FAILED, exit $rc (${dt} s; see $(basename "$LOG"))"
        status=1
    fi
    return $rc
}
# capture TIMEOUT CMD...: stdout's last line (the JSON line of a bench or a peer, or whatever
# a failure left there), the whole output to the log.
capture() {
    local limit
    limit=$(cap "$1")
    shift
    echo "==== ($(elapsed) s): $*" >>"$LOG"
    local out
    out=$(timeout --kill-after=10 "$limit" "$@" 2>>"$LOG")
    local rc=$?
    echo "$out" >>"$LOG"
    echo "(exit $rc)" >>"$LOG"
    tail -1 <<<"$out"
    return 0
}
json_get() { "$PYTHON" -c 'import json,sys
try: print(json.loads(sys.argv[1]).get(sys.argv[2], ""))
except Exception: print("")' "$1" "$2"; }

# ---- the bundle ----
if [ -f "$SRC" ]; then
    tar -C "$WORK" -xJf "$SRC" || { echo "cannot unpack $SRC" >&2; exit 1; }
    BUNDLE="$WORK/moetrain-gpu-bundle"
else
    BUNDLE=$(cd "$SRC" && pwd)
fi
if [ ! -f "$BUNDLE/env.sh" ]; then
    echo "$SRC is not a moetrain-gpu-bundle (no env.sh): make one with tools/gpu-bundle.sh" >&2
    exit 1
fi
# shellcheck source=/dev/null
source "$BUNDLE/env.sh" "$ROOT" >>"$LOG" 2>&1
MT="$BUNDLE/bin/moetrain"
PEERS="$BUNDLE/bench"

say "# moetrain GPU check (prebuilt bundle)"
say ""
say "- bundle: $(sed -n 's/^commit=//p' "$BUNDLE/BUNDLE_INFO"), built $(sed -n 's/^built=//p' "$BUNDLE/BUNDLE_INFO")"
say "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
if command -v nvidia-smi >/dev/null; then
    say "- GPU: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | head -1)"
fi
say "- peers: $("$PYTHON" -c 'import torch; print("torch", torch.__version__)' 2>&1 | tail -1)"
unresolved=$(for e in "$MT" "$BUNDLE/bin/moetrain_tests" "$BUNDLE/bin/libmoetrain_backend_cuda.so"; do
    ldd "$e"; done | awk '/not found/ {print $1}' | sort -u | tr '\n' ' ')
if [ -n "$unresolved" ]; then
    say "- libraries not found on this host: $unresolved: stopping"
    exit 1
fi
info=$("$MT" info 2>&1)
echo "$info" >>"$LOG"
dev_line=$(grep -E "^ +$DEV(:0)? " <<<"$info" | head -1 || true)
if [ -z "$dev_line" ] || grep -q unavailable <<<"$dev_line"; then
    say "- moetrain info lists no usable $DEV device:"
    grep -i -A2 '^cuda' <<<"$info" | sed 's/^/    /' | tee -a "$REPORT"
    exit 1
fi
say "- device: ${dev_line#"${dev_line%%[! ]*}"}"
say "- moetrain info, cuda:"
say '```'
grep -A4 '^cuda' <<<"$info" | tee -a "$REPORT" >/dev/null
say '```'
say ""
say "## Correctness"
test_devices=cpu,cuda
if [ "$DEV" != cuda ]; then test_devices=cpu; fi
part "doctest suite on $test_devices" 240 env MOETRAIN_TEST_DEVICES=$test_devices \
    "$BUNDLE/bin/moetrain_tests" "${DOCTEST_EXTRA[@]}"
part "gradcheck on $DEV (tiny: dense + MoE)" 60 "$MT" gradcheck --preset tiny --device "$DEV"
if [ "$DEV" = cuda ] && [ "$QUICK" != 1 ]; then
    # The suite ran the default grouped GEMM (CUTLASS on compute capability 9.0); the grouped op
    # tests and the MoE model tests again on the cuBLAS tiling, which other GPUs take.
    # The suite ran cuDNN's attention where it loads (the default); which kernels the 16-bit
    # attention tests took, then those tests again on moetrain's own kernels.
    attn_used=$(grep -hE '16-bit attention at|: (cudnn|wmma)$' "$LOG" | grep -oE '(cudnn|wmma)$' |
        sort | uniq -c | tr -s ' ' | paste -sd, -)
    say "- 16-bit attention kernels the suite's attention tests ran on cuda: ${attn_used:-none reported}"
    part "attention tests on cuda with MOETRAIN_CUDA_ATTENTION=own (the WMMA kernels)" 60 \
        env MOETRAIN_TEST_DEVICES=cuda MOETRAIN_CUDA_ATTENTION=own \
        "$BUNDLE/bin/moetrain_tests" -tc='*attention*'
    part "grouped GEMM and MoE tests on cuda with MOETRAIN_CUDA_GROUPED_GEMM=cublas" 120 \
        env MOETRAIN_TEST_DEVICES=cuda MOETRAIN_CUDA_GROUPED_GEMM=cublas \
        "$BUNDLE/bin/moetrain_tests" -tc='*gemm_grouped*,*MoE*,*moe*,*expert*'
fi

# Decode first: ~10 s, and a short budget (QUICK=1) still measures it.
say ""
say "## Decode"
if within 60 "decode"; then
    dec=$(capture 120 "$MT" bench --preset gpt2-124m --device "$DEV" --precision bf16 \
        --attention16 --batch 1 --seq 64 --generate "$([ "$DEV" = cuda ] && echo 128 || echo 8)" --warmup 1)
    if [ -n "$(json_get "$dec" ms_per_step)" ]; then
        say "- decode gpt2-124m bf16, batch 1: $(json_get "$dec" ms_per_step) ms/token;" \
            "bandwidth bound $(json_get "$dec" bandwidth_bound_tokens_per_s) tokens/s" \
            "($(json_get "$dec" bandwidth_gbs) GB/s, $(json_get "$dec" bandwidth_source))"
    else
        say "- decode gpt2-124m bf16: FAILED"
        status=1
    fi
fi
say ""
say "## Training tokens/s against the PyTorch peers (median of $BENCH_STEPS steps, same run)"
say ""
say "moetrain's bf16 rows run with \`--attention16\` (attention products on 16-bit operands with"
say "fp32 accumulation: the tensor-core kernels, as the peers' bf16 SDPA); its fp32 row keeps fp32"
say "attention."
say ""
say "| config, B x T | moetrain | MFU (peak source) | PyTorch eager | PyTorch compiled | moetrain / best peer |"
say "|---|---|---|---|---|---|"
"$MT" config --preset gpt2-124m >"$WORK/gpt2.json" 2>>"$LOG"
"$MT" config --preset moe-mini >"$WORK/moe-mini.json" 2>>"$LOG"
"$MT" config --preset seed-moe 2>>"$LOG" |
    "$PYTHON" -c 'import json,sys; c=json.load(sys.stdin); c["n_layers"]=8; print(json.dumps(c))' \
        >"$WORK/seed-moe-8l.json"
# name config precision batch seq compile?
for spec in "gpt2-124m gpt2 bf16 16 1024 yes" "gpt2-124m gpt2 fp32 16 1024 no" \
    "moe-mini moe-mini bf16 64 256 no" "seed-moe-8l seed-moe-8l bf16 8 1024 no"; do
    read -r name conf prec batch seq compiled <<<"$spec"
    read -r batch seq <<<"$(shape "$batch" "$seq")"
    within 60 "bench $name $prec ${batch}x$seq" || continue
    attn16=()  # 16-bit attention with 16-bit products, as the peers' autocast SDPA
    if [ "$prec" = bf16 ]; then attn16=(--attention16); fi
    ours=$(capture 180 "$MT" bench --config "$WORK/$conf.json" --device "$DEV" --precision "$prec" \
        "${attn16[@]}" --batch "$batch" --seq "$seq" --steps "$BENCH_STEPS" --warmup 3)
    peer=("$PYTHON" "$PEERS/pytorch_peer_cuda.py" --config "$WORK/$conf.json" --precision "$prec"
        --batch "$batch" --seq "$seq" --steps "$BENCH_STEPS" --warmup 3 --device "$DEV"
        "${PEER_EXTRA[@]}")
    eager=$(capture 180 "${peer[@]}")
    comp="-"  # not run for this row
    if [ "$compiled" = yes ] && within 90 "PyTorch compiled $name"; then
        comp=$(capture 240 "${peer[@]}" --mode compile)
    fi
    row=$("$PYTHON" - "$ours" "$eager" "$comp" <<'EOF'
import json, sys
def load(s):
    try:
        return json.loads(s)
    except Exception:
        return None
ours, eager, comp = (load(s) for s in sys.argv[1:])
comp_cell = "" if sys.argv[3] == "-" else None
def tps(j):
    return j["tokens_per_s"] if isinstance(j, dict) and "tokens_per_s" in j else None
def cell(j):
    t = tps(j)
    if not t:
        return f"unavailable: {j['unavailable']}" if isinstance(j, dict) and "unavailable" in j else "FAILED"
    extra = f" ({j['experts']})" if j.get("experts") else ""
    return (f"{t / 1000:.1f}K" if t >= 1000 else f"{t:.1f}") + extra
best = max([t for t in (tps(eager), tps(comp)) if t] or [0])
mfu = f"{100 * ours['mfu']:.1f}% ({ours['peak_source']})" if tps(ours) else ""
ratio = f"**{tps(ours) / best:.2f}x**" if tps(ours) and best else ""
print(f"{cell(ours)} | {mfu} | {cell(eager)} | {cell(comp) if comp_cell is None else comp_cell} | {ratio}")
EOF
)
    say "| $name $prec, $batch x $seq | $row |"
    if [ -z "$(json_get "$ours" tokens_per_s)" ]; then status=1; fi
    best_peer[$name]=$("$PYTHON" -c '
import json, sys
t = []
for s in sys.argv[1:]:
    try:
        t.append(json.loads(s)["tokens_per_s"])
    except Exception:
        pass
print(max(t) if t else "")' "$eager" "$comp")
done

# The MoE rows again with the cuBLAS tiling (MOETRAIN_CUDA_GROUPED_GEMM=cublas), against the
# same peers' tokens/s measured above.
if [ "$QUICK" != 1 ]; then
say ""
say "| config, B x T, cuBLAS-tiled grouped GEMM | moetrain | moetrain / best peer |"
say "|---|---|---|"
fi
[ "$QUICK" = 1 ] || for spec in "moe-mini moe-mini 64 256" "seed-moe-8l seed-moe-8l 8 1024"; do
    read -r name conf batch seq <<<"$spec"
    read -r batch seq <<<"$(shape "$batch" "$seq")"
    within 40 "bench $name bf16 cublas" || continue
    ours=$(capture 120 env MOETRAIN_CUDA_GROUPED_GEMM=cublas "$MT" bench \
        --config "$WORK/$conf.json" --device "$DEV" --precision bf16 --attention16 \
        --batch "$batch" --seq "$seq" --steps "$BENCH_STEPS" --warmup 3)
    tps=$(json_get "$ours" tokens_per_s)
    cells="FAILED | "
    if [ -n "$tps" ]; then
        cells=$("$PYTHON" -c '
import sys
t, best = float(sys.argv[1]), sys.argv[2]
cell = f"{t / 1000:.1f}K" if t >= 1000 else f"{t:.1f}"
print(cell + " | " + (f"**{t / float(best):.2f}x**" if best else ""))' "$tps" "${best_peer[$name]:-}")
    fi
    say "| $name bf16, $batch x $seq | $cells |"
    if [ -z "$tps" ]; then status=1; fi
done

say ""
say "## Attention and profiles"
# attn_vs_sdpa PROFILE LAYERS B H K T HD: attention_fwd + attention_bwd ms/step of a profile's
# table (booked with the kernel variant: attention_fwd[cudnn], attention_bwd[wmma], ...) per
# layer, against SDPA at the same shape, as one report line.
attn_vs_sdpa() {
    local table=$1 layers=$2 b=$3 h=$4 k=$5 t=$6 hd=$7 rows per_layer kernels sdpa
    rows='$1 ~ /^attention_(fwd|bwd)(\[[a-z0-9]+\])?$/'
    per_layer=$(awk "$rows"' {s += $4} END {printf "%.3f", s / '"$layers"'}' "$table")
    kernels=$(awk "$rows"' {print $1}' "$table" | paste -sd' ' -)
    sdpa=$(capture 60 "$PYTHON" "$PEERS/attention_sdpa.py" --batch "$b" --heads "$h" \
        --kv-heads "$k" --seq "$t" --head-dim "$hd")
    say "- attention fwd + bwd per layer, B$b H$h K$k T$t hd$hd bf16: moetrain $per_layer ms" \
        "(profile, synchronised per op: ${kernels:-no attention row}), SDPA" \
        "$(json_get "$sdpa" ms_fwd_bwd) ms"
}
read -r pb pt <<<"$(shape 16 1024)"
if part "profile gpt2-124m bf16 ${pb}x$pt (3 steps)" 180 "$MT" bench --preset gpt2-124m \
    --device "$DEV" --precision bf16 --attention16 --batch "$pb" --seq "$pt" --steps 3 --warmup 2 \
    --profile; then
    # The profile's table from the log, and attention over its 12 layers against SDPA.
    awk '/^==== profile/ {p = 1} p' "$LOG" | sed -n '/^op /,/^(ops timed/p' >"$WORK/profile.txt"
    say ""
    say '```'
    tee -a "$REPORT" <"$WORK/profile.txt" >/dev/null
    say '```'
    attn_vs_sdpa "$WORK/profile.txt" 12 "$pb" 12 12 "$pt" 64
fi

# The same step's matrix products split by shape, operand dtypes and epilogue
# (`--profile-shapes`), beside PyTorch's per-product rows of bench/gemm_torch_cuda.py below; then
# where decode's time goes (batch 1, ops synchronised one by one), and the fp32 step's top rows.
# top_rows TITLE PATTERN N: the profile table rows of the log's part TITLE matching PATTERN.
top_rows() {
    awk -v t="==== $1" 'index($0, t) == 1 {p = 1; next} /^==== / {p = 0} p' "$LOG" |
        sed -n '/^op /,/^(ops timed/p' | grep -E "$2" | head -"$3"
}
profile_part() {  # TITLE PATTERN N bench-arguments...
    local title=$1 pattern=$2 n=$3
    shift 3
    if part "$title" 120 "$MT" bench "$@" --device "$DEV"; then
        say ""
        say '```'
        top_rows "$title" "$pattern" "$n" | tee -a "$REPORT" >/dev/null
        say '```'
    fi
}
profile_part "profile-shapes gpt2-124m bf16 ${pb}x$pt (2 steps)" '^(op |gemm)' 40 \
    --preset gpt2-124m --precision bf16 --attention16 --batch "$pb" --seq "$pt" --steps 2 \
    --warmup 1 --profile-shapes
profile_part "profile decode gpt2-124m bf16 batch 1 (32 tokens)" '.' 25 --preset gpt2-124m \
    --precision bf16 --attention16 --batch 1 --seq 64 \
    --generate "$([ "$DEV" = cuda ] && echo 32 || echo 4)" --warmup 1 --profile
profile_part "profile gpt2-124m fp32 ${pb}x$pt (2 steps)" '.' 16 --preset gpt2-124m \
    --precision fp32 --batch "$pb" --seq "$pt" --steps 2 --warmup 1 --profile

# What PyTorch's bf16 GEMMs reach at one gpt2 layer's products (bf16 and, where torch has it,
# fp32 outputs), beside the gemm rows of the profile above.
gp=$(capture 60 "$PYTHON" "$PEERS/gemm_torch_cuda.py" --tokens $((pb * pt)) --d-model 768 \
    --d-ff 3072)
gp_layer=$(json_get "$gp" layer)
say "- PyTorch bf16 GEMMs of one gpt2 layer (fwd + both gradients) at $((pb * pt)) tokens" \
    "(bench/gemm_torch_cuda.py): ${gp_layer:-$(json_get "$gp" unavailable)}"
"$PYTHON" -c 'import json, sys
try:
    for r in json.loads(sys.argv[1])["products"]:
        print("  - " + " ".join(f"{k}={v}" for k, v in r.items()))
except Exception:
    pass' "$gp" | tee -a "$REPORT" >/dev/null

# Attention forward + backward per layer at two more of the issue's shapes, from a 2-layer
# model's profile, against SDPA at the same shape: seed-moe's MQA (B8 H12 K1 T1024 hd64) and
# head_dim 128 (B4 H16 T2048).
"$MT" config --preset seed-moe 2>>"$LOG" |
    "$PYTHON" -c 'import json,sys; c=json.load(sys.stdin); c["n_layers"]=2; print(json.dumps(c))' \
        >"$WORK/attn-mqa.json"
"$MT" config --preset gpt2-124m 2>>"$LOG" |
    "$PYTHON" -c 'import json,sys; c=json.load(sys.stdin); c.update(n_layers=2, d_model=2048,
n_heads=16, n_kv_heads=16, head_dim=128, d_ff=8192, max_seq_len=2048); print(json.dumps(c))' \
        >"$WORK/attn-hd128.json"
[ "$QUICK" = 1 ] || for spec in "attn-mqa 8 1024 12 1 64" "attn-hd128 4 2048 16 16 128"; do
    read -r conf ab at ah ak ahd <<<"$spec"
    read -r ab at <<<"$(shape "$ab" "$at")"
    if part "profile $conf bf16 ${ab}x$at (2 layers, 3 steps)" 60 "$MT" bench \
        --config "$WORK/$conf.json" --device "$DEV" --precision bf16 --attention16 \
        --batch "$ab" --seq "$at" --steps 3 --warmup 2 --profile; then
        awk '/^==== profile '"$conf"'/ {p = 1} p' "$LOG" | sed -n '/^op /,/^(ops timed/p' \
            >"$WORK/profile-$conf.txt"
        attn_vs_sdpa "$WORK/profile-$conf.txt" 2 "$ab" "$ah" "$ak" "$at" "$ahd"
    fi
done

# The grouped products' share of a moe-mini bf16 step, on each grouped GEMM path.
read -r mb mt <<<"$(shape 64 256)"
[ "$QUICK" = 1 ] || for gg in cublas cutlass; do
    if part "profile moe-mini bf16 ${mb}x$mt, $gg grouped GEMM (3 steps)" 90 \
        env MOETRAIN_CUDA_GROUPED_GEMM=$gg "$MT" bench --config "$WORK/moe-mini.json" \
        --device "$DEV" --precision bf16 --attention16 --batch "$mb" --seq "$mt" --steps 3 \
        --warmup 2 --profile; then
        say ""
        say '```'
        awk '/^==== profile moe-mini/ {p = 0} /^==== profile moe-mini.*'"$gg"'/ {p = 1} p' "$LOG" |
            sed -n '/^op /,/^(ops timed/p' | grep -E '^(op |gemm|total)' | tee -a "$REPORT" >/dev/null
        say '```'
    fi
done

say ""
say "Total $(elapsed) s. Full output: $(basename "$LOG")"
rm -rf "$WORK"
echo "report: $REPORT"
exit $status
