#!/usr/bin/env python3
"""Runs `moetrain bench` and the PyTorch baseline (bench/compare_pytorch.py) alternately on the
same config, batch, sequence length and thread count, and prints the medians and their ratio.

    python3 bench/compare.py --preset dense-small --batch 8 --seq 256 --runs 5 --steps 5

Both run under the same environment (OPENBLAS_CORETYPE etc. are left as they are).
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def last_json(out):
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--moetrain", default=os.path.join(HERE, "..", "build", "moetrain"))
    ap.add_argument("--preset", required=True)
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--seq", type=int, required=True)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--no-torch", action="store_true", help="moetrain only")
    a = ap.parse_args()
    cfg = subprocess.run([a.moetrain, "config", "--preset", a.preset], capture_output=True,
                         text=True, check=True).stdout
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        f.write(cfg)
        conf = f.name
    ours, torch_runs, rss, mfu = [], [], [], []
    for i in range(a.runs):
        m = last_json(subprocess.run(
            [a.moetrain, "bench", "--device", "cpu", "--preset", a.preset, "--batch",
             str(a.batch), "--seq", str(a.seq), "--steps", str(a.steps), "--threads",
             str(a.threads)], capture_output=True, text=True, check=True).stdout)
        ours.append(m["tokens_per_s"])
        rss.append(m["peak_rss_mb"])
        mfu.append(m["mfu"])
        line = f"run {i + 1}: moetrain {m['tokens_per_s']:.0f} tok/s (MFU {100 * m['mfu']:.1f}%)"
        if not a.no_torch:
            t = last_json(subprocess.run(
                ["/usr/bin/python3", os.path.join(HERE, "compare_pytorch.py"), "--config", conf,
                 "--batch", str(a.batch), "--seq", str(a.seq), "--steps", str(a.steps),
                 "--threads", str(a.threads)], capture_output=True, text=True,
                check=True).stdout)
            torch_runs.append(t["tokens_per_s"])
            line += f", pytorch {t['tokens_per_s']:.0f} tok/s"
        print(line, flush=True)
    res = {"preset": a.preset, "batch": a.batch, "seq": a.seq, "threads": a.threads,
           "runs": a.runs, "moetrain_tokens_per_s": statistics.median(ours),
           "moetrain_mfu": statistics.median(mfu), "moetrain_peak_rss_mb": statistics.median(rss)}
    if torch_runs:
        res["pytorch_tokens_per_s"] = statistics.median(torch_runs)
        res["ratio"] = res["moetrain_tokens_per_s"] / res["pytorch_tokens_per_s"]
    print(json.dumps(res))
    os.unlink(conf)


if __name__ == "__main__":
    main()
