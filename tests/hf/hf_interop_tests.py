#!/usr/bin/env python3
"""moetrain <-> transformers interoperability tests (docs/INTEROP.md), one ctest test per case:

    hf_interop_tests.py --moetrain build/moetrain --logits build/moetrain_hf_logits \
                        --work DIR CASE

Needs transformers over a CPU torch (tools/requirements-test.txt). For each family, with a
small model whose weights are random and far from their init (gains, biases, routers all
perturbed, so a mapping mistake anywhere changes the logits):
  export_*: moetrain -> export -> transformers: logits agree (max |a - b| / max |b| <= 1e-4,
            fp32), greedy generation gives the same 32 tokens, and importing the export gives
            back bit-identical tensors and the same config;
  import_*: transformers (save_pretrained of a model built from a config) -> import ->
            moetrain: logits agree; bf16 / fp16 and sharded files are widened exactly.
"""
import hashlib
import json
import os
import shutil
import subprocess
import sys

import numpy as np

from hf_testlib import ARGS, main, run, test, work

# torch, transformers and safetensors are imported after --list (load_references), so that
# CMake's configure step lists the cases quickly.
torch = transformers = safe_open = save_file = None
TOL = 1e-4
PROMPT = "The king and the queen "


def corpus(d):
    words = "the king and queen of a far land spoke to their people about bread and war".split()
    rng = np.random.default_rng(0)
    text = ". ".join(" ".join(rng.choice(words, 8)) for _ in range(400))
    path = os.path.join(d, "corpus.txt")
    with open(path, "w") as f:
        f.write(text)
    return path


def perturb(arrays, seed):
    """Move every tensor far from its init: gains and biases by N(0, 0.2), matrices by
    N(0, 1/sqrt(fan_in)) (all exactly representable in bf16 when `bf16`)."""
    rng = np.random.default_rng(seed)
    out = {}
    for name in sorted(arrays):
        a = arrays[name].astype(np.float32)
        s = 0.2 if a.ndim == 1 else 1.0 / np.sqrt(a.shape[-1])
        out[name] = (a + rng.normal(0.0, s, a.shape)).astype(np.float32)
    return out


def moetrain_checkpoint(d, cfg, seed=1):
    """A moetrain checkpoint of config `cfg` with perturbed random weights."""
    cfg_path = os.path.join(d, "config.moetrain.json")
    with open(cfg_path, "w") as f:
        json.dump(cfg, f)
    run("train", "--config", cfg_path, "--data", corpus(d), "--steps", 0, "--batch", 1,
        "--seq", 8, "--threads", 1, "--out", os.path.join(d, "run"), "--seed", seed)
    ck = os.path.join(d, "run", "step_000000")
    path = os.path.join(ck, "model.safetensors")
    with safe_open(path, "np") as f:
        meta = f.metadata()
        arrays = {k: f.get_tensor(k) for k in f.keys()}
    # The rewritten weights invalidate the checkpoint's CRC32C checksums: drop them, which
    # leaves a checkpoint of the kind written before checksums existed (it loads).
    meta.pop("crc32c", None)
    save_file(perturb(arrays, seed), path, metadata=meta)
    state_path = os.path.join(ck, "state.json")
    with open(state_path) as f:
        state = json.load(f)
    state.pop("checksums", None)
    with open(state_path, "w") as f:
        json.dump(state, f, indent=2)
    return ck


def token_ids(n, vocab, seed=3):
    return [int(t) for t in np.random.default_rng(seed).integers(0, vocab, n)]


