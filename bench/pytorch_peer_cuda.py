#!/usr/bin/env python3
"""The PyTorch peer `moetrain bench` is measured against on a GPU: the MODEL.md transformer of
bench/compare_pytorch.py (the same modules, read from moetrain's config JSON) the way a PyTorch
user would train it fast:

  - attention through F.scaled_dot_product_attention (causal; GQA / MQA by repeating K and V);
  - torch.optim.AdamW(fused=True), gradient clipping at 1.0 (as moetrain's default);
  - --precision bf16: bf16 autocast; fp32: TF32 off (moetrain's fp32 products are true fp32);
  - --mode eager | compile (torch.compile of the whole model);
  - MoE experts as stacked [E, D, F] weights run by torch._grouped_mm on the tokens sorted by
    expert (offsets: int32 cumulative row ends), or --experts loop: the same sorted groups
    multiplied one matmul per expert (what runs where _grouped_mm does not: a CPU, fp32, an
    old torch).

    moetrain config --preset gpt2-124m > gpt2.json
    python3 bench/pytorch_peer_cuda.py --config gpt2.json --batch 16 --seq 1024 \
        --precision bf16 --mode compile

Prints one JSON line: median tokens/s and ms per step over --steps timed steps, the loss, and
what ran (torch version, device, attention, experts, mode). When the asked-for form cannot run
here (no CUDA, no torch.compile, no _grouped_mm, no SDPA) it prints {"unavailable": reason}
and exits with status 3, so a check script can say why a peer is missing.
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare_pytorch as ref  # noqa: E402  (the shared model definition)

HAS_SDPA = hasattr(F, "scaled_dot_product_attention")
HAS_GROUPED_MM = hasattr(torch, "_grouped_mm")
TORCH_MAJOR = int(torch.__version__.split(".")[0])


class Unavailable(Exception):
    pass


class SdpaAttention(ref.Attention):
    """ref.Attention's weights; the product through SDPA (or the reference's math without it)."""

    def forward(self, x):
        if not HAS_SDPA:
            return super().forward(x)
        B, T, _ = x.shape
        q = self.wq(x).view(B, T, self.H, self.h)
        k = self.wk(x).view(B, T, self.K, self.h)
        v = self.wv(x).view(B, T, self.K, self.h)
        if self.theta is not None:
            q, k = ref.rope(q, self.theta), ref.rope(k, self.theta)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # [B, heads, T, h]
        if self.K != self.H:
            k = k.repeat_interleave(self.H // self.K, dim=1)
            v = v.repeat_interleave(self.H // self.K, dim=1)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.wo(o.transpose(1, 2).reshape(B, T, self.H * self.h))


class GroupedMoE(ref.MoE):
    """ref.MoE's router; the experts as stacked weights over the tokens sorted by expert."""

    use_grouped_mm = True  # set by main()

    def build_experts(self, c):
        D, Fd, E = c["d_model"], c["d_ff"], self.E

        def stack(rows, cols):
            return nn.Parameter(torch.empty(E, rows, cols).normal_(std=0.02))

        self.w_gate = stack(D, Fd) if self.kind == "swiglu" else None
        self.w_up, self.w_down = stack(D, Fd), stack(Fd, D)

    def gmm(self, a, w, offs, ends):
        """a [rows, K] sorted by group, w [G, K, N] -> [rows, N]; group g is rows
        [offs[g-1], offs[g])."""
        if self.use_grouped_mm:
            dt = torch.bfloat16
            return torch._grouped_mm(a.to(dt), w.to(dt), offs=offs).to(a.dtype)
        out, start = [], 0
        for g, end in enumerate(ends):
            out.append(a[start:end] @ w[g].to(a.dtype))
            start = end
        return torch.cat(out)

    def run_experts(self, xf, idx, w):
        k = idx.shape[1]
        flat = idx.reshape(-1)
        order = torch.sort(flat, stable=True).indices  # selections grouped by expert
        tok = order // k
        counts = torch.bincount(flat, minlength=self.E)
        offs = torch.cumsum(counts, 0).to(torch.int32)
        ends = None if self.use_grouped_mm else offs.tolist()
        xs = xf[tok]
        up = self.gmm(xs, self.w_up, offs, ends)
        gate = self.gmm(xs, self.w_gate, offs, ends) if self.w_gate is not None else None
        out = self.gmm(ref.act(self.kind, gate, up), self.w_down, offs, ends)
        out = out * w.reshape(-1)[order, None].to(out.dtype)
        return torch.zeros_like(xf).index_add_(0, tok, out.to(xf.dtype))


