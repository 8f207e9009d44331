#!/usr/bin/python3
"""The MODEL.md transformer written the way a PyTorch user would (nn.Module, torch.optim.AdamW,
a Python loop over an nn.ModuleList of experts for MoE), for side-by-side timing with
`moetrain bench`.

    /usr/bin/python3 bench/compare_pytorch.py --config <(moetrain config --preset moe-mini) \
        --batch 8 --seq 256 --steps 5 --threads 2

Prints one JSON line {"tokens_per_s", "ms_per_step", "loss"} (median step time).
With --checkpoint DIR --data FILE it instead loads a moetrain checkpoint (model.safetensors)
and prints the loss of the first training batch (an independent check of our forward pass).
Uses Debian's python3-torch (apt-get install python3-torch), hence /usr/bin/python3.
"""
import argparse
import json
import math
import struct
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Norm(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.kind, self.eps = c["norm"], c["norm_eps"]
        self.weight = nn.Parameter(torch.ones(c["d_model"]))
        self.bias = nn.Parameter(torch.zeros(c["d_model"])) if (
            c["norm"] == "layernorm" and c["bias"]) else None

    def forward(self, x):
        if self.kind == "rmsnorm":
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight
        return F.layer_norm(x, x.shape[-1:], self.weight, self.bias, self.eps)


def rope(x, theta):
    # x: [B, T, nh, h], half-split convention
    B, T, nh, h = x.shape
    inv = theta ** (-torch.arange(0, h // 2, dtype=torch.float32, device=x.device) * 2 / h)
    ang = torch.arange(T, dtype=torch.float32, device=x.device)[:, None] * inv[None, :]
    c, s = ang.cos()[None, :, None, :], ang.sin()[None, :, None, :]
    x1, x2 = x[..., : h // 2], x[..., h // 2:]
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1)


class Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        D, H, K, h = c["d_model"], c["n_heads"], c["n_kv_heads"], c["head_dim"]
        self.H, self.K, self.h, self.c = H, K, h, c
        self.wq = nn.Linear(D, H * h, bias=c["bias"])
        self.wk = nn.Linear(D, K * h, bias=c["bias"])
        self.wv = nn.Linear(D, K * h, bias=c["bias"])
        self.wo = nn.Linear(H * h, D, bias=c["bias"])
        a = c["rope_ntk_alpha"]
        self.theta = c["rope_theta"] * a ** (h / (h - 2)) if c["pos"] == "rope" else None

    def forward(self, x):
        B, T, _ = x.shape
        q = self.wq(x).view(B, T, self.H, self.h)
        k = self.wk(x).view(B, T, self.K, self.h)
        v = self.wv(x).view(B, T, self.K, self.h)
        if self.theta is not None:
            q, k = rope(q, self.theta), rope(k, self.theta)
        rep = self.H // self.K
        k = k.repeat_interleave(rep, dim=2)
        v = v.repeat_interleave(rep, dim=2)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # [B, H, T, h]
        s = q @ k.transpose(-1, -2) / math.sqrt(self.h)
        mask = torch.ones(T, T, dtype=torch.bool).triu(1)
        p = s.masked_fill(mask, float("-inf")).softmax(-1)
        o = (p @ v).transpose(1, 2).reshape(B, T, self.H * self.h)
        return self.wo(o)


def act(kind, g, u):
    if kind == "swiglu":
        return F.silu(g) * u
    if kind == "gelu":
        return F.gelu(u, approximate="tanh")
    return F.relu(u)


class FFN(nn.Module):
    def __init__(self, c, width, bias):
        super().__init__()
        D = c["d_model"]
        self.kind = c["ffn"]
        self.w_gate = nn.Linear(D, width, bias=bias) if self.kind == "swiglu" else None
        self.w_up = nn.Linear(D, width, bias=bias)
        self.w_down = nn.Linear(width, D, bias=bias)

    def forward(self, x):
        g = self.w_gate(x) if self.w_gate is not None else None
        return self.w_down(act(self.kind, g, self.w_up(x)))


class MoE(nn.Module):
    """Experts as an nn.ModuleList of bias-free FFNs, looped over in Python (the Hugging Face
    Mixtral layout). Indexing one stacked [E, F, D] Parameter per expert instead makes every
    expert's backward materialise a zero gradient of the whole stack (~10x slower steps)."""

    def __init__(self, c, layer):
        super().__init__()
        m = c["moe"]
        D, E, Fd = c["d_model"], m["n_experts"], c["d_ff"]
        self.m, self.E, self.layer, self.kind = m, E, layer, c["ffn"]
        self.router = nn.Linear(D, E, bias=False) if m["router"] == "softmax_topk" else None
        self.build_experts(c)
        S = m["n_shared_experts"]
        self.shared = FFN(c, S * Fd, False) if S > 0 else None

    def build_experts(self, c):
        self.experts = nn.ModuleList(FFN(c, c["d_ff"], False) for _ in range(self.E))

    def route(self, xf, ids):
        """The chosen experts idx [N, k], their weights w [N, k], the aux and z losses."""
        N = xf.shape[0]
        aux = z = xf.new_zeros(())
        if self.router is not None:
            r = self.router(xf)
            p = r.softmax(-1)
            k = self.m["top_k"]
            w, idx = p.topk(k, dim=-1)  # ties: torch picks the lower index on CPU
            if self.m["norm_topk_prob"]:
                w = w / w.sum(-1, keepdim=True)
            f = torch.bincount(idx.reshape(-1), minlength=self.E).float() / (N * k)
            aux = self.m["aux_loss_alpha"] * self.E * (f.detach() * p.mean(0)).sum()
            z = self.m["z_loss_alpha"] * torch.logsumexp(r, -1).pow(2).mean()
        else:
            k = 1
            zz = (ids.reshape(-1).to(torch.int64) + 0x9E3779B9 * (self.layer + 1)) & 0xFFFFFFFF
            zz ^= zz >> 16
            zz = (zz * 0x85EBCA6B) & 0xFFFFFFFF
            zz ^= zz >> 13
            zz = (zz * 0xC2B2AE35) & 0xFFFFFFFF
            zz ^= zz >> 16
            idx = (zz % self.E).view(N, 1)
            w = xf.new_ones(N, 1)
        return idx, w, aux, z

    def run_experts(self, xf, idx, w):
        y = torch.zeros_like(xf)
        for e, expert in enumerate(self.experts):  # the usual Python loop over experts
            tok, slot = (idx == e).nonzero(as_tuple=True)
            if tok.numel() == 0:
                continue
            y.index_add_(0, tok, expert(xf[tok]) * w[tok, slot, None])
        return y

    def forward(self, x, ids):
        B, T, D = x.shape
        xf = x.reshape(-1, D)
        idx, w, aux, z = self.route(xf, ids)
        y = self.run_experts(xf, idx, w)
        if self.shared is not None:
            y = y + self.shared(xf)
        return y.view(B, T, D), aux, z


class Block(nn.Module):
    attention_class, moe_class = Attention, MoE  # bench/pytorch_peer_cuda.py swaps these

    def __init__(self, c, layer):
        super().__init__()
        self.attn_norm, self.ffn_norm = Norm(c), Norm(c)
        self.attn = self.attention_class(c)
        m = c.get("moe")
        self.is_moe = m is not None and layer >= m["first_layer"]
        self.ffn = self.moe_class(c, layer) if self.is_moe else FFN(c, c["d_ff"], c["bias"])

    def forward(self, x, ids):
        x = x + self.attn(self.attn_norm(x))
        if self.is_moe:
            y, aux, z = self.ffn(self.ffn_norm(x), ids)
            return x + y, aux, z
        zero = x.new_zeros(())
        return x + self.ffn(self.ffn_norm(x)), zero, zero


class Transformer(nn.Module):
    block_class = Block

    def __init__(self, c):
        super().__init__()
        self.c = c
        self.tok_emb = nn.Embedding(c["vocab_size"], c["d_model"])
        self.pos_emb = nn.Embedding(c["max_seq_len"], c["d_model"]) if c["pos"] == "learned" else None
        self.layers = nn.ModuleList(self.block_class(c, l) for l in range(c["n_layers"]))
        self.norm_f = Norm(c)
        self.lm_head = None if c["tie_embeddings"] else nn.Linear(c["d_model"], c["vocab_size"], bias=False)
        for mod in self.modules():
            if isinstance(mod, (nn.Linear, nn.Embedding)):
                nn.init.normal_(mod.weight, std=0.02)

    def forward(self, idx, targets):
        B, T = idx.shape
        x = self.tok_emb(idx)
        if self.pos_emb is not None:
            x = x + self.pos_emb.weight[:T]
        aux = z = x.new_zeros(())
        for blk in self.layers:
            x, a, zz = blk(x, idx)
            aux, z = aux + a, z + zz
        x = self.norm_f(x)
        W = self.tok_emb.weight if self.lm_head is None else self.lm_head.weight
        logits = x @ W.t()
        ce = F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1), ignore_index=-1)
        return ce + aux + z, ce, aux, z


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    meta = header.pop("__metadata__", {})
    out = {}
    for name, t in header.items():
        a, b = t["data_offsets"]
        assert t["dtype"] == "F32", (name, t["dtype"])
        out[name] = torch.frombuffer(bytearray(data[a:b]), dtype=torch.float32).view(t["shape"])
    return out, meta


def load_checkpoint(model, tensors):
    """Maps MODEL.md section 6 names onto this module's parameters; the stacked expert
    tensors [E, ...] are split over the experts' ModuleList."""
    own = dict(model.named_parameters())
    loaded = 0
    for name, t in tensors.items():
        key = name.replace(".moe.router.", ".ffn.router.").replace(".moe.shared.", ".ffn.shared.")
        if ".moe.experts." in key:  # layers.{l}.moe.experts.w_up [E, F, D] -> experts.{e}.w_up
            prefix, proj = key.split(".moe.experts.")
            parts = [(f"{prefix}.ffn.experts.{e}.{proj}.weight", t[e]) for e in range(t.shape[0])]
        else:
            parts = [(key, t)]
        for k, v in parts:
            assert k in own, f"no parameter for {name} ({k})"
            with torch.no_grad():
                own[k].copy_(v.reshape(own[k].shape))
        loaded += 1
    return loaded


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True, help="JSON from `moetrain config --preset NAME`")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--checkpoint", help="moetrain checkpoint dir: print its loss instead")
    ap.add_argument("--data", help="text file for --checkpoint (first train batch)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    with open(a.config) as f:
        c = json.load(f)
    model = Transformer(c)
    if a.checkpoint:
        tensors, meta = read_safetensors(a.checkpoint + "/model.safetensors")
        load_checkpoint(model, tensors)
        with open(a.data, "rb") as f:
            raw = f.read()
        toks = torch.tensor(list(raw[: a.batch * a.seq + 1]), dtype=torch.int64)
        x, y = toks[:-1].view(a.batch, a.seq), toks[1:].view(a.batch, a.seq)
        with torch.no_grad():
            loss, ce, aux, z = model(x, y)
        print(json.dumps({"loss": loss.item(), "ce": ce.item(), "aux": aux.item(), "z": z.item()}))
        return
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95), weight_decay=0.1)
    g = torch.Generator().manual_seed(1)
    x = torch.randint(0, c["vocab_size"], (a.batch, a.seq), generator=g)
    y = torch.randint(0, c["vocab_size"], (a.batch, a.seq), generator=g)
    times = []
    for i in range(a.warmup + a.steps):
        t0 = time.perf_counter()
        loss, *_ = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        dt = time.perf_counter() - t0
        if i >= a.warmup:
            times.append(dt)
    times.sort()
    med = times[len(times) // 2] if len(times) % 2 else 0.5 * (
        times[len(times) // 2 - 1] + times[len(times) // 2])
    print(json.dumps({"tokens_per_s": a.batch * a.seq / med, "ms_per_step": med * 1000,
                      "loss": loss.item(), "torch": torch.__version__, "threads": a.threads}))


if __name__ == "__main__":
    main()
