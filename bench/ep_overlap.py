#!/usr/bin/env python3
"""Expert-parallel token exchange, plain against overlapped (docs/DISTRIBUTED.md, "Overlap"):
trains the same run with `--overlap 0` and `--overlap 1` under `mpirun -np N` for each rank
count, and prints rank 0's median step time and the median share of it spent inside collectives
(`comm_ms` of `train --log-json`), checking that both runs logged the same losses.

    python3 bench/ep_overlap.py --moetrain build/moetrain --data ../shared/data/tinyshakespeare.txt \\
        [--ranks 2 4] [--steps 12] [--skip 2] [-- extra train arguments]

Each rank runs one OpenMP thread. Run it on a machine doing nothing else (pause helpers).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile


def run(a, n, overlap, work):
    log = os.path.join(work, f"np{n}_overlap{overlap}.jsonl")
    argv = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(n), a.moetrain,
            "train", "--preset", a.preset, "--data", a.data, "--steps", str(a.steps),
            "--batch", str(a.batch), "--seq", str(a.seq), "--expert-parallel", str(n),
            "--overlap", str(overlap), "--threads", "1", "--log-json", log, "--quiet",
            *a.extra]
    p = subprocess.run(argv, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"{' '.join(argv)} failed:\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
    recs = [json.loads(x) for x in open(log) if '"step"' in x and '"split"' not in x]
    recs = recs[a.skip:]
    step_ms = [1e3 * (b["elapsed_s"] - r["elapsed_s"]) for r, b in zip(recs, recs[1:])]
    share = [b["comm_ms"] / s for b, s in zip(recs[1:], step_ms)]
    return statistics.median(step_ms), 100 * statistics.median(share), [r["loss"] for r in recs]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--moetrain", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--ranks", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--preset", default="tiny")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--skip", type=int, default=2)
    ap.add_argument("extra", nargs="*")
    a = ap.parse_args()
    print("| ranks (EP) | exchange | median step | in collectives | losses |")
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as work:
        for n in a.ranks:
            plain = run(a, n, 0, work)
            over = run(a, n, 1, work)
            same = "same" if plain[2] == over[2] else "DIFFER"
            for name, r in (("plain", plain), ("overlapped", over)):
                print(f"| {n} | {name} | {r[0]:.1f} ms | {r[1]:.1f}% | {same} |")


if __name__ == "__main__":
    main()
