#!/usr/bin/env python3
"""Bounded reads and inputs that change underneath (docs/RELIABILITY.md, issue 27 sections 2
and 5), stdlib only: every file a command reads goes through one reader, so a FIFO with no
writer, a link to /dev/zero and a file above its kind's limit end in one line naming the file
(and the limit) at once, for every reader of every command; `import` checks every tensor's
shape against config.json from the safetensors headers before it allocates the model; a shard
truncated while `train` reads it ends in one line, not SIGBUS. Registered with ctest as
`reads:CASE`:

    bounded_read_tests.py --moetrain build/moetrain --work DIR CASE
"""
import json
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import cli_testlib  # noqa: E402
from cli_testlib import ARGS, expect_error, main, run, test, work, write  # noqa: E402

TINY = ["--device", "cpu", "--preset", "tiny", "--batch", "2", "--seq", "16", "--threads", "1"]
# A hang is the failure these cases look for: a refused input must fail well within this.
QUICK = 60

LLAMA = dict(vocab_size=260, d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, max_seq_len=32,
             norm="rmsnorm", pos="rope", ffn="swiglu", d_ff=48, bias=False)


def refused(argv, *words):
    return expect_error(argv, *words, timeout=QUICK)


def fifo(path):
    os.mkfifo(path)
    return path


def sparse(path, size, head=b""):
    """A file of `size` bytes that takes no disk space: `head`, then a hole."""
    with open(path, "wb") as f:
        f.write(head)
        f.truncate(size)
    return path


def tokenizer_json(d):
    """A real tokenizer.json (trained on the test corpus) whose ids fit LLAMA's vocabulary."""
    out = os.path.join(d, "tok.json")
    run("tokenizer", "train", "--data", cli_testlib.corpus(d, 20000), "--vocab-size",
        LLAMA["vocab_size"], "--out", out, "--threads", 1)
    return out


def llama_run(d, steps, *extra):
    """d/run: `steps` steps of a small llama-like model."""
    cfg = write(os.path.join(d, "cfg.json"), json.dumps(LLAMA))
    run("train", "--config", cfg, "--data", cli_testlib.corpus(d, 4000), "--steps", steps,
        "--batch", 1, "--seq", 8, "--threads", 1, "--out", f"{d}/run", "--quiet", *extra)
    return f"{d}/run/step_{steps:06d}"


def hf_dir(d):
    """A transformers model directory exported from a fresh llama-like checkpoint."""
    llama_run(d, 0)
    out = f"{d}/hf"
    run("export", "--checkpoint", f"{d}/run/step_000000", "--format", "hf", "--out", out)
    return out


def import_refused(src, *words):
    ck = os.path.join(os.path.dirname(src), "imported")
    refused(["import", "--from", src, "--out", ck], *words)
    assert not os.path.exists(ck), "a refused import left a checkpoint"


def bad_inputs(d, kind):
    """(name, path, words) of the hostile files of one kind: a FIFO with no writer, a link to
    /dev/zero (with the extension the command expects) and, for kinds with a limit, a sparse
    file just above it."""
    ext = {"tokenizer": ".json", "config": ".json", "text": ".txt", "log": ".jsonl"}[kind]
    out = [("fifo", fifo(f"{d}/{kind}-fifo{ext}"), "not a regular file")]
    os.symlink("/dev/zero", f"{d}/{kind}-zero{ext}")
    out.append(("zero", f"{d}/{kind}-zero{ext}", "not a regular file"))
    limit = {"tokenizer": 64 << 20, "config": 64 << 20, "text": 1 << 30, "log": 16 << 30}[kind]
    big = sparse(f"{d}/{kind}-big{ext}", limit + 1)
    text = f"{limit >> 30} GiB" if limit >= 1 << 30 else f"{limit >> 20} MiB"
    out.append(("big", big, ["more than the limit of " + text]))
    return out


# ---- every reader of every command ---------------------------------------------------

@test
def config_files_are_bounded():
    d = work("config_files")
    data = cli_testlib.corpus(d, 4000)
    for _, path, words in bad_inputs(d, "config"):
        refused(["config", "--config", path], path, "config file", words)
        refused(["plan", "--config", path, "--batch", 1, "--seq", 8], path, words)
        refused(["train", "--config", path, "--data", data, "--steps", 1], path, words)