class PeerBlock(ref.Block):
    attention_class, moe_class = SdpaAttention, GroupedMoE


class PeerTransformer(ref.Transformer):
    block_class = PeerBlock


def choose(a, c):
    """The forms that run here for these arguments, or Unavailable naming the first missing."""
    dev = torch.device(a.device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise Unavailable(f"no CUDA device for torch {torch.__version__}")
    if a.mode == "compile" and (TORCH_MAJOR < 2 or not hasattr(torch, "compile")):
        raise Unavailable(f"torch.compile needs torch 2 (this is {torch.__version__})")
    if a.attention == "sdpa" and not HAS_SDPA:
        raise Unavailable(f"F.scaled_dot_product_attention needs torch 2 (this is "
                          f"{torch.__version__}); --attention math runs the reference's")
    experts = None
    if c.get("moe"):
        experts = a.experts
        if experts == "auto":
            grouped_ok = (HAS_GROUPED_MM and dev.type == "cuda" and a.precision == "bf16"
                          and torch.cuda.get_device_capability(dev)[0] >= 9)
            experts = "grouped_mm" if grouped_ok else "loop"
        if experts == "grouped_mm" and not HAS_GROUPED_MM:
            raise Unavailable(f"torch._grouped_mm is missing in torch {torch.__version__} "
                              f"(torch 2.9+ has it); --experts loop runs without it")
    return dev, experts


def median(v):
    v = sorted(v)
    n = len(v)
    return v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", required=True, help="JSON from `moetrain config --preset NAME`")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="bf16")
    ap.add_argument("--mode", choices=["eager", "compile"], default="eager")
    ap.add_argument("--attention", choices=["sdpa", "math"], default="sdpa")
    ap.add_argument("--experts", choices=["auto", "grouped_mm", "loop"], default="auto")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    with open(a.config) as f:
        c = json.load(f)
    try:
        dev, experts = choose(a, c)
    except Unavailable as e:
        print(json.dumps({"unavailable": str(e), "torch": torch.__version__}))
        sys.exit(3)
    global HAS_SDPA
    HAS_SDPA = HAS_SDPA and a.attention == "sdpa"
    GroupedMoE.use_grouped_mm = experts == "grouped_mm"
    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 means fp32 products, as in moetrain
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(a.seed)
    model = PeerTransformer(c).to(dev)
    fused = {"fused": True} if dev.type == "cuda" else {}
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95), weight_decay=0.1,
                            **fused)
    step_model = torch.compile(model) if a.mode == "compile" else model
    g = torch.Generator().manual_seed(1)
    x = torch.randint(0, c["vocab_size"], (a.batch, a.seq), generator=g).to(dev)
    y = torch.randint(0, c["vocab_size"], (a.batch, a.seq), generator=g).to(dev)
    bf16 = a.precision == "bf16"

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize()

    times = []
    for i in range(a.warmup + a.steps):
        sync()
        t0 = time.perf_counter()
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=bf16):
            loss, *_ = step_model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sync()
        if i >= a.warmup:
            times.append(time.perf_counter() - t0)
    med = median(times)
    print(json.dumps({
        "tokens_per_s": a.batch * a.seq / med, "ms_per_step": med * 1000, "loss": loss.item(),
        "precision": a.precision, "mode": a.mode,
        "attention": "sdpa" if HAS_SDPA else "math", "experts": experts,
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name(dev) if dev.type == "cuda" else a.device}))


if __name__ == "__main__":
    main()
