#!/usr/bin/env python3
"""Independent reader for moetrain checkpoints (stdlib only: json, struct, array).

Written from the safetensors format description and MODEL.md section 6, sharing no code with
the C++ reader. For each checkpoint directory it checks:
  * both .safetensors files byte by byte: little-endian u64 header length, JSON header
    (no duplicate keys) padded with spaces to a multiple of 8, entries with exactly
    dtype/shape/data_offsets, sizes matching dtype x shape, data tiling the rest of the file;
  * model.safetensors: metadata format "moetrain-1" and a config JSON from which the
    expected parameter names and shapes are derived here, independently, per MODEL.md 6;
    all tensors F32 and exactly those names/shapes;
  * optimizer.safetensors: present exactly when state.json says adamw_moments (m.<name> and
    v.<name> for every parameter, v >= 0) or adamw8bit_moments (U8 codes and F32 block absmax
    >= 0 of the "decay" range, the rank >= 2 tensors first in the flat layout, and of the
    "no_decay" range; the metadata layout names every parameter once with its size);
  * state.json: every field with its type;
  * with expected.json (written by the C++ fixture): step and per-tensor sums of the values.

Usage: safetensors_reader.py DIR   (a checkpoint directory, or a directory of them;
       temporaries *.tmp-<pid> / *.old-<pid> are skipped)
"""
import array
import json
import math
import os
import re
import struct
import sys

DTYPE_SIZE = {"F32": 4, "F16": 2, "BF16": 2, "I32": 4, "U8": 1}
CONFIG_KEYS = ["vocab_size", "d_model", "n_layers", "n_heads", "n_kv_heads", "head_dim",
               "max_seq_len", "norm", "norm_eps", "pos", "rope_theta", "rope_ntk_alpha", "ffn",
               "d_ff", "bias", "tie_embeddings", "moe"]
MOE_KEYS = ["n_experts", "top_k", "router", "norm_topk_prob", "n_shared_experts",
            "aux_loss_alpha", "z_loss_alpha", "first_layer", "routed_scaling",
            "bias_update_rate", "capacity_factor"]


class CheckError(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise CheckError(msg)


def no_duplicates(pairs):
    keys = [k for k, _ in pairs]
    check(len(keys) == len(set(keys)), f"duplicate key in JSON object: {keys}")
    return dict(pairs)


def read_safetensors(path):
    """Returns (metadata, {name: (dtype, shape, bytes)}, names in header order)."""
    with open(path, "rb") as f:
        raw = f.read()
    check(len(raw) >= 8, f"{path}: file shorter than 8 bytes")
    (n,) = struct.unpack("<Q", raw[:8])
    check(8 + n <= len(raw), f"{path}: header length {n} beyond the file")
    check(n % 8 == 0, f"{path}: header length {n} is not a multiple of 8")
    header_bytes = raw[8:8 + n]
    text = header_bytes.decode("utf-8")
    check(text.startswith("{"), f"{path}: header does not start with '{{'")
    body = text.rstrip(" ")
    check(len(text) - len(body) < 8, f"{path}: more than 7 bytes of padding")
    header = json.loads(body, object_pairs_hook=no_duplicates)
    metadata = header.pop("__metadata__", {})
    check(all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()),
          f"{path}: metadata must map strings to strings")
    data = raw[8 + n:]
    tensors, order, expected_begin = {}, [], 0
    for name, entry in header.items():
        check(isinstance(entry, dict) and sorted(entry) == ["data_offsets", "dtype", "shape"],
              f"{path}: tensor {name}: bad entry {entry}")
        dtype, shape, (begin, end) = entry["dtype"], entry["shape"], entry["data_offsets"]
        check(dtype in DTYPE_SIZE, f"{path}: tensor {name}: unknown dtype {dtype}")
        check(all(isinstance(d, int) and d >= 0 for d in shape), f"{path}: {name}: bad shape")
        size = DTYPE_SIZE[dtype] * math.prod(shape)
        check(begin == expected_begin, f"{path}: tensor {name}: begins at {begin}, "
              f"expected {expected_begin} (data must be contiguous in header order)")
        check(end - begin == size, f"{path}: tensor {name}: {end - begin} bytes for {shape}")
        expected_begin = end
        tensors[name] = (dtype, shape, data[begin:end])
        order.append(name)
    check(expected_begin == len(data), f"{path}: data section has {len(data)} bytes, "
          f"tensors cover {expected_begin}")
    return metadata, tensors, order


