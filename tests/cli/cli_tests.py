#!/usr/bin/env python3
"""End-to-end tests of the moetrain CLI (stdlib only). Each test is registered with ctest:

    cli_tests.py --moetrain build/moetrain --work DIR TEST_NAME

Every user error must end in exactly one stderr line "moetrain: error: ..." and a non-zero
exit status below 128 (no abort, no crash, no stack trace).
"""
import json
import os
import random
import re
import shutil
import signal
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from cli_testlib import (ARGS, TESTS, Skip, corpus, expect_error, last_json,  # noqa: E402,F401
                         main, read_json, read_log, run, step_losses, test, work, write)

TINY = ["--device", "cpu", "--preset", "tiny", "--batch", "4", "--seq", "32", "--threads", "1"]


def tiny_checkpoint(d, steps):
    """The corpus in d and a TINY run of `steps` steps in d/run: (corpus, its checkpoint)."""
    data = corpus(d)
    run("train", *TINY, "--data", data, "--steps", steps, "--out", f"{d}/run")
    return data, f"{d}/run/step_{steps:06d}"


@test
def info_lists_backends():
    p = run("info")
    assert "cpu" in p.stdout and "available" in p.stdout, p.stdout
    for line in p.stdout.splitlines():
        if line.startswith("cuda"):
            # Here there is no GPU: cuda must say why it is unavailable.
            assert "available" in line, line
    print(p.stdout)


@test
def bf16_on_every_cpu():
    """The CPU runs 16-bit training on every x86-64 processor: oneDNN's bf16 matmul where the CPU
    has a kernel for it, else the operands widened to f32 (AVX2-only CPUs). `info` names the path;
    MOETRAIN_CPU_BF16_GEMM=widen forces the fallback, so it is exercised on every machine, and its
    losses agree with the detected path's to bf16 accuracy; a bad value fails in one line."""
    d = work("bf16_every_cpu")
    data = corpus(d)
    cpu_line = [l for l in run("info").stdout.splitlines() if "bf16 products:" in l]
    assert cpu_line, "info does not say how the CPU runs bf16 products"
    print(cpu_line[0].strip())
    widen = dict(os.environ, MOETRAIN_CPU_BF16_GEMM="widen")
    forced = [l for l in run("info", env=widen).stdout.splitlines() if "bf16 products:" in l]
    assert "widened to f32" in forced[0], forced
    losses = {}
    for name, env in [("detected", None), ("widen", widen)]:
        for precision in ["bf16", "fp16"]:
            log = f"{d}/{name}_{precision}.jsonl"
            run("train", *TINY, "--data", data, "--steps", 3, "--precision", precision,
                "--out", f"{d}/{name}_{precision}", "--log-json", log, env=env)
            losses[name, precision] = [l for _, l in step_losses(log)]
        run("eval", "--checkpoint", f"{d}/{name}_bf16/step_000003", "--data", data, "--batch", 2,
            "--seq", 32, "--batches", 2, "--threads", 1, env=env)
        run("bench", *TINY, "--precision", "bf16", "--steps", 2, env=env)
    for precision in ["bf16", "fp16"]:
        a, b = losses["detected", precision], losses["widen", precision]
        assert len(a) == 3 and all(abs(x - y) < 2e-2 * abs(x) for x, y in zip(a, b)), (a, b)
    bad = dict(os.environ, MOETRAIN_CPU_BF16_GEMM="fast")
    expect_error(["train", *TINY, "--data", data, "--steps", 1, "--precision", "bf16", "--out",
                  f"{d}/bad"], "MOETRAIN_CPU_BF16_GEMM=fast", env=bad)
    print(losses)


@test
def registry_reports_broken_modules():
    mods = os.path.join(os.path.dirname(os.path.abspath(ARGS.moetrain)), "test-modules")
    assert os.path.isdir(mods), mods
    env = dict(os.environ, MOETRAIN_BACKEND_PATH=mods)
    p = subprocess.run([ARGS.moetrain, "info"], capture_output=True, text=True, env=env)
    assert p.returncode == 0, p.stderr
    lines = {l.split()[0]: l for l in p.stdout.splitlines() if l and not l.startswith(" ")}
    print(p.stdout)
    assert "unavailable" in lines["wrong_abi"] and "ABI" in lines["wrong_abi"], lines
    assert ("unavailable" in lines["unloadable"] and
            "moetrain_symbol_that_does_not_exist" in lines["unloadable"]), lines
    assert "available" in lines["cpu"]
    for name, word in [("wrong_abi", "ABI"), ("unloadable", "cannot load")]:
        q = subprocess.run([ARGS.moetrain, "bench", "--device", name, "--preset", "tiny",
                            "--batch", "1", "--seq", "8"],
                           capture_output=True, text=True, env=env)
        err = q.stderr.strip().splitlines()
        assert q.returncode == 1 and len(err) == 1 and word in err[0], (q.returncode, q.stderr)
        print(err[0])


