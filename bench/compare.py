#!/usr/bin/env python3
"""Runs `moetrain bench` and the PyTorch baseline (bench/compare_pytorch.py) alternately on the
same config, batch, sequence length and thread count, and prints the medians and their ratio.

    python3 bench/compare.py --preset dense-small --batch 8 --seq 256 --runs 5 --steps 5
    python3 bench/compare.py --preset moe-mini --batch 1 --seq 16 --generate 64   # decode only

Both run under the same environment (OPENBLAS_CORETYPE etc. are left as they are). The
1-minute load average (os.getloadavg) is printed before every run and its range is part of
the final JSON, since other processes on the machine change the numbers.
"""
import json
import os
import statistics
import subprocess
import tempfile

from bench_args import HERE, last_json, shape_parser


def main():
    ap = shape_parser(runs=5, steps=5)
    ap.add_argument("--no-torch", action="store_true", help="moetrain only")
    ap.add_argument("--generate", type=int, default=0,
                    help="time N decode tokens after a --seq prompt instead (moetrain only)")
    a = ap.parse_args()
    if a.generate:
        a.no_torch = True
    cfg = subprocess.run([a.moetrain, "config", "--preset", a.preset], capture_output=True,
                         text=True, check=True).stdout
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        f.write(cfg)
        conf = f.name
    ours, torch_runs, rss, mfu, loads = [], [], [], [], []
    for i in range(a.runs):
        loads.append(os.getloadavg()[0])
        cmd = [a.moetrain, "bench", "--device", "cpu", "--preset", a.preset, "--batch",
               str(a.batch), "--seq", str(a.seq), "--steps", str(a.steps), "--threads",
               str(a.threads)]
        if a.generate:
            cmd += ["--generate", str(a.generate), "--warmup", "1"]
        m = last_json(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)
        ours.append(m["tokens_per_s"])
        rss.append(m["peak_rss_mb"])
        mfu.append(m["mfu"])
        line = (f"run {i + 1} (load {loads[-1]:.2f}): moetrain {m['tokens_per_s']:.0f} tok/s "
                f"(MFU {100 * m['mfu']:.1f}%)")
        if not a.no_torch:
            loads.append(os.getloadavg()[0])
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
           "moetrain_mfu": statistics.median(mfu), "moetrain_peak_rss_mb": statistics.median(rss),
           "moetrain_runs": ours, "load_min": min(loads), "load_max": max(loads)}
    if a.generate:
        res["bound_tokens_per_s"] = m["bandwidth_bound_tokens_per_s"]
        res["bound_fraction"] = res["moetrain_tokens_per_s"] / m["bandwidth_bound_tokens_per_s"]
    if torch_runs:
        res["pytorch_tokens_per_s"] = statistics.median(torch_runs)
        res["pytorch_runs"] = torch_runs
        res["ratio"] = res["moetrain_tokens_per_s"] / res["pytorch_tokens_per_s"]
    print(json.dumps(res))
    os.unlink(conf)


if __name__ == "__main__":
    main()