def expected_params(c):
    """MODEL.md 6: {name: shape} for a config dict."""
    V, D, L, H, K, h = (c[k] for k in ["vocab_size", "d_model", "n_layers", "n_heads",
                                       "n_kv_heads", "head_dim"])
    F, bias, swiglu = c["d_ff"], c["bias"], c["ffn"] == "swiglu"
    norm_bias = c["norm"] == "layernorm" and bias
    p = {"tok_emb.weight": [V, D]}
    if c["pos"] == "learned":
        p["pos_emb.weight"] = [c["max_seq_len"], D]

    def norm(name):
        p[name + ".weight"] = [D]
        if norm_bias:
            p[name + ".bias"] = [D]

    def linear(name, out, inp, with_bias):
        p[name + ".weight"] = [out, inp]
        if with_bias:
            p[name + ".bias"] = [out]

    moe = c["moe"]
    for l in range(L):
        pre = f"layers.{l}."
        norm(pre + "attn_norm")
        linear(pre + "attn.wq", H * h, D, bias)
        linear(pre + "attn.wk", K * h, D, bias)
        linear(pre + "attn.wv", K * h, D, bias)
        linear(pre + "attn.wo", D, H * h, bias)
        norm(pre + "ffn_norm")
        if moe is None or l < moe["first_layer"]:
            if swiglu:
                linear(pre + "ffn.w_gate", F, D, bias)
            linear(pre + "ffn.w_up", F, D, bias)
            linear(pre + "ffn.w_down", D, F, bias)
        else:
            E, S = moe["n_experts"], moe["n_shared_experts"]
            if moe["router"] in ("softmax_topk", "sigmoid_topk"):
                p[pre + "moe.router.weight"] = [E, D]
            if swiglu:
                p[pre + "moe.experts.w_gate"] = [E, F, D]
            p[pre + "moe.experts.w_up"] = [E, F, D]
            p[pre + "moe.experts.w_down"] = [E, D, F]
            if S > 0:
                if swiglu:
                    p[pre + "moe.shared.w_gate.weight"] = [S * F, D]
                p[pre + "moe.shared.w_up.weight"] = [S * F, D]
                p[pre + "moe.shared.w_down.weight"] = [D, S * F]
    norm("norm_f")
    if not c["tie_embeddings"]:
        p["lm_head.weight"] = [V, D]
    return p


def expected_buffers(c):
    """MODEL.md 6: the non-trained expert bias of every MoE layer, present exactly when
    moe.bias_update_rate > 0 (in model.safetensors only: no optimizer state)."""
    moe = c["moe"]
    if moe is None or moe["bias_update_rate"] <= 0:
        return {}
    return {f"layers.{l}.moe.router.expert_bias": [moe["n_experts"]]
            for l in range(moe["first_layer"], c["n_layers"])}


def floats(raw):
    a = array.array("f")
    check(a.itemsize == 4, "platform float is not 4 bytes")
    a.frombytes(raw)
    if sys.byteorder != "little":
        a.byteswap()
    return a