@test
def tokenizer_files_are_bounded():
    d = work("tokenizer_files")
    data = cli_testlib.corpus(d, 4000)
    text = write(f"{d}/in.txt", "hello")
    for _, path, words in bad_inputs(d, "tokenizer"):
        refused(["train", *TINY, "--data", data, "--tokenizer", path, "--steps", 1], path,
                "tokenizer file", words)
        for sub in (["info"], ["encode", text], ["decode", text], ["bench", text]):
            refused(["tokenizer", sub[0], "--tokenizer", path, *sub[1:]], path, words)
        refused(["tokenize", "--data", data, "--tokenizer", path, "--out", f"{d}/shards"], path,
                words)
    # The other kinds of tokenizer file go through the same reader.
    for ext in (".tiktoken", ".model"):
        p = fifo(f"{d}/fifo{ext}")
        refused(["tokenizer", "info", "--tokenizer", p], p, "not a regular file")
        os.symlink("/dev/zero", f"{d}/zero{ext}")
        refused(["tokenizer", "info", "--tokenizer", f"{d}/zero{ext}"], "not a regular file")


@test
def data_files_are_bounded():
    d = work("data_files")
    for name, path, words in bad_inputs(d, "text"):
        refused(["train", *TINY, "--data", path, "--steps", 1], path, words)
        refused(["tokenizer", "train", "--data", path, "--vocab-size", 300, "--out",
                 f"{d}/t.json"], path, words)
        if name == "big":
            continue  # tokenize and bench read text in pieces: no size limit
        refused(["tokenize", "--data", path, "--eot", 0, "--out", f"{d}/shards"], path, words)
        refused(["tokenizer", "bench", "--tokenizer", "bytes", path], path, words)
    # A FIFO among the files of a data directory is refused, not waited on.
    os.makedirs(f"{d}/dir")
    cli_testlib.corpus(f"{d}/dir", 4000)
    fifo(f"{d}/dir/zz.txt")
    refused(["tokenize", "--data", f"{d}/dir", "--eot", 0, "--out", f"{d}/shards2"], "zz.txt",
            "not a regular file")


@test
def encode_decode_inputs_are_bounded():
    d = work("encode_decode_inputs")
    for _, path, words in bad_inputs(d, "text"):
        for sub in ("encode", "decode"):
            refused(["tokenizer", sub, "--tokenizer", "bytes", path], path, "input file", words)


@test
def report_logs_are_bounded():
    d = work("report_logs")
    data = cli_testlib.corpus(d, 20000)
    run("train", *TINY, "--data", data, "--steps", 2, "--out", f"{d}/run", "--log-json",
        f"{d}/run/log.jsonl", "--quiet")
    for _, path, words in bad_inputs(d, "log"):
        refused(["report", f"{d}/run", "--log", path, "--out", f"{d}/r.html"], path,
                "training log", words)
    # A log that is one endless line (no newline) is refused from its first 64 MiB.
    line = sparse(f"{d}/line.jsonl", (64 << 20) + (2 << 20), b"{")
    refused(["report", f"{d}/run", "--log", line, "--out", f"{d}/r.html"], line,
            "line 1 is longer than 64 MiB")


@test
def checkpoint_files_are_bounded():
    d = work("checkpoint_files")
    ck = llama_run(d, 1, "--tokenizer", tokenizer_json(d))
    for name in ("state.json", "tokenizer.json"):
        os.replace(f"{ck}/{name}", f"{d}/{name}.saved")
        fifo(f"{ck}/{name}")
        # A checkpoint's directory check already says a state.json that is no file is missing.
        words = [name] if name == "state.json" else [f"{ck}/{name}", "not a regular file"]
        for argv in (["verify", ck], ["generate", "--checkpoint", ck, "--max-new", 2],
                     ["export", "--checkpoint", ck, "--format", "hf", "--out", f"{d}/hf"]):
            refused(argv, *words)
        os.remove(f"{ck}/{name}")
        os.replace(f"{d}/{name}.saved", f"{ck}/{name}")
    run("verify", ck)


# ---- import ----------------------------------------------------------------------------

@test
def import_files_are_bounded():
    d = work("import_files")
    src = hf_dir(d)
    tok = tokenizer_json(d)
    for name in ("config.json", "model.safetensors.index.json", "tokenizer.json",
                 "model.safetensors"):
        path = f"{src}/{name}"
        saved = f"{d}/{name}.saved"
        if os.path.exists(path):
            os.replace(path, saved)
        cases = [("fifo", "not a regular file"), ("zero", "not a regular file")]
        if name != "model.safetensors":  # weights are read tensor by tensor: no size limit
            cases.append(("big", "more than the limit of 64 MiB"))
        for how, words in cases:
            if how == "fifo":
                fifo(path)
            elif how == "zero":
                os.symlink("/dev/zero", path)
            else:
                sparse(path, (64 << 20) + 1, b"{")
            import_refused(src, path, words)
            os.remove(path)
        if os.path.exists(saved):
            os.replace(saved, path)
    # With every file back, and a real tokenizer.json beside the weights, the import works.
    os.replace(tok, f"{src}/tokenizer.json")
    run("import", "--from", src, "--out", f"{d}/ok")


