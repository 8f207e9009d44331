#!/usr/bin/env python3
"""Attention scaling table: `moetrain bench` at T = 128, 256, 512, 1024 with B*T fixed (2048
tokens per step by default), median tokens/s and peak RSS of --runs runs per T, next to the
analytic memory need. Flash-style attention keeps no T x T matrix, so at fixed B*T the
memory stays flat in T while the attention FLOPs per token grow linearly.

    python3 bench/attention_scaling.py --moetrain build/moetrain --preset dense-small

Prints one markdown row per T and a last JSON line with every row.
"""
import argparse
import json
import os
import statistics
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))


def bench(a, batch, seq):
    out = subprocess.run(
        [a.moetrain, "bench", "--device", "cpu", "--preset", a.preset, "--batch", str(batch),
         "--seq", str(seq), "--steps", str(a.steps), "--threads", str(a.threads)],
        capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--moetrain", default=os.path.join(HERE, "..", "build", "moetrain"))
    ap.add_argument("--preset", default="dense-small")
    ap.add_argument("--tokens", type=int, default=2048, help="B*T, fixed")
    ap.add_argument("--seqs", default="128,256,512,1024")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    rows = []
    print("| T | B | tokens/s | MFU | peak RSS MB | analytic MB | RSS / analytic | load |")
    print("|---|---|---|---|---|---|---|---|")
    for seq in (int(s) for s in a.seqs.split(",")):
        batch = max(1, a.tokens // seq)
        runs, loads = [], []
        for _ in range(a.runs):
            loads.append(os.getloadavg()[0])
            runs.append(bench(a, batch, seq))
        row = {"seq": seq, "batch": batch, "runs": a.runs,
               "tokens_per_s": statistics.median(r["tokens_per_s"] for r in runs),
               "mfu": statistics.median(r["mfu"] for r in runs),
               "peak_rss_mb": statistics.median(r["peak_rss_mb"] for r in runs),
               "analytic_mb": runs[0]["analytic_mb"], "load_min": min(loads),
               "load_max": max(loads)}
        rows.append(row)
        print(f"| {seq} | {batch} | {row['tokens_per_s']:.0f} | {100 * row['mfu']:.1f}% | "
              f"{row['peak_rss_mb']:.0f} | {row['analytic_mb']:.0f} | "
              f"{row['peak_rss_mb'] / row['analytic_mb']:.2f} | "
              f"{row['load_min']:.1f}-{row['load_max']:.1f} |", flush=True)
    print(json.dumps({"preset": a.preset, "threads": a.threads, "rows": rows}))


if __name__ == "__main__":
    main()
