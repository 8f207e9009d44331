#!/usr/bin/env python3
"""Step-time model of moetrain's data parallelism (docs/DISTRIBUTED.md), 8 to 1024 GPUs.

Weak scaling: every GPU keeps its micro-batch (B x T tokens, A micro-batches per step).
  t_compute = 6 * N_active * B*T*A / (peak * mfu)          forward + backward
  t_grads   = 2 (R-1)/R * 4 N_total / bw(R) + 2 (R-1) * lat  ring all-reduce of fp32 gradients
            (ZeRO-1: reduce-scatter + all-gather, the same bytes and steps)
  t_small   = A * L_moe * log2(R) * lat                       expert-count all-reduces
  bw(R)     = NVLink bus bandwidth inside one 8-GPU node, else the per-GPU InfiniBand rate
  t_step    = t_compute + t_grads + t_small   (moetrain today: no overlap with the backward)
  t_overlap = t_compute + max(0, t_grads - 2/3 t_compute) + t_small   (if the all-reduce of
              each bucket overlapped the rest of the backward, as PyTorch DDP / Megatron do)
Prints a markdown table. Numbers are a model, not measurements.
"""
import math

PEAK = 989e12        # H100 SXM dense bf16 FLOP/s
MFU = 0.40           # compute efficiency assumed for the products
NVLINK_BUS = 360e9   # achievable all-reduce bus bandwidth inside a node (NVLink 4 + NVSwitch)
IB_BUS = 45e9        # per GPU across nodes (one 400 Gb/s NDR port per GPU, ~90% of line rate)
LAT_NVL, LAT_IB = 5e-6, 10e-6

MODELS = {  # name: (total params, active matmul params per token, MoE layers)
    "seed-moe (6.9B total, 1.76B active)": (6.88e9, 1.76e9, 30),
    "gpt2-124m (dense)": (124e6, 124e6, 0),
}


def step(total, active, moe_layers, gpus, tokens_per_gpu, accum):
    compute = 6 * active * tokens_per_gpu * accum / (PEAK * MFU)
    bw, lat = (NVLINK_BUS, LAT_NVL) if gpus <= 8 else (IB_BUS, LAT_IB)
    grads = 2 * (gpus - 1) / gpus * 4 * total / bw + 2 * (gpus - 1) * lat
    small = accum * moe_layers * math.log2(gpus) * lat
    plain = compute + grads + small
    overlap = compute + max(0.0, grads - 2 / 3 * compute) + small
    return compute, grads, plain, overlap


def main():
    for name, (total, active, moe_layers) in MODELS.items():
        for tokens, accum in ((4 * 2048, 1), (4 * 2048, 8)):
            print(f"\n{name}, {tokens} tokens x {accum} micro-batches per GPU per step\n")
            print("| GPUs | compute s | grad all-reduce s | step s (no overlap) | efficiency |"
                  " step s (overlap) | efficiency |")
            print("|---|---|---|---|---|---|---|")
            for gpus in (8, 16, 32, 64, 128, 256, 512, 1024):
                c, g, p, o = step(total, active, moe_layers, gpus, tokens, accum)
                print(f"| {gpus} | {c:.3f} | {g:.3f} | {p:.3f} | {c / p:.0%} | {o:.3f} |"
                      f" {c / o:.0%} |")


if __name__ == "__main__":
    main()