def check_state(path):
    with open(path) as f:
        s = json.load(f, object_pairs_hook=no_duplicates)
    ints, nums, strs = int, (int, float), str
    spec = {"format": strs, "step": ints, "optimizer_state": strs, "precision": strs,
            "loss_scale": nums, "loss_scale_clean_steps": ints, "skipped_steps": ints,
            "rng": {"seed": ints, "counter": ints},
            "data": {"tokenizer": strs, "path": strs, "tokens": ints, "train_pos": ints,
                     "eval_pos": ints},
            "train": {"optimizer": strs, "lr": nums, "min_lr": nums, "warmup": ints,
                      "total_steps": ints, "wd": nums, "b1": nums, "b2": nums, "eps": nums,
                      "clip": nums, "accum": ints, "batch": ints, "seq": ints}}

    def walk(obj, sp, where):
        check(isinstance(obj, dict) and sorted(obj) == sorted(sp),
              f"{path}: {where or 'top level'} keys {sorted(obj)} != {sorted(sp)}")
        for k, t in sp.items():
            if isinstance(t, dict):
                walk(obj[k], t, where + k + ".")
            else:
                check(isinstance(obj[k], t) and not isinstance(obj[k], bool),
                      f"{path}: {where + k} has type {type(obj[k]).__name__}")
    # "checksums": CRC32C of the checkpoint's files and of state.json itself (checked by
    # tests/cli/harden_tests.py against an independent CRC32C); here only its form.
    sums = s.pop("checksums", {})
    check(isinstance(sums, dict) and "state.json" in sums and "model.safetensors" in sums and
          set(sums) <= {"state.json", "model.safetensors", "optimizer.safetensors"} and
          all(re.fullmatch(r"crc32c:[0-9a-f]{8}", v or "") for v in sums.values()),
          f"{path}: checksums {sums}")
    walk(s, spec, "")
    check(s["format"] == "moetrain-1", f"{path}: format {s['format']}")
    check(s["optimizer_state"] in ("adamw_moments", "adamw8bit_moments", "sgd_no_moments",
                                   "weights_only"),
          f"{path}: optimizer_state {s['optimizer_state']}")
    check(s["precision"] in ("fp32", "bf16", "fp16"), f"{path}: precision {s['precision']}")
    # fp32 / bf16 runs have no loss scaling (the fixtures are fp32).
    check(s["loss_scale"] == 1.0 or s["precision"] == "fp16", f"{path}: loss_scale {s['loss_scale']}")
    check(s["loss_scale_clean_steps"] >= 0 and s["skipped_steps"] >= 0,
          f"{path}: negative loss-scale counters")
    check(s["step"] >= 0 and s["data"]["train_pos"] >= 0, f"{path}: negative step/position")
    return s


def check_sums(path, tensors, sums):
    for name, (_, _, raw) in tensors.items():
        got = math.fsum(floats(raw))
        want = sums[name]
        check(abs(got - want) <= 1e-6 * (1.0 + abs(want)),
              f"{path}: tensor {name}: values sum to {got}, the writer had {want}")


def check_adamw8bit(d, path, want):
    meta, opt, _ = read_safetensors(path)
    check(meta.get("optimizer") == "adamw8bit" and meta.get("block_size") == "256",
          f"{d}: optimizer metadata {meta}")
    layout = [e.split(":") for e in meta.get("layout", "").split(",")]
    check(sorted(name for name, _, _ in layout) == sorted(want), f"{d}: layout names differ")
    offset, n_decay = 0, 0
    for name, off, numel in layout:
        check(int(off) == offset and int(numel) == math.prod(want[name]),
              f"{d}: layout entry {name}:{off}:{numel} (expected offset {offset})")
        if len(want[name]) >= 2:
            check(offset == n_decay, f"{d}: decayed tensor {name} after a non-decayed one")
            n_decay += int(numel)
        offset += int(numel)
    ranges = {"decay": n_decay, "no_decay": offset - n_decay}
    names = {}
    for r, n in ranges.items():
        if n:
            blocks = (n + 255) // 256
            names.update({f"m_codes.{r}": ("U8", [n]), f"v_codes.{r}": ("U8", [n]),
                          f"m_absmax.{r}": ("F32", [blocks]), f"v_absmax.{r}": ("F32", [blocks])})
    check(sorted(opt) == sorted(names), f"{d}: 8-bit optimizer tensors {sorted(opt)}")
    for name, (dtype, shape, raw) in opt.items():
        check((dtype, shape) == names[name], f"{d}: {name}: {dtype} {shape}")
        if dtype == "F32":
            check(all(math.isfinite(x) and x >= 0.0 for x in floats(raw)),
                  f"{d}: {name} holds a negative or non-finite absmax")