def import_rss_kb(src, out):
    """(exit status, stderr, peak RSS in KiB) of `moetrain import` as a child of its own."""
    err_path = out + ".stderr"
    with open(err_path, "w") as err:
        p = subprocess.Popen([ARGS.moetrain, "import", "--from", src, "--out", out],
                             stdout=subprocess.DEVNULL, stderr=err)
        deadline = time.time() + QUICK
        while True:
            pid, status, usage = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            if time.time() > deadline:
                p.kill()
                raise AssertionError("import did not finish")
            time.sleep(0.02)
    p.returncode = os.waitstatus_to_exitcode(status)
    with open(err_path) as f:
        return p.returncode, f.read(), usage.ru_maxrss


@test
def import_checks_shapes_before_allocating():
    d = work("import_shapes")
    src = hf_dir(d)
    with open(f"{src}/config.json") as f:
        cfg = json.load(f)
    # Claims that the files do not hold, from 1 GB to 260 GB of fp32 weights: each fails
    # naming the first mismatch, with the memory of a few headers.
    claims = [
        (dict(vocab_size=8_000_000), "model.embed_tokens.weight"),
        (dict(vocab_size=2_000_000, hidden_size=8192, intermediate_size=32768,
              num_attention_heads=64, num_key_value_heads=8), "model.embed_tokens.weight"),
        (dict(num_hidden_layers=1000, intermediate_size=4_000_000), "mlp.gate_proj.weight"),
    ]
    for edit, words in claims:
        with open(f"{src}/config.json", "w") as f:
            json.dump(dict(cfg, **edit), f)
        out = f"{d}/ck"
        code, err, rss = import_rss_kb(src, out)
        lines = err.strip().splitlines()
        assert 0 < code < 128 and len(lines) == 1, (code, err)
        assert "has shape" in lines[0] and "config.json implies" in lines[0], lines[0]
        assert words in lines[0], lines[0]
        assert rss < 300 * 1024, f"import reached {rss} KiB before refusing: {lines[0]}"
        assert not os.path.exists(out)
        print(f"ok: {edit} -> {lines[0][:160]} (peak RSS {rss} KiB)")
    # More layers than the files hold: the first missing tensor is named, nothing allocated.
    with open(f"{src}/config.json", "w") as f:
        json.dump(dict(cfg, num_hidden_layers=1024), f)
    code, err, rss = import_rss_kb(src, f"{d}/ck")
    assert 0 < code < 128 and "has no tensor" in err and "model.layers.2." in err, err
    assert rss < 300 * 1024, rss


# ---- files that change under a running job ---------------------------------------------

@test
def shard_truncated_under_train_is_one_line():
    d = work("shard_truncated")
    data = cli_testlib.corpus(d, 200000)
    run("tokenize", "--data", data, "--eot", 0, "--out", f"{d}/shards", "--val-tokens", 0,
        "--threads", 1)
    shards = sorted(n for n in os.listdir(f"{d}/shards") if n.endswith(".bin"))
    assert len(shards) == 1, shards
    shard = f"{d}/shards/{shards[0]}"
    log = f"{d}/log.jsonl"
    argv = ["train", *TINY, "--data", f"{d}/shards", "--steps", 100000, "--val-tokens", 1000,
            "--log-json", log, "--out", f"{d}/run"]
    p = subprocess.Popen([ARGS.moetrain, *map(str, argv)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 300
        while not (os.path.exists(log) and os.path.getsize(log) > 0):
            assert p.poll() is None and time.time() < deadline, p.communicate()
            time.sleep(0.02)
        # The header and a few tokens stay: every later window lies beyond the end.
        os.truncate(shard, 1024 + 64)
        out, err = p.communicate(timeout=QUICK)
    finally:
        if p.poll() is None:
            p.send_signal(signal.SIGKILL)
    lines = err.strip().splitlines()
    assert p.returncode != -signal.SIGBUS and p.returncode != 128 + signal.SIGBUS, p.returncode
    assert 0 < p.returncode < 128, (p.returncode, err)
    assert len(lines) == 1 and lines[0].startswith("moetrain: error: "), err
    assert shard in lines[0] and "changed while being read" in lines[0], lines[0]
    print(f"ok: truncated under train -> {lines[0]}")


if __name__ == "__main__":
    sys.exit(main())