@test
def help_for_every_subcommand():
    for sub in ["info", "train", "eval", "generate", "bench", "gradcheck"]:
        p = run(sub, "--help")
        assert "Usage" in p.stdout or "usage" in p.stdout.lower(), p.stdout


@test
def train_eval_generate():
    d = work("train_eval_generate")
    data = corpus(d)
    log = os.path.join(d, "log.jsonl")
    run("train", *TINY, "--data", data, "--steps", 6, "--lr", "3e-3", "--out", f"{d}/run",
        "--save-every", 3, "--eval-every", 3, "--eval-batches", 2, "--log-json", log)
    assert sorted(os.listdir(f"{d}/run")) == ["step_000003", "step_000006"], os.listdir(f"{d}/run")
    for s in ["step_000003", "step_000006"]:
        assert sorted(os.listdir(f"{d}/run/{s}")) == ["model.safetensors", "optimizer.safetensors",
                                                      "state.json"]
    recs = read_log(log)
    steps = [r for r in recs if "eval" not in r]
    evals = [r for r in recs if "eval" in r]
    assert [r["step"] for r in steps] == [1, 2, 3, 4, 5, 6]
    for r in steps:
        for k in ["loss", "ce", "aux", "z", "lr", "grad_norm", "tokens_per_s", "elapsed_s",
                  "eta_s", "expert_load"]:
            assert k in r, (k, r)
    assert len(evals) == 2 and evals[0]["step"] == 3
    p = run("eval", "--checkpoint", f"{d}/run", "--data", data, "--batch", 4, "--seq", 32,
            "--batches", 2)
    j = last_json(p)
    assert set(j) >= {"ce", "aux", "z", "loss", "tokens"}, j
    assert abs(j["loss"] - evals[-1]["eval"]["loss"]) < 1e-6, (j, evals[-1])
    g1 = run("generate", "--checkpoint", f"{d}/run", "--prompt", "The king", "--max-new", 20,
             "--temperature", 0, "--json")
    g2 = run("generate", "--checkpoint", f"{d}/run/step_000006", "--prompt", "The king",
             "--max-new", 20, "--temperature", 0, "--json")
    j1 = last_json(g1)
    j2 = last_json(g2)
    assert len(j1["tokens"]) == 20 and j1 == j2, (j1, j2)
    s1 = run("generate", "--checkpoint", f"{d}/run", "--max-new", 20, "--temperature", 1.0,
             "--top-k", 20, "--top-p", 0.9, "--seed", 7, "--json")
    s2 = run("generate", "--checkpoint", f"{d}/run", "--max-new", 20, "--temperature", 1.0,
             "--top-k", 20, "--top-p", 0.9, "--seed", 7, "--json")
    assert s1.stdout == s2.stdout, "same seed must give the same sample"
    # Longer than the model's max_seq_len (128 for tiny): the context window slides.
    g3 = run("generate", "--checkpoint", f"{d}/run", "--prompt", "The", "--max-new", 300,
             "--temperature", 0.9, "--seed", 5, "--json")
    j3 = last_json(g3)
    assert len(j3["tokens"]) == 300, len(j3["tokens"])


@test
def resume_is_exact():
    d = work("resume_is_exact")
    data = corpus(d)
    common = [*TINY, "--data", data, "--steps", 6, "--lr", "3e-3", "--warmup", 2]
    run("train", *common, "--log-json", f"{d}/full.jsonl")
    run("train", *common, "--stop-at", 3, "--out", f"{d}/run", "--log-json", f"{d}/a.jsonl")
    run("train", *common, "--resume", f"{d}/run", "--out", f"{d}/run",
        "--log-json", f"{d}/b.jsonl")
    full = step_losses(f"{d}/full.jsonl")
    split = step_losses(f"{d}/a.jsonl") + step_losses(f"{d}/b.jsonl")
    assert full == split, f"resumed losses differ:\n{full}\n{split}"
    print("identical:", full)


