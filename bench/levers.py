#!/usr/bin/env python3
"""Memory and speed of each memory / precision lever: `moetrain bench` on a preset with fp32 (baseline),
--precision bf16 / fp16, --recompute ffn / block and --optimizer adamw8bit, each run --runs
times (median tokens/s and peak RSS), next to what `moetrain plan` predicts for the same
options. Prints one markdown row per lever and a last JSON line with every row.

    python3 bench/levers.py --moetrain build/moetrain --preset moe-mini --batch 8 --seq 256
"""
import json
import os
import statistics
import subprocess

from bench_args import HERE, last_json, shape_parser
LEVERS = [
    ("fp32 (baseline)", []),
    ("--precision bf16", ["--precision", "bf16"]),
    ("--precision fp16", ["--precision", "fp16"]),
    ("--recompute ffn", ["--recompute", "ffn"]),
    ("--recompute block", ["--recompute", "block"]),
    ("--optimizer adamw8bit", ["--optimizer", "adamw8bit"]),
    ("bf16 + block + adamw8bit", ["--precision", "bf16", "--recompute", "block", "--optimizer",
                                  "adamw8bit"]),
]


def run_json(cmd):
    return last_json(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)


def main():
    ap = shape_parser(runs=3, steps=2)
    ap.add_argument("--levers", default="",
                    help="comma-separated lever names to run (default: all), e.g. "
                         "'fp32 (baseline),--precision bf16'")
    a = ap.parse_args()
    wanted = [w for w in a.levers.split(",") if w]
    levers = [lv for lv in LEVERS if not wanted or lv[0] in wanted]
    if wanted and len(levers) != len(wanted):
        ap.error(f"--levers: unknown name among {wanted}; known: {[n for n, _ in LEVERS]}")
    shape = ["--preset", a.preset, "--batch", str(a.batch), "--seq", str(a.seq)]
    rows = []
    print(f"| lever | tokens/s | peak RSS MB | plan MB | RSS / plan | load |")
    print("|---|---|---|---|---|---|")
    for name, flags in levers:
        plan = run_json([a.moetrain, "plan"] + shape + flags)
        tps, rss, loads = [], [], []
        for _ in range(a.runs):
            loads.append(os.getloadavg()[0])
            m = run_json([a.moetrain, "bench", "--device", "cpu", "--steps", str(a.steps),
                           "--warmup", "1", "--threads", str(a.threads)] + shape + flags)
            tps.append(m["tokens_per_s"])
            rss.append(m["peak_rss_mb"])
        plan_mb = plan["total"] / 2**20
        row = {"lever": name, "tokens_per_s": statistics.median(tps),
               "peak_rss_mb": statistics.median(rss), "plan_mb": plan_mb, "runs": tps,
               "load_min": min(loads), "load_max": max(loads)}
        rows.append(row)
        print(f"| {name} | {row['tokens_per_s']:.0f} | {row['peak_rss_mb']:.0f} | {plan_mb:.0f} | "
              f"{row['peak_rss_mb'] / plan_mb:.2f} | {min(loads):.1f}-{max(loads):.1f} |",
              flush=True)
    print(json.dumps({"preset": a.preset, "batch": a.batch, "seq": a.seq, "rows": rows}))


if __name__ == "__main__":
    main()
