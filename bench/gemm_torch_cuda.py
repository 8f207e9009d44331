"""What PyTorch's bf16 GEMMs reach on a GPU at gpt2-124m's training shapes, for comparison with
the `gemm` / `gemm_epilogue` rows of `moetrain bench --profile` (docs/BENCHMARKS.md).

For each product of a gpt2 layer at B x T tokens (qkv, attention out, fc, fc2; forward, input
gradient and weight gradient) it times torch.mm on bf16 operands with a bf16 output (what
PyTorch's autocast training runs) and, where this torch has it, with an fp32 output
(`out_dtype=torch.float32`, what moetrain's products write: its activations are fp32), and the
latter again from fp32 activation operands rounded to bf16 first, as moetrain's products do
(the activation of the forward, dy of the input gradient, dy and x of the weight gradient:
"convert_fp32_out"), and prints one JSON line: per-shape milliseconds and TFLOP/s, and the
totals for one layer.

    python3 bench/gemm_torch_cuda.py --tokens 16384 --d-model 768 --d-ff 3072
"""

import argparse
import json
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=16384)
    ap.add_argument("--d-model", type=int, default=768)
    ap.add_argument("--d-ff", type=int, default=3072)
    ap.add_argument("--iters", type=int, default=20)
    args = ap.parse_args()
    try:
        import torch
    except ImportError as e:
        print(json.dumps({"unavailable": f"no torch: {e}"}))
        return 3
    if not torch.cuda.is_available():
        print(json.dumps({"unavailable": "no CUDA device"}))
        return 3
    n, d, f = args.tokens, args.d_model, args.d_ff
    # (name, M, K, N): y [M, N] = x [M, K] @ W [K, N]; the input gradient is [M, N] @ [N, K],
    # the weight gradient [K, M] @ [M, N].
    products = [("qkv", n, d, 3 * d), ("attn_out", n, d, d), ("fc", n, d, f), ("fc2", n, f, d)]

    def time_mm(a, b, out_dtype, a32=None, b32=None):
        def run():
            # a32 / b32: fp32 copies rounded to bf16 inside the timed call (moetrain's operands)
            x = a32.to(torch.bfloat16) if a32 is not None else a
            y = b32.to(torch.bfloat16) if b32 is not None else b
            if out_dtype is None:
                return torch.mm(x, y)
            return torch.mm(x, y, out_dtype=out_dtype)

        run()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        times = []
        for _ in range(args.iters):
            start.record()
            run()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        times.sort()
        return times[len(times) // 2]

    fp32_out = True
    try:
        x = torch.randn(64, 64, device="cuda", dtype=torch.bfloat16)
        torch.mm(x, x, out_dtype=torch.float32)
    except Exception:  # this torch has no out_dtype for mm
        fp32_out = False
    rows = []
    totals = {"bf16_out_ms": 0.0, "fp32_out_ms": 0.0, "convert_fp32_out_ms": 0.0, "gflop": 0.0}
    for name, m, k, nn in products:
        for kind, (mm, kk, nnn) in (("fwd", (m, k, nn)), ("dgrad", (m, nn, k)), ("wgrad", (k, m, nn))):
            a = torch.randn(mm, kk, device="cuda", dtype=torch.bfloat16)
            b = torch.randn(kk, nnn, device="cuda", dtype=torch.bfloat16)
            gflop = 2.0 * mm * kk * nnn / 1e9
            row = {"product": f"{name}.{kind}", "m": mm, "k": kk, "n": nnn}
            ms = time_mm(a, b, None)
            row["bf16_out_ms"] = round(ms, 4)
            row["bf16_out_tflops"] = round(gflop / ms, 1)
            totals["bf16_out_ms"] += ms
            if fp32_out:
                ms32 = time_mm(a, b, torch.float32)
                row["fp32_out_ms"] = round(ms32, 4)
                row["fp32_out_tflops"] = round(gflop / ms32, 1)
                totals["fp32_out_ms"] += ms32
                # moetrain's f32 operands: fwd A (x); dgrad A (dy); wgrad A (dy^T) and B (x)
                a32 = a.float()
                b32 = b.float() if kind == "wgrad" else None
                msc = time_mm(a, b, torch.float32, a32=a32, b32=b32)
                row["convert_fp32_out_ms"] = round(msc, 4)
                row["convert_fp32_out_tflops"] = round(gflop / msc, 1)
                totals["convert_fp32_out_ms"] += msc
            totals["gflop"] += gflop
            rows.append(row)
    layer = {
        "bf16_out_ms": round(totals["bf16_out_ms"], 3),
        "bf16_out_tflops": round(totals["gflop"] / totals["bf16_out_ms"], 1),
    }
    if fp32_out:
        for key in ("fp32_out", "convert_fp32_out"):
            layer[key + "_ms"] = round(totals[key + "_ms"], 3)
            layer[key + "_tflops"] = round(totals["gflop"] / totals[key + "_ms"], 1)
    print(json.dumps({"layer": layer, "products": rows, "tokens": n, "d_model": d, "d_ff": f,
                      "torch": torch.__version__, "device": torch.cuda.get_device_name()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
