#!/usr/bin/env python3
"""CLI tests of `moetrain export --format hf` and `moetrain import` that need no transformers
(stdlib only): every config that no transformers class computes exactly is refused with one
line naming the feature, and every import problem (unknown architecture, missing, unexpected
or misshapen tensor, unsupported settings, a non-zero tensor MODEL.md lacks, bad index) is
refused with one line and leaves no checkpoint behind.

    hf_cli_tests.py --moetrain build/moetrain --work DIR CASE
"""
import json
import os
import shutil
import struct
import sys

from hf_testlib import expect_error, main, run, test, work


def checkpoint(d, cfg):
    cfg_path = os.path.join(d, "cfg.json")
    with open(cfg_path, "w") as f:
        json.dump(cfg, f)
    data = os.path.join(d, "corpus.txt")
    with open(data, "w") as f:
        f.write("the king and the queen spoke to their people. " * 200)
    run("train", "--config", cfg_path, "--data", data, "--steps", 0, "--batch", 1, "--seq", 8,
        "--threads", 1, "--out", os.path.join(d, "run"))
    return os.path.join(d, "run", "step_000000")


LLAMA = dict(vocab_size=260, d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, max_seq_len=32,
             norm="rmsnorm", pos="rope", ffn="swiglu", d_ff=48, bias=False)
GPT2 = dict(LLAMA, n_kv_heads=4, norm="layernorm", pos="learned", ffn="gelu", bias=True,
            tie_embeddings=True)
MOE = dict(n_experts=4, top_k=2)


def refused_export(name, cfg, *words):
    d = work(name)
    ck = checkpoint(d, cfg)
    out = os.path.join(d, "hf")
    expect_error(["export", "--checkpoint", ck, "--format", "hf", "--out", out], *words)
    assert not os.path.exists(out), "a refused export left a directory"


@test
def export_refuses_hash_routing():
    refused_export("hash", dict(LLAMA, moe=dict(MOE, router="hash")), "moe.router = hash")


@test
def export_refuses_dense_first_layers():
    refused_export("first", dict(LLAMA, moe=dict(MOE, first_layer=1)), "moe.first_layer")


@test
def export_refuses_unnormalised_without_shared():
    refused_export("nonorm", dict(LLAMA, moe=dict(MOE, norm_topk_prob=False)),
                   "norm_topk_prob = false")


@test
def export_refuses_mixed_families():
    refused_export("rope_ln", dict(LLAMA, norm="layernorm"), "norm = layernorm")
    refused_export("rope_gelu", dict(LLAMA, ffn="gelu"), "ffn = gelu")
    refused_export("rope_bias", dict(LLAMA, bias=True), "bias = true")
    refused_export("learned_rms", dict(GPT2, norm="rmsnorm"), "norm = rmsnorm")
    refused_export("learned_nobias", dict(GPT2, bias=False), "bias = false")
    refused_export("learned_gqa", dict(GPT2, n_kv_heads=2), "n_kv_heads")
    refused_export("head_dim", dict(LLAMA, head_dim=16), "head_dim")


@test
def export_keeps_foreign_out_dir():
    d = work("foreign")
    ck = checkpoint(d, LLAMA)
    out = os.path.join(d, "hf")
    os.makedirs(out)
    with open(os.path.join(out, "notes.txt"), "w") as f:
        f.write("mine")
    expect_error(["export", "--checkpoint", ck, "--format", "hf", "--out", out], "notes.txt")
    assert os.path.exists(os.path.join(out, "notes.txt"))
    # An earlier export is replaced as a whole.
    os.remove(os.path.join(out, "notes.txt"))
    run("export", "--checkpoint", ck, "--format", "hf", "--out", out)
    p = run("export", "--checkpoint", ck, "--format", "hf", "--out", out)
    # A bytes checkpoint has no tokenizer.json to write: one note says so.
    notes = [l for l in p.stdout.splitlines() if "tokenizer" in l]
    assert len(notes) == 1 and notes[0].startswith("note: no tokenizer.json"), p.stdout
    assert not os.path.exists(os.path.join(out, "tokenizer.json")), os.listdir(out)


@test
def import_refuses_bad_tokenizer():
    d, out = exported("bad_tokenizer")
    with open(os.path.join(out, "tokenizer.json"), "w") as f:
        f.write('{"model": {"type": "WordPiece"}}')
    refused_import(d, out, "tokenizer.json", "--no-tokenizer")
    ck = os.path.join(d, "ck")
    p = run("import", "--from", out, "--out", ck, "--no-tokenizer")
    assert "note: tokenizer.json left out" in p.stdout, p.stdout
    assert not os.path.exists(os.path.join(ck, "tokenizer.json")), os.listdir(ck)
    run("generate", "--checkpoint", ck, "--prompt", "the", "--max-new", 2, "--threads", 1)


# ---- import ----

def read_st(path):
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", {})
    data = raw[8 + n:]
    return meta, {k: (v["dtype"], v["shape"], data[v["data_offsets"][0]:v["data_offsets"][1]])
                  for k, v in header.items()}


