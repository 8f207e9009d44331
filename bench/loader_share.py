#!/usr/bin/env python3
"""The data loader's share of a training step, from a `moetrain train --log-json FILE` run
(docs/BENCHMARKS.md, "Tokenizer and data loader"):

    python3 bench/loader_share.py FILE [--skip 5]

Each step record has `data_ms` (the loader's time for the step) and `elapsed_s` (wall clock
since the start); the step time is the difference of consecutive `elapsed_s`. The first
--skip steps (warm-up) are left out.
"""
import argparse
import json


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("log")
    ap.add_argument("--skip", type=int, default=5)
    a = ap.parse_args()
    recs = [json.loads(line) for line in open(a.log) if line.strip()]
    recs = [r for r in recs if "eval" not in r][a.skip:]
    if len(recs) < 2:
        raise SystemExit(f"{a.log}: fewer than {a.skip + 2} step records")
    steps = len(recs) - 1
    step_ms = (recs[-1]["elapsed_s"] - recs[0]["elapsed_s"]) * 1000 / steps
    data_ms = sum(r["data_ms"] for r in recs[1:]) / steps
    print(f"{steps} steps: mean step {step_ms:.1f} ms, mean loader {data_ms:.4f} ms "
          f"(max {max(r['data_ms'] for r in recs[1:]):.4f}), share {100 * data_ms / step_ms:.4f}%")


if __name__ == "__main__":
    main()