def moetrain_logits(ck, ids, vocab):
    out = os.path.join(os.path.dirname(ck.rstrip("/")), "logits.f32")
    p = subprocess.run([ARGS.logits, ck, out, *map(str, ids)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return np.fromfile(out, dtype=np.float32).reshape(len(ids), vocab)


def hf_model(d):
    m = transformers.AutoModelForCausalLM.from_pretrained(d, torch_dtype=torch.float32)
    m.eval()
    return m


def hf_logits(model, ids):
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0].float().numpy()


def compare_logits(ours, theirs, what):
    err = float(np.max(np.abs(ours - theirs)) / np.max(np.abs(theirs)))
    print(f"{what}: max |logit diff| / max |logit| = {err:.2e} (max |logit| "
          f"{float(np.max(np.abs(theirs))):.2f})")
    assert err <= TOL, f"{what}: logits differ: relative error {err:.3e} > {TOL}"


def greedy_moetrain(ck):
    p = run("generate", "--checkpoint", ck, "--prompt", PROMPT, "--max-new", 32,
            "--temperature", 0, "--json", "--threads", 1)
    return json.loads(p.stdout.strip().splitlines()[-1])["tokens"]


def greedy_hf(model):
    ids = torch.tensor([list(PROMPT.encode())])
    with torch.no_grad():
        out = model.generate(ids, max_new_tokens=32, min_new_tokens=32, do_sample=False,
                             pad_token_id=0)
    return out[0, ids.shape[1]:].tolist()


def tensors_of(ck):
    with safe_open(os.path.join(ck, "model.safetensors"), "np") as f:
        return f.metadata(), {k: f.get_tensor(k) for k in f.keys()}


def export_case(name, cfg, arch, shard_mb=None):
    d = work(name)
    ck = moetrain_checkpoint(d, cfg)
    out = os.path.join(d, "hf")
    extra = ["--max-shard-mb", shard_mb] if shard_mb else []
    p = run("export", "--checkpoint", ck, "--format", "hf", "--out", out, *extra)
    print(p.stdout.strip())
    conf = json.load(open(os.path.join(out, "config.json")))
    assert conf["architectures"] == [arch], conf["architectures"]
    if shard_mb:
        index = json.load(open(os.path.join(out, "model.safetensors.index.json")))
        shards = set(index["weight_map"].values())
        assert len(shards) > 1, f"expected several shards, got {shards}"
        print(f"{len(shards)} shards")
    model = hf_model(out)
    assert type(model).__name__ == arch, type(model).__name__
    ids = token_ids(48, cfg["vocab_size"])
    compare_logits(moetrain_logits(ck, ids, cfg["vocab_size"]), hf_logits(model, ids),
                   f"{name} moetrain vs {arch}")
    ours, theirs = greedy_moetrain(ck), greedy_hf(model)
    print(f"greedy moetrain    {ours}\ngreedy transformers {theirs}")
    assert len(ours) == 32 and ours == theirs, "greedy generations differ"

    # export -> import: bit-identical tensors and the same config (the NTK alpha is folded
    # into rope_theta on export, so it comes back as alpha 1 with the effective theta).
    back = os.path.join(d, "back")
    run("import", "--from", out, "--out", back)
    meta0, t0 = tensors_of(ck)
    meta1, t1 = tensors_of(back)
    assert sorted(t0) == sorted(t1), (sorted(t0), sorted(t1))
    for k in t0:
        assert t0[k].dtype == t1[k].dtype and t0[k].shape == t1[k].shape, k
        assert t0[k].tobytes() == t1[k].tobytes(), f"{k} differs after export -> import"
    c0, c1 = json.loads(meta0["config"]), json.loads(meta1["config"])
    alpha, h = c0["rope_ntk_alpha"], c0["head_dim"]
    if c0["pos"] == "rope" and alpha != 1.0:
        c0["rope_theta"] = c0["rope_theta"] * alpha ** (h / (h - 2))
        c0["rope_ntk_alpha"] = 1.0
        assert abs(c1["rope_theta"] - c0["rope_theta"]) <= 1e-12 * c0["rope_theta"], (c0, c1)
        c1["rope_theta"] = c0["rope_theta"]
    if c0.get("moe"):  # training-only terms transformers does not carry
        c1["moe"]["z_loss_alpha"] = c0["moe"]["z_loss_alpha"]
    assert c0 == c1, f"config changed:\n{c0}\n{c1}"
    print(f"export -> import: {len(t0)} tensors bit-identical, config equal")


BASE = dict(vocab_size=300, d_model=64, n_layers=2, n_heads=4, max_seq_len=64, d_ff=96,
            norm_eps=1e-5)
GPT2 = dict(BASE, n_kv_heads=4, norm="layernorm", pos="learned", ffn="gelu", bias=True,
            tie_embeddings=True)
LLAMA = dict(BASE, n_kv_heads=2, norm="rmsnorm", pos="rope", ffn="swiglu", bias=False,
             tie_embeddings=False, rope_theta=10000.0, norm_eps=1e-6)


def moe(**kw):
    m = dict(n_experts=4, top_k=2, router="softmax_topk", norm_topk_prob=True,
             n_shared_experts=0, aux_loss_alpha=0.01, z_loss_alpha=0.0, first_layer=0)
    m.update(kw)
    return dict(LLAMA, d_ff=48, moe=m)


@test
def export_gpt2():
    export_case("export_gpt2", GPT2, "GPT2LMHeadModel")


@test
def export_gpt2_untied_relu():
    export_case("export_gpt2_untied_relu", dict(GPT2, tie_embeddings=False, ffn="relu"),
                "GPT2LMHeadModel")


@test
def export_llama_gqa_ntk_sharded():
    export_case("export_llama_gqa_ntk_sharded", dict(LLAMA, rope_ntk_alpha=4.0),
                "LlamaForCausalLM", shard_mb=0.05)


@test
def export_llama_mqa_tied():
    export_case("export_llama_mqa_tied", dict(LLAMA, n_kv_heads=1, tie_embeddings=True),
                "LlamaForCausalLM")


@test
def export_mixtral_top1():
    export_case("export_mixtral_top1", moe(top_k=1), "MixtralForCausalLM")


@test
def export_mixtral_top2():
    export_case("export_mixtral_top2", moe(top_k=2, z_loss_alpha=0.001), "MixtralForCausalLM")


@test
def export_mixtral_top4():
    export_case("export_mixtral_top4", moe(n_experts=6, top_k=4), "MixtralForCausalLM")


@test
def export_shared_expert_top2():
    export_case("export_shared_expert_top2", moe(top_k=2, n_shared_experts=1),
                "Qwen2MoeForCausalLM")


@test
def export_shared_expert_top4_unnormalised():
    export_case("export_shared_expert_top4_unnormalised",
                moe(n_experts=8, top_k=4, n_shared_experts=2, norm_topk_prob=False),
                "Qwen2MoeForCausalLM")


# ---- transformers -> moetrain ----

def hf_perturbed(config_cls, seed, zero=(), **kw):
    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_config(config_cls(**kw))
    state = {k: v.numpy() for k, v in model.state_dict().items()}
    new = perturb(state, seed)
    for k in new:
        if any(z in k for z in zero):
            new[k][...] = 0
    model.load_state_dict({k: torch.from_numpy(v) for k, v in new.items()}, strict=False)
    model.eval()
    return model


def import_case(name, model, dtype=None, shard=None):
    d = work(name)
    src = os.path.join(d, "hf")
    kwargs = {"max_shard_size": shard} if shard else {}
    model.to(dtype or torch.float32).save_pretrained(src, safe_serialization=True, **kwargs)
    files = sorted(os.listdir(src))
    print("saved:", files)
    if shard:
        assert "model.safetensors.index.json" in files, files
    want = {torch.bfloat16: "BF16", torch.float16: "F16"}.get(dtype, "F32")
    for name in files:
        if name.endswith(".safetensors"):
            with open(os.path.join(src, name), "rb") as f:
                n = int.from_bytes(f.read(8), "little")
                header = json.loads(f.read(n))
            got = {v["dtype"] for k, v in header.items() if k != "__metadata__"}
            assert got == {want}, f"{name} holds {got}, expected {want}"
    ck = os.path.join(d, "ck")
    p = run("import", "--from", src, "--out", ck)
    print(p.stdout.strip())
    reference = hf_model(src)  # the saved (possibly 16-bit) weights widened to fp32
    vocab = reference.config.vocab_size
    ids = token_ids(48, vocab)
    compare_logits(moetrain_logits(ck, ids, vocab), hf_logits(reference, ids),
                   f"{name} {type(model).__name__} vs moetrain import")
    return d, ck


def small(**kw):
    base = dict(vocab_size=300, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, intermediate_size=96, max_position_embeddings=64)
    base.update(kw)
    return base


@test
def import_gpt2():
    m = hf_perturbed(transformers.GPT2Config, 5, vocab_size=300, n_positions=64, n_embd=64,
                     n_layer=2, n_head=4, activation_function="gelu_new")
    d, ck = import_case("import_gpt2", m)
    # GPT-2 files on the Hub name the base model's tensors without "transformer.".
    src = os.path.join(d, "hf")
    path = os.path.join(src, "model.safetensors")
    with safe_open(path, "np") as f:
        meta, arrays = f.metadata(), {k: f.get_tensor(k) for k in f.keys()}
    assert any(k.startswith("transformer.") for k in arrays), sorted(arrays)
    save_file({k.removeprefix("transformer."): v for k, v in arrays.items()}, path, metadata=meta)
    hub = os.path.join(d, "ck_hub")
    run("import", "--from", src, "--out", hub)
    a, b = tensors_of(ck)[1], tensors_of(hub)[1]
    assert sorted(a) == sorted(b) and all(a[k].tobytes() == b[k].tobytes() for k in a)
    print("unprefixed GPT-2 names: the same checkpoint")


@test
def import_llama_bf16_sharded_then_train():
    m = hf_perturbed(transformers.LlamaConfig, 6, rope_theta=50000.0, **small())
    d, ck = import_case("import_llama_bf16_sharded_then_train", m, dtype=torch.bfloat16,
                        shard="100KB")
    # Fine-tuning starts from transformers' model: the first step's cross-entropy (computed
    # before any update) is transformers' loss on the same first batch (MODEL.md 5 windows).
    data = corpus(d)
    log = os.path.join(d, "ft.jsonl")
    p = run("train", "--init-from", ck, "--data", data, "--steps", 3, "--batch", 2,
            "--seq", 16, "--threads", 1, "--lr", 1e-3, "--out", os.path.join(d, "ft"),
            "--log-json", log)
    print(p.stdout.strip().splitlines()[-1])
    assert os.path.isdir(os.path.join(d, "ft", "step_000003")), p.stdout
    first = json.loads(open(log).readline())
    tokens = list(open(data, "rb").read()[:2 * 16 + 1])
    x = torch.tensor(tokens[:-1]).view(2, 16)
    y = torch.tensor(tokens[1:]).view(2, 16)
    reference = hf_model(os.path.join(d, "hf"))
    with torch.no_grad():
        ce = torch.nn.functional.cross_entropy(reference(x).logits.reshape(-1, 300),
                                               y.reshape(-1)).item()
    print(f"step 1 ce: moetrain {first['ce']:.6f}, transformers {ce:.6f}")
    assert abs(first["ce"] - ce) <= 1e-4 * ce, (first["ce"], ce)


@test
def import_mixtral_fp16():
    m = hf_perturbed(transformers.MixtralConfig, 7, num_local_experts=4, num_experts_per_tok=2,
                     sliding_window=None, **small(intermediate_size=48))
    import_case("import_mixtral_fp16", m, dtype=torch.float16)


@test
def import_qwen2_moe_ungated():
    # Only a Qwen2-MoE model whose shared-expert gate and q/k/v biases are zero is a MODEL.md
    # model (the gate then scales the shared expert by exactly 0.5).
    m = hf_perturbed(transformers.Qwen2MoeConfig, 8, zero=("shared_expert_gate", "_proj.bias"),
                     num_experts=4, num_experts_per_tok=2, moe_intermediate_size=48,
                     shared_expert_intermediate_size=96, norm_topk_prob=False,
                     sliding_window=None, **small())
    import_case("import_qwen2_moe_ungated", m)


@test
def import_qwen2_moe_gated_refused():
    d = work("import_qwen2_moe_gated_refused")
    m = hf_perturbed(transformers.Qwen2MoeConfig, 9, zero=("_proj.bias",), num_experts=4,
                     num_experts_per_tok=2, moe_intermediate_size=48,
                     shared_expert_intermediate_size=96, sliding_window=None, **small())
    m.save_pretrained(os.path.join(d, "hf"))
    p = run("import", "--from", os.path.join(d, "hf"), "--out", os.path.join(d, "ck"), ok=False)
    err = p.stderr.strip().splitlines()
    print(p.stderr.strip())
    assert p.returncode == 1 and len(err) == 1, p.stderr
    assert "shared_expert_gate" in err[0] and "gate" in err[0], err[0]
    assert not os.path.exists(os.path.join(d, "ck")), "a refused import left a checkpoint"


@test
def tokenizer_round_trip():
    """A `moetrain tokenizer train` tokenizer.json travels checkpoint -> export (byte-identical,
    HF tokenizers and AutoTokenizer give moetrain's ids) -> import (generate needs no
    --tokenizer)."""
    from tokenizers import Tokenizer
    d = work("tokenizer_round_trip")
    text = corpus(d)
    tok = os.path.join(d, "tok.json")
    run("tokenizer", "train", "--data", text, "--vocab-size", 280, "--special", "<|endoftext|>",
        "--out", tok, "--threads", 1)
    cfg_path = os.path.join(d, "config.moetrain.json")
    with open(cfg_path, "w") as f:
        json.dump(LLAMA, f)
    run("train", "--config", cfg_path, "--data", text, "--tokenizer", tok, "--steps", 1,
        "--batch", 1, "--seq", 8, "--threads", 1, "--out", os.path.join(d, "run"))
    ck = os.path.join(d, "run", "step_000001")
    out = os.path.join(d, "hf")
    p = run("export", "--checkpoint", ck, "--format", "hf", "--out", out)
    print(p.stdout.strip())
    assert "tokenizer.json" in p.stdout and "note: no tokenizer" not in p.stdout, p.stdout
    with open(tok, "rb") as a, open(os.path.join(out, "tokenizer.json"), "rb") as b:
        assert a.read() == b.read(), "exported tokenizer.json differs from the trained one"

    sample = os.path.join(d, "sample.txt")
    with open(sample, "w") as f:
        f.write("The king spoke of bread, war and 42 queens!<|endoftext|> Über-land\n")
    ours = json.loads(run("tokenizer", "encode", "--tokenizer", tok, sample).stdout)
    text_s = open(sample).read()
    hf_ids = Tokenizer.from_file(os.path.join(out, "tokenizer.json")).encode(text_s).ids
    auto = transformers.AutoTokenizer.from_pretrained(out)
    auto_ids = auto(text_s, add_special_tokens=True)["input_ids"]
    print(f"moetrain {ours}\ntokenizers {hf_ids}\nAutoTokenizer ({type(auto).__name__}) "
          f"{auto_ids}")
    assert len(ours) > 5 and ours == hf_ids == auto_ids, "token ids differ"
    assert auto.decode(ours) == text_s, auto.decode(ours)

    back = os.path.join(d, "back")
    p = run("import", "--from", out, "--out", back)
    print(p.stdout.strip())
    with open(tok, "rb") as a, open(os.path.join(back, "tokenizer.json"), "rb") as b:
        assert a.read() == b.read(), "imported tokenizer copy differs"
    state = json.load(open(os.path.join(back, "state.json")))
    assert state["data"]["tokenizer_sha256"] == hashlib.sha256(open(tok, "rb").read()).hexdigest()
    g = run("generate", "--checkpoint", back, "--prompt", "The king", "--max-new", 8,
            "--temperature", 0, "--json", "--threads", 1)
    r = json.loads(g.stdout.strip().splitlines()[-1])
    print(r)
    g0 = run("generate", "--checkpoint", ck, "--prompt", "The king", "--max-new", 8,
             "--temperature", 0, "--json", "--threads", 1)
    r0 = json.loads(g0.stdout.strip().splitlines()[-1])
    assert r["tokens"] == r0["tokens"] and len(r["tokens"]) == 8, (r, r0)

    # Import refuses a tokenizer whose ids do not fit the embedding, leaving nothing behind.
    small = os.path.join(d, "small")
    shutil.copytree(out, small)
    conf = json.load(open(os.path.join(small, "config.json")))
    big = os.path.join(d, "big.json")
    run("tokenizer", "train", "--data", text, "--vocab-size", conf["vocab_size"] + 20,
        "--out", big, "--threads", 1)
    shutil.copy(big, os.path.join(small, "tokenizer.json"))
    p = run("import", "--from", small, "--out", os.path.join(d, "ck_big"), ok=False)
    err = p.stderr.strip().splitlines()
    print(p.stderr.strip())
    assert p.returncode == 1 and len(err) == 1 and "vocab_size" in err[0], p.stderr
    assert not os.path.exists(os.path.join(d, "ck_big")), "a refused import left a checkpoint"


def load_references():
    global torch, transformers, safe_open, save_file
    import torch
    import transformers
    from safetensors import safe_open
    from safetensors.numpy import save_file
    torch.set_num_threads(1)


if __name__ == "__main__":
    sys.exit(main(load_references))