def write_st(path, meta, tensors):
    header, blobs, at = {"__metadata__": meta}, [], 0
    for k, (dtype, shape, blob) in tensors.items():
        header[k] = {"dtype": dtype, "shape": shape, "data_offsets": [at, at + len(blob)]}
        blobs.append(blob)
        at += len(blob)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def exported(name, cfg=LLAMA):
    d = work(name)
    out = os.path.join(d, "hf")
    run("export", "--checkpoint", checkpoint(d, cfg), "--format", "hf", "--out", out)
    return d, out


def refused_import(d, src, *words):
    ck = os.path.join(d, "ck")
    shutil.rmtree(ck, ignore_errors=True)
    expect_error(["import", "--from", src, "--out", ck], *words)
    assert not os.path.exists(ck), "a refused import left a checkpoint"


def edit_config(src, **kw):
    path = os.path.join(src, "config.json")
    c = json.load(open(path))
    for k, v in kw.items():
        if v is ...:
            c.pop(k, None)
        else:
            c[k] = v
    json.dump(c, open(path, "w"))


@test
def import_refuses_config_features():
    d, src = exported("import_config")
    base = json.load(open(os.path.join(src, "config.json")))
    cases = [(dict(architectures=["BertForMaskedLM"]), ["unknown architecture", "BertForMaskedLM"]),
             (dict(rope_scaling={"type": "linear", "factor": 2.0}), ["rope_scaling"]),
             (dict(hidden_act="gelu"), ["hidden_act"]),
             (dict(attention_bias=True), ["attention_bias"]),
             (dict(num_key_value_heads=3), ["n_kv_heads"]),
             (dict(intermediate_size=50), ["shape", "mlp.gate_proj"]),
             (dict(hidden_size=...), ["hidden_size"])]
    for change, words in cases:
        json.dump(base, open(os.path.join(src, "config.json"), "w"))
        edit_config(src, **change)
        refused_import(d, src, *words)


@test
def import_refuses_tensor_problems():
    d, src = exported("import_tensors")
    path = os.path.join(src, "model.safetensors")
    meta, t = read_st(path)
    victim = "model.layers.1.self_attn.k_proj.weight"
    write_st(path, meta, {k: v for k, v in t.items() if k != victim})
    refused_import(d, src, "no tensor", victim)
    write_st(path, meta, dict(t, **{"model.layers.1.extra.weight": t[victim]}))
    refused_import(d, src, "unexpected tensor", "model.layers.1.extra.weight")
    dtype, shape, blob = t[victim]
    write_st(path, meta, dict(t, **{victim: ("F32", [shape[1], shape[0]], blob)}))
    refused_import(d, src, "shape", victim)
    write_st(path, meta, dict(t, **{victim: ("I32", shape, blob)}))
    refused_import(d, src, "dtype", victim)
    nan = struct.pack("<f", float("nan")) + blob[4:]
    write_st(path, meta, dict(t, **{victim: (dtype, shape, nan)}))
    refused_import(d, src, "non-finite", victim)
    os.remove(path)
    refused_import(d, src, "model.safetensors")


@test
def import_refuses_gated_shared_expert():
    d, src = exported("import_gate", dict(LLAMA, moe=dict(MOE, n_shared_experts=1)))
    path = os.path.join(src, "model.safetensors")
    meta, t = read_st(path)
    gate = "model.layers.0.mlp.shared_expert_gate.weight"
    dtype, shape, blob = t[gate]
    write_st(path, meta, dict(t, **{gate: (dtype, shape, struct.pack("<f", 0.5) + blob[4:])}))
    refused_import(d, src, gate, "gate")
    bias = "model.layers.1.self_attn.q_proj.bias"
    dtype, shape, blob = t[bias]
    write_st(path, meta, dict(t, **{bias: (dtype, shape, struct.pack("<f", 0.5) + blob[4:])}))
    refused_import(d, src, bias, "bias")


@test
def import_refuses_bad_index_and_existing_out():
    d, src = exported("import_index")
    os.rename(os.path.join(src, "model.safetensors"), os.path.join(src, "part1.safetensors"))
    index = {"metadata": {}, "weight_map": {"model.embed_tokens.weight": "part2.safetensors"}}
    json.dump(index, open(os.path.join(src, "model.safetensors.index.json"), "w"))
    refused_import(d, src, "part2.safetensors")
    index["weight_map"]["model.embed_tokens.weight"] = "part1.safetensors"
    json.dump(index, open(os.path.join(src, "model.safetensors.index.json"), "w"))
    refused_import(d, src, "index")
    d2, src2 = exported("import_existing")
    ck = os.path.join(d2, "ck")
    os.makedirs(ck)
    open(os.path.join(ck, "keep"), "w").close()
    expect_error(["import", "--from", src2, "--out", ck], "not an empty directory")
    assert os.path.exists(os.path.join(ck, "keep"))


if __name__ == "__main__":
    sys.exit(main())
