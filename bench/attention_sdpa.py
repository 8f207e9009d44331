#!/usr/bin/env python3
"""Causal attention forward + backward through PyTorch's SDPA at one shape, the figure
moetrain's attention_fwd + attention_bwd per layer (`moetrain bench --profile`) is compared
with on a GPU (tools/gpu-check-prebuilt.sh).

    python3 bench/attention_sdpa.py --batch 16 --heads 12 --kv-heads 12 --seq 1024 --head-dim 64

Prints one JSON line: median ms of one forward + backward over --iters, the TFLOP/s that makes
(causal: half of 4 * B * H * T^2 * hd forward, 2.5x that backward), the SDPA backend torch
picked is torch's own choice. {"unavailable": reason} and exit status 3 without CUDA or SDPA.
"""
import argparse
import json
import sys
import time

import torch
import torch.nn.functional as F


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--kv-heads", type=int, default=12)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--head-dim", type=int, default=64)
    ap.add_argument("--dtype", choices=["bf16", "fp16"], default="bf16")
    ap.add_argument("--iters", type=int, default=20)
    a = ap.parse_args()
    if not hasattr(F, "scaled_dot_product_attention") or not torch.cuda.is_available():
        print(json.dumps({"unavailable": f"needs CUDA and SDPA (torch {torch.__version__})"}))
        sys.exit(3)
    dt = torch.bfloat16 if a.dtype == "bf16" else torch.float16
    B, H, K, T, hd = a.batch, a.heads, a.kv_heads, a.seq, a.head_dim
    q = torch.randn(B, H, T, hd, device="cuda", dtype=dt, requires_grad=True)
    k = torch.randn(B, K, T, hd, device="cuda", dtype=dt, requires_grad=True)
    v = torch.randn(B, K, T, hd, device="cuda", dtype=dt, requires_grad=True)
    do = torch.randn(B, H, T, hd, device="cuda", dtype=dt)
    gqa = {"enable_gqa": True} if K != H else {}
    times = []
    for i in range(a.iters + 3):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True, **gqa)
        o.backward(do)
        torch.cuda.synchronize()
        if i >= 3:
            times.append(time.perf_counter() - t0)
    times.sort()
    ms = times[len(times) // 2] * 1000
    flops = 3.5 * 4 * B * H * T * T * hd / 2
    print(json.dumps({"ms_fwd_bwd": ms, "tflops": flops / (ms / 1000) / 1e12,
                      "shape": f"B{B} H{H} K{K} T{T} hd{hd} {a.dtype}",
                      "torch": torch.__version__, "device": torch.cuda.get_device_name()}))


if __name__ == "__main__":
    main()
