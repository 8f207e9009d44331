#!/usr/bin/env python3
"""The routing machinery's share of an MoE training step under each routing option
(docs/MODEL_NOTES.md, "Speed"):

    python3 bench/routing_share.py --moetrain build/moetrain [--steps 5] [--device cpu]

The model is the moe-mini preset's shape (214.5M parameters, 16 experts, top-4, 8 layers) with
the router set four ways: softmax top-k + aux loss, the same with capacity 1.25, sigmoid top-k
with the expert-bias update and no aux loss, and that with capacity 1.25. Each runs
`moetrain bench --profile` (B 8, T 256) and the shares of the routing ops are summed: router
forward / backward / aux loss, capacity admission, the sort, the row gather, the combine and
its backward, the count accumulator and the bias update.
"""
import argparse
import json
import re
import subprocess
import tempfile
from pathlib import Path

ROUTING_OPS = {"router_fwd", "router_bwd", "router_aux_loss", "moe_capacity", "moe_sort",
               "gather_rows", "moe_combine", "moe_combine_bwd", "add_counts",
               "expert_bias_update"}
BASE = {"vocab_size": 8192, "d_model": 512, "n_layers": 8, "n_heads": 8, "n_kv_heads": 1,
        "d_ff": 1024, "max_seq_len": 1024, "moe": {"n_experts": 16, "top_k": 4}}
VARIANTS = {
    "softmax + aux": {"router": "softmax_topk", "aux_loss_alpha": 0.01},
    "softmax + aux, c 1.25": {"router": "softmax_topk", "aux_loss_alpha": 0.01,
                              "capacity_factor": 1.25},
    "sigmoid + bias": {"router": "sigmoid_topk", "aux_loss_alpha": 0.0,
                       "bias_update_rate": 0.001},
    "sigmoid + bias, c 1.25": {"router": "sigmoid_topk", "aux_loss_alpha": 0.0,
                               "bias_update_rate": 0.001, "capacity_factor": 1.25},
}


def profile(moetrain, config, a):
    out = subprocess.run([moetrain, "bench", "--config", config, "--device", a.device,
                          "--batch", "8", "--seq", "256", "--steps", str(a.steps),
                          "--warmup", "2", "--profile"], check=True, capture_output=True,
                         text=True).stdout
    parts, median = {}, None
    for line in out.splitlines():
        f = line.split()
        if len(f) >= 4 and f[0] in ROUTING_OPS and f[1].endswith("%"):
            parts[f[0]] = float(f[1][:-1])
        m = re.match(r"median ([0-9.]+) ms/step", line)
        if m:
            median = float(m.group(1))
    return parts, median


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--moetrain", default="build/moetrain")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--steps", type=int, default=5)
    a = ap.parse_args()
    print("| routing | step ms (median) | routing share | largest parts |")
    print("|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for name, moe in VARIANTS.items():
            cfg = json.loads(json.dumps(BASE))
            cfg["moe"].update(moe)
            path = Path(tmp) / "config.json"
            path.write_text(json.dumps(cfg))
            parts, median = profile(a.moetrain, str(path), a)
            top = sorted(parts.items(), key=lambda kv: -kv[1])[:4]
            print(f"| {name} | {median:.0f} | {sum(parts.values()):.1f}% | "
                  + ", ".join(f"{k} {v:.1f}%" for k, v in top) + " |")


if __name__ == "__main__":
    main()