@test
def adamw8bit_trains_saves_resumes():
    d = work("adamw8bit_trains_saves_resumes")
    data = corpus(d)
    common = [*TINY, "--data", data, "--steps", 6, "--lr", "3e-3", "--warmup", 2]
    run("train", *common, "--optimizer", "adamw8bit", "--log-json", f"{d}/full.jsonl")
    run("train", *common, "--optimizer", "adamw8bit", "--stop-at", 3, "--out", f"{d}/run",
        "--log-json", f"{d}/a.jsonl")
    ck = f"{d}/run/step_000003"
    state = read_json(f"{ck}/state.json")
    assert state["optimizer_state"] == "adamw8bit_moments", state
    assert state["train"]["optimizer"] == "adamw8bit", state
    with open(f"{ck}/optimizer.safetensors", "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    assert header["m_codes.decay"]["dtype"] == "U8", header["m_codes.decay"]
    assert header["v_absmax.no_decay"]["dtype"] == "F32", header["v_absmax.no_decay"]
    # Resuming without --optimizer adopts it from state.json and continues exactly.
    run("train", *common, "--resume", f"{d}/run", "--out", f"{d}/run",
        "--log-json", f"{d}/b.jsonl")
    full = step_losses(f"{d}/full.jsonl")
    split = step_losses(f"{d}/a.jsonl") + step_losses(f"{d}/b.jsonl")
    assert full == split, f"resumed losses differ:\n{full}\n{split}"
    reader = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "safetensors_reader.py")
    p = subprocess.run([sys.executable, reader, f"{d}/run"], capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    print("identical:", full, "\n", p.stdout.strip())
    # Another optimizer cannot take over the 8-bit state; unknown names are refused.
    expect_error(["train", *common, "--resume", ck, "--optimizer", "adamw"],
                 ["trained with adamw8bit", "uses adamw"])
    expect_error(["train", *common, "--optimizer", "adam8"], ["--optimizer", "adamw8bit"])
    # The memory planner counts the 8-bit state: a quarter of AdamW's plus the block scales.
    plans = {}
    for opt in ("adamw", "adamw8bit"):
        p = run("plan", "--preset", "tiny", "--batch", 4, "--seq", 32, "--memory-gb", 1,
                "--optimizer", opt)
        plans[opt] = last_json(p)["optimizer"]
    assert plans["adamw"] / 4 <= plans["adamw8bit"] <= plans["adamw"] / 4 * 1.02, plans


@test
def plan_capacity_and_device_errors():
    # A plan for the machine's own cpu, a given capacity, and every bad --device in one line.
    base = ["plan", "--preset", "tiny", "--batch", 4, "--seq", 32]
    cpu = last_json(run(*base, "--device", "cpu"))
    assert cpu["capacity"] > 1e9 and cpu["fits"], cpu
    tight = last_json(run(*base, "--memory-gb", 0.001))
    assert tight["capacity"] == 1e6 and not tight["fits"] and tight["total"] == cpu["total"], tight
    expect_error([*base, "--device", "nope"], ["unknown device 'nope'", "--memory-gb"])
    expect_error([*base, "--device", "cpu:7"], ["does not exist", "--memory-gb"])
    expect_error([*base, "--device", "cpu:x"], ["bad device", "--memory-gb"])
    expect_error([*base[:-2], "--seq", 100000, "--memory-gb", 80], ["max_seq_len"])


@test
def resume_adopts_saved_settings():
    d = work("resume_adopts_saved_settings")
    data = corpus(d)
    common = [*TINY, "--data", data, "--steps", 6]
    custom = ["--lr", "2e-3", "--warmup", 2, "--min-lr", "1e-4", "--wd", "0.05", "--clip", "0.5"]
    run("train", *common, *custom, "--log-json", f"{d}/full.jsonl")
    run("train", *common, *custom, "--stop-at", 3, "--out", f"{d}/run",
        "--log-json", f"{d}/a.jsonl")
    # Resume without repeating the hyper-parameters: they come from the checkpoint.
    run("train", *common, "--resume", f"{d}/run", "--out", f"{d}/run",
        "--log-json", f"{d}/b.jsonl")
    assert step_losses(f"{d}/full.jsonl") == (step_losses(f"{d}/a.jsonl") +
                                              step_losses(f"{d}/b.jsonl"))
    ck = f"{d}/run/step_000003"
    # An explicit flag overrides the saved value, and says so.
    p = run("train", *common, "--resume", ck, "--lr", "3e-4", "--log-json", f"{d}/c.jsonl")
    assert "--lr 0.0003 overrides the checkpoint's 0.002" in p.stdout, p.stdout
    assert step_losses(f"{d}/c.jsonl") != step_losses(f"{d}/b.jsonl")
    other = write(f"{d}/other.txt", open(data).read()[:40000])
    expect_error(["train", *TINY, "--data", other, "--steps", 6, "--resume", ck],
                 ["tokens", "checkpoint"])
    # A fresh run may not write into a run directory that holds another run.
    expect_error(["train", *common, "--out", f"{d}/run"], ["--out", "--resume"])
    # Resuming a finished run is a no-op, not a rewrite.
    p = run("train", *common, "--resume", f"{d}/run")
    assert "nothing to do" in p.stdout, p.stdout


@test
def init_from_and_steps_zero():
    d = work("init_from_and_steps_zero")
    data = corpus(d)
    run("train", *TINY, "--data", data, "--steps", 0, "--out", f"{d}/init")
    assert os.listdir(f"{d}/init") == ["step_000000"], os.listdir(f"{d}/init")
    run("train", *TINY, "--data", data, "--steps", 2, "--init-from", f"{d}/init",
        "--out", f"{d}/ft", "--log-json", f"{d}/ft.jsonl")
    assert [s for s, _ in step_losses(f"{d}/ft.jsonl")] == [1, 2]
    assert os.listdir(f"{d}/ft") == ["step_000002"]


@test
def loss_falls_below_unigram_entropy():
    d = work("loss_falls")
    data = corpus(d, 80000)
    with open(data, "rb") as f:
        raw = f.read()
    import math
    counts = {}
    for b in raw:
        counts[b] = counts.get(b, 0) + 1
    h = -sum(c / len(raw) * math.log(c / len(raw)) for c in counts.values())
    run("train", *TINY, "--data", data, "--steps", 60, "--lr", "1e-2", "--warmup", 5,
        "--log-json", f"{d}/log.jsonl", "--quiet")
    losses = [l for _, l in step_losses(f"{d}/log.jsonl")]
    print(f"unigram entropy {h:.3f} nats; first loss {losses[0]:.3f}, last {losses[-1]:.3f}")
    assert losses[-1] < h - 0.3, (losses[-1], h)


@test
def errors_data_and_config():
    d = work("errors_data_and_config")
    data = corpus(d)
    base = ["train", "--device", "cpu", "--steps", 2, "--batch", 4, "--seq", 32]
    expect_error([*base, "--preset", "tiny", "--data", f"{d}/nope.txt"], "nope.txt")
    expect_error([*base, "--preset", "tiny", "--data", write(f"{d}/empty.txt", "")], "empty")
    expect_error([*base, "--preset", "tiny", "--data", write(f"{d}/short.txt", "hello world")],
                 "short")
    expect_error([*base, "--config", write(f"{d}/bad.json", "{ not json"), "--data", data],
                 "bad.json")
    cfg = {"vocab_size": 256, "d_model": 64, "n_layers": 2, "n_heads": 4, "n_kv_heads": 3,
           "max_seq_len": 64, "d_ff": 128}
    expect_error([*base, "--config", write(f"{d}/gqa.json", json.dumps(cfg)), "--data", data],
                 "n_kv_heads")
    cfg2 = dict(cfg, n_kv_heads=2, dropout=0.1)
    expect_error([*base, "--config", write(f"{d}/unk.json", json.dumps(cfg2)), "--data", data],
                 "dropout")
    cfg3 = dict(cfg, n_kv_heads=2, vocab_size=100)
    expect_error([*base, "--config", write(f"{d}/vocab.json", json.dumps(cfg3)), "--data", data],
                 "vocab")
    expect_error([*base, "--preset", "nosuch", "--data", data], "nosuch")
    expect_error(["train", "--device", "cpu", "--preset", "tiny", "--data", data, "--steps", 2,
                  "--batch", 0, "--seq", 32], "--batch")
    expect_error(["train", "--device", "cpu", "--preset", "tiny", "--data", data, "--steps", -1,
                  "--batch", 4, "--seq", 32], "--steps")
    expect_error(["train", "--device", "cpu", "--preset", "tiny", "--data", data, "--steps", 2,
                  "--batch", 4, "--seq", 4096], "max_seq_len")
    expect_error([*base, "--preset", "tiny", "--data", data, "--bogus-flag"], "bogus")
    # The validation split must hold one batch when evaluation is on: fail before training.
    small = write(f"{d}/small.txt", open(data).read()[:3000])
    expect_error(["train", "--device", "cpu", "--preset", "tiny", "--data", small, "--steps", 3,
                  "--batch", 4, "--seq", 96, "--eval-every", 1], ["val", "short"])
    # User text with line breaks still gives a one-line error.
    expect_error([*base, "--config", write(f"{d}/nl.json", '{"vocab\\nsize": 1}'),
                  "--data", data], "vocab")
    expect_error([*base, "--preset", "tiny", "--data", data, "--device", "cpu\nfoo"], "device")


@test
def errors_devices():
    d = work("errors_devices")
    data = corpus(d)
    base = ["train", "--preset", "tiny", "--data", data, "--steps", 1, "--batch", 2, "--seq", 16]
    expect_error([*base, "--device", "tpu"], "tpu")
    expect_error([*base, "--device", "cpu:7"], "cpu:7")
    expect_error([*base, "--device", "opencl:x"], "opencl:x")
    has_gpu = any(line.startswith("cuda") and "unavailable" not in line
                  for line in run("info").stdout.splitlines())
    if not has_gpu:
        msg = expect_error([*base, "--device", "cuda"], "cuda").error
        assert "not available" in msg, msg


@test
def errors_checkpoints():
    d = work("errors_checkpoints")
    data, ck = tiny_checkpoint(d, 1)
    ev = ["eval", "--data", data, "--batch", 2, "--seq", 16, "--checkpoint"]
    expect_error([*ev, f"{d}/missing"], "missing")
    expect_error([*ev, f"{d}"], "checkpoint")  # a dir with no step_* and no model files
    # Truncated weights.
    bad = f"{d}/trunc"
    shutil.copytree(ck, bad)
    size = os.path.getsize(f"{bad}/model.safetensors")
    with open(f"{bad}/model.safetensors", "r+b") as f:
        f.truncate(size - 100)
    expect_error([*ev, bad], "model.safetensors")
    # Corrupt header.
    bad2 = f"{d}/corrupt"
    shutil.copytree(ck, bad2)
    with open(f"{bad2}/model.safetensors", "r+b") as f:
        f.seek(8)
        f.write(b"#garbage#")
    expect_error([*ev, bad2], "model.safetensors")
    # Header length beyond the file.
    bad3 = f"{d}/hdrlen"
    shutil.copytree(ck, bad3)
    with open(f"{bad3}/model.safetensors", "r+b") as f:
        f.write(struct.pack("<Q", 1 << 40))
    expect_error([*ev, bad3], "model.safetensors")
    # A weight overwritten with NaN bytes: structurally fine, but corrupt (its checksum
    # fails; without checksums the non-finite value is refused).
    bad5 = f"{d}/nanvalue"
    shutil.copytree(ck, bad5)
    with open(f"{bad5}/model.safetensors", "r+b") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        f.seek(8 + n + 4 * 10)
        f.write(b"\xff\xff\xff\x7f")
    expect_error([*ev, bad5], ["tok_emb.weight", "corrupt"])
    # Missing optimizer state for --resume.
    bad4 = f"{d}/noopt"
    shutil.copytree(ck, bad4)
    os.remove(f"{bad4}/optimizer.safetensors")
    expect_error(["train", *TINY, "--data", data, "--steps", 2, "--resume", bad4],
                 "optimizer.safetensors")
    # Resume with an incompatible config.
    expect_error(["train", "--device", "cpu", "--preset", "moe-mini", "--data", data, "--steps", 2,
                  "--batch", 2, "--seq", 16, "--resume", ck], "config")


@test
def nan_loss_keeps_last_checkpoint():
    d = work("nan_loss")
    data, good = tiny_checkpoint(d, 2)
    # A learning rate that overflows the weights (to Inf) in the first resumed step: the run
    # must stop with one line naming the step and the last good checkpoint, and write nothing
    # bad (save every step: the non-finite weights are refused; every 5: the next loss is NaN).
    for save_every in [1, 5]:
        expect_error(["train", *TINY, "--data", data, "--steps", 20,
                      "--lr", "1e39", "--clip", 0, "--min-lr", "1e39", "--resume", good,
                      "--out", f"{d}/run", "--save-every", save_every],
                     ["step", "non-finite", "step_000002"])
        assert sorted(os.listdir(f"{d}/run")) == ["step_000002"], os.listdir(f"{d}/run")
    p = run("eval", "--checkpoint", f"{d}/run", "--data", data, "--batch", 2, "--seq", 16,
            "--batches", 1)
    j = last_json(p)
    assert j["loss"] is not None and j["loss"] < 100, j


@test
def kill_during_checkpoint_writing():
    d = work("kill_during_checkpoint")
    data = corpus(d)
    # A model big enough that writing a checkpoint takes a while.
    cfg = {"vocab_size": 256, "d_model": 256, "n_layers": 4, "n_heads": 4, "n_kv_heads": 1,
           "max_seq_len": 64, "d_ff": 1024, "moe": {"n_experts": 8, "top_k": 2}}
    conf = write(f"{d}/big.json", json.dumps(cfg))
    rng = random.Random(1)
    run_dir = f"{d}/run"
    killed_mid_write = 0

    def complete_steps():
        if not os.path.isdir(run_dir):
            return []
        return sorted(x for x in os.listdir(run_dir) if re.fullmatch(r"step_\d{6,}", x))

    for attempt in range(6):
        resume = ["--resume", run_dir] if complete_steps() else []
        argv = [ARGS.moetrain, "train", "--device", "cpu", "--config", conf, "--data", data,
                "--steps", 1000, "--batch", 1, "--seq", 8, "--out", run_dir, "--save-every", 1,
                "--quiet", *resume]
        proc = subprocess.Popen(list(map(str, argv)), stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE)
        # Wait until this process has written a checkpoint of its own, then kill it at a
        # random moment of the following steps (most of which are spent writing checkpoints).
        before = len(complete_steps())
        deadline = time.time() + 120
        while len(complete_steps()) <= before and time.time() < deadline and proc.poll() is None:
            time.sleep(0.05)
        if attempt % 2 == 0:
            # Even attempts: kill while the next checkpoint is being written (its temporary
            # directory exists), after a random part of the write.
            while time.time() < deadline and proc.poll() is None and not any(
                    ".tmp-" in x for x in os.listdir(run_dir)):
                time.sleep(0.002)
            time.sleep(rng.random() * 0.05)
        else:
            time.sleep(rng.random() * 1.5)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        steps = complete_steps()
        others = sorted(set(os.listdir(run_dir)) - set(steps)) if os.path.isdir(run_dir) else []
        killed_mid_write += any(".tmp-" in x for x in others)
        print(f"attempt {attempt}: {len(steps)} checkpoints, newest "
              f"{steps[-1] if steps else None}, other entries {others}")
        for s in steps[-2:]:
            ckpt = f"{run_dir}/{s}"
            assert sorted(os.listdir(ckpt)) == ["model.safetensors", "optimizer.safetensors",
                                                "state.json"], (ckpt, os.listdir(ckpt))
            run("eval", "--checkpoint", ckpt, "--data", data, "--batch", 1, "--seq", 8,
                "--batches", 1)
    assert complete_steps(), "no checkpoint survived"
    assert killed_mid_write > 0, "no kill landed while a checkpoint was being written"
    # The run directory as a whole resolves to a complete checkpoint.
    run("eval", "--checkpoint", f"{d}/run", "--data", data, "--batch", 1, "--seq", 8,
        "--batches", 1)


@test
def bench_and_gradcheck():
    p = run("bench", "--device", "cpu", "--preset", "tiny", "--batch", 2, "--seq", 16,
            "--steps", 2, "--warmup", 1, "--profile")
    j = last_json(p)
    assert set(j) >= {"tokens_per_s", "ms_per_step", "gflops", "mfu", "peak_rss_mb"}, j
    assert j["tokens_per_s"] > 0 and "gemm" in p.stdout
    # The CPU's peak is measured on it (no fixed 500 GFLOP/s), and bench says so.
    assert j["peak_source"] == "measured: 1024^3 f32 GEMM probe" and j["peak_gflops"] > 0, j
    assert "peak " in p.stdout and "(measured: 1024^3 f32 GEMM probe)" in p.stdout, p.stdout
    # --generate N decodes N tokens (a 120-token prompt leaves room for 8 of tiny's 128).
    p = run("bench", "--device", "cpu", "--preset", "tiny", "--batch", 1, "--seq", 120,
            "--generate", 8, "--warmup", 0)
    j = last_json(p)
    assert j["tokens_per_s"] > 0 and j["graph_replayed_steps"] == 0, j
    assert j["bandwidth_source"].startswith("measured: 128 MiB copy probe"), j
    # Given figures are used as they are and named as given.
    p = run("bench", "--device", "cpu", "--preset", "tiny", "--batch", 1, "--seq", 120,
            "--generate", 8, "--warmup", 0, "--peak-gflops", 1000, "--bandwidth-gbs", 50)
    j = last_json(p)
    assert j["peak_gflops"] == 1000 and j["peak_source"] == "given: --peak-gflops", j
    assert j["bandwidth_gbs"] == 50 and j["bandwidth_source"] == "given: --bandwidth-gbs", j
    assert abs(j["bandwidth_bound_tokens_per_s"] * j["weight_mb_per_token"] - 50e3) < 1, j
    g = run("gradcheck", "--device", "cpu", "--preset", "tiny")
    assert "passed" in g.stdout, g.stdout


@test
def recompute_modes():
    """--recompute block / ffn: the same training run (losses, aux/z, gradient norms and expert
    loads bit-identical in the JSON log), less activation memory reported by bench."""
    d = work("recompute_modes")
    data = corpus(d)
    # tiny with a third layer: a dense layer 0 and two MoE layers (ffn mode shares one set).
    cfg = {"vocab_size": 256, "d_model": 64, "n_layers": 3, "n_heads": 4, "n_kv_heads": 2,
           "max_seq_len": 128, "d_ff": 128,
           "moe": {"n_experts": 4, "top_k": 2, "n_shared_experts": 1, "z_loss_alpha": 0.001,
                   "first_layer": 1}}
    model = ["--device", "cpu", "--threads", 1, "--config", write(f"{d}/cfg.json", json.dumps(cfg))]
    keys = ("step", "loss", "ce", "aux", "z", "grad_norm", "expert_load")
    logs = {}
    for mode in ["none", "block", "ffn"]:
        log = f"{d}/{mode}.jsonl"
        p = run("train", *model, "--data", data, "--batch", 4, "--seq", 32, "--steps", 3,
                "--accum", 2, "--lr", "3e-3", "--log-json", log, "--recompute", mode)
        assert (f"recompute {mode}" in p.stdout) == (mode != "none"), p.stdout
        logs[mode] = [{k: r.get(k) for k in keys} for r in read_log(log) if "eval" not in r]
    assert logs["none"] and logs["none"][0]["aux"] > 0 and logs["none"][0]["expert_load"]
    for mode in ["block", "ffn"]:
        assert logs[mode] == logs["none"], f"{mode} differs:\n{logs[mode]}\n{logs['none']}"
    act = {}
    for mode in ["none", "ffn", "block"]:
        p = run("bench", *model, "--batch", 2, "--seq", 32, "--steps", 1, "--warmup", 0,
                "--recompute", mode)
        j = last_json(p)
        assert j["recompute"] == mode and f"activations: recompute {mode}" in p.stdout, p.stdout
        act[mode] = (j["activation_mb"], j["workspace_mb"])
    print("activation MB, workspace MB:", act)
    assert act["block"][0] < act["ffn"][0] < act["none"][0], act
    assert act["block"][1] < act["ffn"][1] < act["none"][1], act
    expect_error(["train", *TINY, "--data", data, "--steps", 1, "--recompute", "layer"],
                 ["recompute", "layer"])


@test
def pytorch_parity():
    """Forward loss of our checkpoints vs an independent PyTorch implementation
    (bench/compare_pytorch.py) for several configs; needs Debian's python3-torch."""
    py = "/usr/bin/python3"
    if subprocess.run([py, "-c", "import torch"], capture_output=True).returncode != 0:
        raise Skip("python3-torch is not installed for /usr/bin/python3 (apt-get install "
                   "python3-torch to run this check)")
    d = work("pytorch_parity")
    data = corpus(d)
    here = os.path.dirname(os.path.abspath(__file__))
    script = os.path.join(here, "..", "..", "bench", "compare_pytorch.py")
    configs = {
        "moe_topk": {"vocab_size": 256, "d_model": 64, "n_layers": 2, "n_heads": 4,
                     "n_kv_heads": 2, "max_seq_len": 64, "d_ff": 128,
                     "moe": {"n_experts": 4, "top_k": 2, "n_shared_experts": 1,
                             "z_loss_alpha": 0.001, "first_layer": 1}},
        "dense_ln": {"vocab_size": 256, "d_model": 48, "n_layers": 2, "n_heads": 4,
                     "n_kv_heads": 4, "max_seq_len": 64, "norm": "layernorm",
                     "pos": "learned", "ffn": "gelu", "d_ff": 96, "bias": True,
                     "tie_embeddings": True},
        "moe_hash": {"vocab_size": 300, "d_model": 32, "n_layers": 3, "n_heads": 4,
                     "max_seq_len": 64, "ffn": "relu", "d_ff": 64, "rope_ntk_alpha": 2.0,
                     "moe": {"n_experts": 5, "router": "hash", "n_shared_experts": 2,
                             "first_layer": 1}},
        "moe_nonorm": {"vocab_size": 256, "d_model": 32, "n_layers": 2, "n_heads": 2,
                       "n_kv_heads": 1, "max_seq_len": 64, "d_ff": 48,
                       "moe": {"n_experts": 6, "top_k": 3, "norm_topk_prob": False,
                               "aux_loss_alpha": 0.1, "z_loss_alpha": 0.01}},
    }
    for name, cfg in configs.items():
        conf = write(f"{d}/{name}.json", json.dumps(cfg))
        full = write(f"{d}/{name}.full.json", run("config", "--config", conf).stdout)
        run("train", "--device", "cpu", "--config", conf, "--data", data, "--steps", 3,
            "--batch", 4, "--seq", 32, "--lr", "3e-3", "--out", f"{d}/{name}", "--quiet")
        ours = last_json(run("eval", "--checkpoint", f"{d}/{name}", "--data", data, "--split",
                             "train", "--batch", 4, "--seq", 32, "--batches", 1))
        p = subprocess.run([py, script, "--config", full, "--checkpoint",
                            f"{d}/{name}/step_000003", "--data", data, "--batch", "4", "--seq",
                            "32"], capture_output=True, text=True, check=True)
        theirs = last_json(p)
        for k in ["loss", "ce", "aux", "z"]:
            assert abs(ours[k] - theirs[k]) <= 1e-5 * max(1.0, abs(theirs[k])), (name, k, ours,
                                                                                theirs)
        print(f"{name}: moetrain {ours['loss']:.7f} pytorch {theirs['loss']:.7f}")



@test
def pytorch_peer_smoke():
    """bench/pytorch_peer_cuda.py (the GPU peer) on the CPU: its sorted-by-expert MoE path with
    one matmul per group trains a MoE config and prints its JSON line; the forms this torch
    lacks (SDPA, torch.compile, _grouped_mm on torch 1.13) are refused with one JSON line and
    exit status 3. Needs Debian's python3-torch."""
    py = "/usr/bin/python3"
    if subprocess.run([py, "-c", "import torch"], capture_output=True).returncode != 0:
        raise Skip("python3-torch is not installed for /usr/bin/python3")
    d = work("pytorch_peer")
    here = os.path.dirname(os.path.abspath(__file__))
    script = os.path.join(here, "..", "..", "bench", "pytorch_peer_cuda.py")
    cfg = {"vocab_size": 256, "d_model": 64, "n_layers": 2, "n_heads": 4, "n_kv_heads": 2,
           "max_seq_len": 64, "d_ff": 128,
           "moe": {"n_experts": 4, "top_k": 2, "n_shared_experts": 1, "first_layer": 1}}
    conf = write(f"{d}/moe.json", json.dumps(cfg))
    full = write(f"{d}/moe.full.json", run("config", "--config", conf).stdout)
    base = [py, script, "--config", full, "--device", "cpu", "--batch", "2", "--seq", "32",
            "--steps", "2", "--warmup", "1", "--precision", "fp32"]
    p = subprocess.run(base + ["--attention", "math"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    out = last_json(p)
    assert out["experts"] == "loop" and out["attention"] == "math", out
    assert out["tokens_per_s"] > 0 and 4.0 < out["loss"] < 7.0, out  # ln(256) = 5.5
    import_torch = "import torch; print(torch.__version__.split('.')[0])"
    major = int(subprocess.run([py, "-c", import_torch], capture_output=True,
                               text=True).stdout.strip())
    refused = [(["--mode", "compile", "--attention", "math"], "torch.compile"),
               (["--experts", "grouped_mm", "--attention", "math"], "_grouped_mm"),
               ([], "scaled_dot_product_attention")]
    for extra, missing in refused if major < 2 else []:  # torch 2 may have any of them
        q = subprocess.run(base + extra, capture_output=True, text=True)
        assert q.returncode == 3 and missing in last_json(q)["unavailable"], (extra, q.stdout)
    print(f"peer on cpu: {out['tokens_per_s']:.0f} tokens/s, loss {out['loss']:.4f}")


if __name__ == "__main__":
    sys.exit(main())