def check_checkpoint(d):
    state = check_state(os.path.join(d, "state.json"))
    meta, model, _ = read_safetensors(os.path.join(d, "model.safetensors"))
    check(meta.get("format") == "moetrain-1", f"{d}: model metadata format {meta.get('format')}")
    config = json.loads(meta["config"], object_pairs_hook=no_duplicates)
    check(list(config) == CONFIG_KEYS, f"{d}: config keys {list(config)}")
    if config["moe"] is not None:
        check(list(config["moe"]) == MOE_KEYS, f"{d}: moe keys {list(config['moe'])}")
    want = expected_params(config)
    in_file = dict(want, **expected_buffers(config))
    check(sorted(model) == sorted(in_file),
          f"{d}: names differ: only in file {sorted(set(model) - set(in_file))}, "
          f"only in MODEL.md {sorted(set(in_file) - set(model))}")
    for name, (dtype, shape, _) in model.items():
        check(dtype == "F32", f"{d}: {name} has dtype {dtype}")
        check(shape == in_file[name],
              f"{d}: {name} has shape {shape}, MODEL.md says {in_file[name]}")

    opt_path = os.path.join(d, "optimizer.safetensors")
    kind = state["optimizer_state"]
    check(os.path.exists(opt_path) == (kind in ("adamw_moments", "adamw8bit_moments")),
          f"{d}: optimizer.safetensors present={os.path.exists(opt_path)}, state says {kind}")
    if kind == "adamw8bit_moments":
        check_adamw8bit(d, opt_path, want)
    opt = {}  # per-parameter tensors (AdamW), whose sums expected.json may list
    if kind == "adamw_moments":
        _, opt, _ = read_safetensors(opt_path)
        names = {f"{m}.{n}": want[n] for n in want for m in ("m", "v")}
        check(sorted(opt) == sorted(names), f"{d}: optimizer tensor names differ")
        for name, (dtype, shape, raw) in opt.items():
            check(dtype == "F32" and shape == names[name], f"{d}: {name}: {dtype} {shape}")
            if name.startswith("v."):
                check(min(floats(raw), default=0.0) >= 0.0, f"{d}: {name} has negative values")

    expected_path = os.path.join(d, "expected.json")
    if os.path.exists(expected_path):
        with open(expected_path) as f:
            expected = json.load(f)
        check(state["step"] == expected["step"], f"{d}: step {state['step']}")
        check(sorted(expected["sums"]) == sorted(list(model) + list(opt)),
              f"{d}: expected.json names differ from the files")
        check_sums(d, model, expected["sums"])
        check_sums(d, opt, expected["sums"])
    n_values = sum(math.prod(s) for _, s, _ in model.values())
    print(f"ok {d}: {len(model)} tensors, {n_values} parameters, "
          f"optimizer {state['optimizer_state']}, step {state['step']}")


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    root = sys.argv[1]
    if os.path.exists(os.path.join(root, "model.safetensors")):
        dirs = [root]
    else:
        dirs = sorted(os.path.join(root, x) for x in os.listdir(root)
                      if os.path.isdir(os.path.join(root, x))
                      and ".tmp-" not in x and ".old-" not in x)
    if not dirs:
        print(f"FAIL: no checkpoint directories in {root}")
        return 1
    try:
        for d in dirs:
            check_checkpoint(d)
    except (CheckError, KeyError, ValueError, OSError) as e:
        print(f"FAIL: {type(e).__name__}: {e}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
