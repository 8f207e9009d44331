#!/usr/bin/env python3
"""Token shards end to end (stdlib only): `moetrain tokenize` output read by an independent
reader, shards written the way llm.c's scripts write them, exact resume across a shard boundary,
flat resident memory with a 2 GB shard set, and the bad inputs of docs/DATA.md. Registered
with ctest like cli_tests.py:

    data_tests.py --moetrain build/moetrain --work DIR TEST_NAME
"""
import glob
import json
import os
import shutil
import struct
import subprocess
import sys

import cli_tests as cli
from cli_tests import corpus, expect_error, run, work

TESTS = {}
TINY = ["--device", "cpu", "--preset", "tiny", "--threads", "1"]


def test(fn):
    TESTS[fn.__name__] = fn
    return fn


def read_shard(path):
    """An independent reader of llm.c's shard format."""
    with open(path, "rb") as f:
        data = f.read()
    magic, version, count = struct.unpack("<3i", data[:12])
    assert struct.unpack("<256i", data[:1024])[3:] == (0,) * 253, path
    width = {(20240520, 1): 2, (20240801, 7): 4}[(magic, version)]
    assert len(data) == 1024 + count * width, (path, len(data), count)
    return list(struct.unpack(f"<{count}{'H' if width == 2 else 'I'}", data[1024:]))


def write_shard(path, tokens, width=2):
    """A shard as llm.c's dev/data scripts write it (header of 256 int32, then the tokens)."""
    header = [20240520, 1, len(tokens)] if width == 2 else [20240801, 7, len(tokens)]
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", *(header + [0] * 253)))
        f.write(struct.pack(f"<{len(tokens)}{'H' if width == 2 else 'I'}", *tokens))


@test
def tokenize_shards_round_trip():
    d = work("tokenize_round_trip")
    docs = [open(corpus(d, 5000, seed=1), encoding="utf-8").read(), "second document \xe9\n", "x"]
    paths = []
    for i, text in enumerate(docs):
        p = os.path.join(d, f"doc{i}.txt")
        with open(p, "w", encoding="utf-8") as f:
            f.write(text)
        paths.append(p)
    jsonl = os.path.join(d, "more.jsonl")
    with open(jsonl, "w") as f:
        for t in ["json one", "json two \u4e2d"]:
            f.write(json.dumps({"text": t, "id": 1}) + "\n")
    out = os.path.join(d, "shards")
    p = run("tokenize", "--tokenizer", "bytes", "--eot", 0, "--data", os.path.join(d, "doc*.txt"),
            jsonl, "--out", out, "--shard-tokens", 1000, "--val-tokens", 300, "--threads", 2)
    print(p.stdout.strip())
    assert "MB/s" in p.stdout
    want = []
    for text in docs + ["json one", "json two \u4e2d"]:
        want += [0] + list(text.encode("utf-8"))
    names = sorted((n for n in os.listdir(out) if n != ".moetrain-output.json"),
                   key=lambda n: n.split("_")[-1])
    listed = [e["name"] for e in json.load(open(os.path.join(out, ".moetrain-output.json")))["files"]]
    assert sorted(listed) == sorted(names), (listed, names)  # the manifest lists every shard
    assert names[0] == "data_val_000000.bin" and all("_train_" in n for n in names[1:]), names
    got = []
    for n in names:
        tokens = read_shard(os.path.join(out, n))
        assert len(tokens) <= 1000
        got += tokens
    assert got == want, "shards do not hold the documents in order with eot before each"
    assert len(read_shard(os.path.join(out, names[0]))) == 300

    # 32-bit layout when the ids need it (eot 70000 does not fit uint16).
    out32 = os.path.join(d, "shards32")
    run("tokenize", "--tokenizer", "bytes", "--eot", 70000, "--data", paths[2], "--out", out32)
    (only,) = glob.glob(os.path.join(out32, "*.bin"))
    assert read_shard(only) == [70000, ord("x")]
    print("tokenize: shards read back exactly by an independent reader (16 and 32 bit)")


def tiny_with_vocab(d, vocab):
    cfg = json.loads(run("config", "--preset", "tiny").stdout)
    cfg["vocab_size"] = vocab
    path = os.path.join(d, f"tiny{vocab}.json")
    with open(path, "w") as f:
        json.dump(cfg, f)
    return path


def full_equals_resumed(root, name, args, steps, stop_at, other, refusal):
    """Trains `steps` steps in one run and in two (--stop-at, then --resume with nothing but the
    steps): the final weights must be bit-identical. A resume with `other` settings is refused
    with `refusal`. Returns the resumed run's last state.json."""
    full, part = os.path.join(root, name + "_full"), os.path.join(root, name + "_part")
    run("train", *args, "--steps", steps, "--out", full)
    run("train", *args, "--steps", steps, "--stop-at", stop_at, "--out", part)
    expect_error(["train", "--resume", part, "--steps", steps, *other], refusal)
    run("train", "--device", "cpu", "--threads", "1", "--resume", part, "--steps", steps,
        "--out", part)
    last = f"step_{steps:06d}"
    a = open(os.path.join(full, last, "model.safetensors"), "rb").read()
    b = open(os.path.join(part, last, "model.safetensors"), "rb").read()
    assert a == b, f"{name}: resume is not exact"
    return json.load(open(os.path.join(part, last, "state.json")))


@test
def train_from_llmc_style_shards_resumes_exactly():
    root = work("llmc_shards")
    d = os.path.join(root, "shards")
    os.makedirs(d)
    # Shards as llm.c's fineweb.py names them: shard 0 is validation, the rest train; 300
    # tokens per train shard so that 4 x 16 windows cross shard boundaries every few steps.
    text = open(corpus(root, 4000), "rb").read()
    write_shard(os.path.join(d, "fineweb_val_000000.bin"), list(text[:600]))
    for i in range(1, 8):
        write_shard(os.path.join(d, f"fineweb_train_{i:06d}.bin"),
                    list(text[600 + (i - 1) * 300:600 + i * 300]))
    base = TINY + ["--batch", 4, "--seq", 16]
    full = os.path.join(root, "full")
    run("train", *base, "--data", d, "--steps", 12, "--out", full, "--eval-every", 6,
        "--eval-batches", 2)
    part = os.path.join(root, "part")
    run("train", *base, "--data", os.path.join(d, "fineweb_*.bin"), "--steps", 12,
        "--stop-at", 5, "--out", part)
    run("train", "--device", "cpu", "--threads", "1", "--resume", part, "--steps", 12,
        "--out", part)  # data, B, T and tokenizer come from the checkpoint
    a = open(os.path.join(full, "step_000012", "model.safetensors"), "rb").read()
    b = open(os.path.join(part, "step_000012", "model.safetensors"), "rb").read()
    assert a == b, "resume across shard boundaries is not exact"
    state = json.load(open(os.path.join(part, "step_000012", "state.json")))
    assert state["data"]["train_pos"] == 12 * 64, state["data"]  # a global token position
    # --shuffle: a seeded window order per epoch (7 * 300 tokens hold 32 windows of 64: the
    # 40 steps cross an epoch), still exact on resume; a different order is refused.
    state = full_equals_resumed(root, "shuffle", base + ["--data", d, "--shuffle", 7], 40, 35,
                                ["--shuffle", 8], "--shuffle 8 differs")
    assert state["data"]["shuffle"] == 7 and state["data"]["train_pos"] == 40, state["data"]
    # --val-tokens splits train-only shards; the checkpoint keeps it, so a resume without it
    # reads the same train split (30 steps wrap the 1600-token split after 25; the default 10%
    # split would wrap later) and a different one is refused.
    tr = os.path.join(root, "train_only")
    os.makedirs(tr)
    for i in range(1, 8):
        name = f"fineweb_train_{i:06d}.bin"
        shutil.copy(os.path.join(d, name), os.path.join(tr, name))
    state = full_equals_resumed(root, "val_tokens", base + ["--data", tr, "--val-tokens", 500],
                                30, 20, ["--val-tokens", 400],
                                "--val-tokens 400 differs from the checkpoint's 500")
    assert state["data"]["val_tokens"] == 500, state["data"]
    ev = run("eval", "--device", "cpu", "--threads", 1, "--checkpoint", full, "--data", d, "--batch", 4, "--seq", 16,
             "--batches", 2)
    assert json.loads(ev.stdout.strip().splitlines()[-1])["loss"] > 0
    print("llm.c-style shards: 12 steps == 5 steps + resume 7 (bit-identical weights)")


@test
def shard_memory_stays_flat():
    """A 2 GB shard set trains with a peak RSS within 100 MB of a tiny one."""
    d = work("shard_rss")
    big, small = os.path.join(d, "big"), os.path.join(d, "small")
    os.makedirs(big)
    os.makedirs(small)
    block = struct.pack("<256H", *range(256)) * (1 << 11)  # 1 MiB of uint16 tokens 0..255
    per_shard = 256  # MiB
    try:
        for i in range(8):  # 8 x 256 MiB = 2 GiB
            with open(os.path.join(big, f"big_train_{i:06d}.bin"), "wb") as f:
                f.write(struct.pack("<256i", 20240520, 1, per_shard * len(block) // 2,
                                    *([0] * 253)))
                for _ in range(per_shard):
                    f.write(block)
        write_shard(os.path.join(small, "small_train_000000.bin"), list(range(256)) * 40)

        def peak_rss_mb(data):
            argv = [cli.ARGS.moetrain, "train", *map(str, TINY), "--batch", "8", "--seq", "64",
                    "--steps", "4", "--eval-every", "2", "--eval-batches", "2", "--data", data]
            proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            _, status, usage = os.wait4(proc.pid, 0)
            out = proc.stdout.read().decode()
            assert os.waitstatus_to_exitcode(status) == 0, (out, proc.stderr.read())
            return usage.ru_maxrss / 1024

        size = sum(os.path.getsize(p) for p in glob.glob(os.path.join(big, "*"))) / 2**30
        rss_big, rss_small = peak_rss_mb(big), peak_rss_mb(small)
        print(f"peak RSS: {size:.2f} GiB shard set {rss_big:.1f} MB, tiny shard {rss_small:.1f} MB")
        assert size >= 2.0
        assert rss_big - rss_small < 100, (rss_big, rss_small)
    finally:
        shutil.rmtree(big, ignore_errors=True)


@test
def shard_bad_inputs():
    d = work("shard_bad")
    base = TINY + ["--batch", 2, "--seq", 8, "--steps", 1]
    good = list(range(200)) * 3
    bad_id = os.path.join(d, "badid")
    os.makedirs(bad_id)
    write_shard(os.path.join(bad_id, "x_train_000000.bin"), good[:10] + [300] + good[10:])
    expect_error(["train", *base, "--data", bad_id],
                 ["x_train_000000.bin", "token 300 at offset 10", "vocab_size 256"])

    trunc = os.path.join(d, "trunc.bin")
    write_shard(trunc, good)
    with open(trunc, "r+b") as f:
        f.truncate(1024 + 2 * len(good) - 7)
    expect_error(["train", *base, "--data", trunc], ["trunc.bin", "truncated"])
    short_header = os.path.join(d, "short.bin")
    with open(short_header, "wb") as f:
        f.write(struct.pack("<3i", 20240520, 1, 0))
    expect_error(["train", *base, "--data", short_header], ["short.bin", "truncated header"])

    magic = os.path.join(d, "magic")
    os.makedirs(magic)
    with open(os.path.join(magic, "m_train_000000.bin"), "wb") as f:
        f.write(struct.pack("<256i", 12345, 1, 0, *([0] * 253)))
    expect_error(["train", *base, "--data", magic], ["m_train_000000.bin", "not a token shard"])
    version = os.path.join(d, "version.bin")
    with open(version, "wb") as f:
        f.write(struct.pack("<256i", 20240520, 3, 0, *([0] * 253)))
    expect_error(["train", *base, "--data", os.path.join(d, "vers*.bin")],
                 ["version.bin", "version 3"])

    expect_error(["train", *base, "--data", os.path.join(d, "nothing_*.bin")],
                 "matches no files")
    expect_error(["tokenize", "--tokenizer", "bytes", "--eot", 0, "--data",
                  os.path.join(d, "nothing_*.txt"), "--out", os.path.join(d, "o1")],
                 "matches no files")
    empty = os.path.join(d, "empty.txt")
    open(empty, "w").close()
    out = os.path.join(d, "o2")
    expect_error(["tokenize", "--tokenizer", "bytes", "--eot", 0, "--data", empty, "--out", out],
                 "empty corpus")
    assert not glob.glob(os.path.join(out, "*")), "a failed tokenize left files behind"
    expect_error(["tokenize", "--tokenizer", "bytes", "--data", empty, "--out", out],
                 "--eot")
    bad_jsonl = os.path.join(d, "bad.jsonl")
    with open(bad_jsonl, "w") as f:
        f.write('{"text": "ok"}\n{"txt": 1}\n')
    expect_error(["tokenize", "--tokenizer", "bytes", "--eot", 0, "--data", bad_jsonl, "--out",
                  out], ["bad.jsonl line 2", "text"])
    assert not glob.glob(os.path.join(out, "*")), "a failed tokenize left files behind"

    # A tokenizer whose vocabulary is larger than the model's.
    big_vocab = os.path.join(d, "big.tiktoken")
    import base64
    with open(big_vocab, "w") as f:
        for b in range(256):
            f.write(f"{base64.b64encode(bytes([b])).decode()} {b}\n")
        f.write(f"{base64.b64encode(b'ab').decode()} 256\n")
    text = corpus(d, 2000)
    expect_error(["train", *base, "--data", text, "--tokenizer", big_vocab,
                  "--tokenizer-pattern", "gpt2"], ["needs \"vocab_size\" >= 258", "has 256"])


def small_tiktoken(path):
    """A rank file: the 256 bytes and a few merges of common English pairs."""
    import base64
    merges = [b"th", b"he", b"the", b"in", b"an", b"and", b" t", b" the", b"er", b"ng", b"ing"]
    with open(path, "w") as f:
        for r, tok in enumerate([bytes([b]) for b in range(256)] + merges):
            f.write(f"{base64.b64encode(tok).decode()} {r}\n")
    return 256 + len(merges) + 1  # + <|endoftext|>


@test
def tokenizer_travels_with_checkpoint():
    import hashlib
    d = work("tokenizer_travels")
    tok = os.path.join(d, "mine.tiktoken")
    vocab = small_tiktoken(tok)
    cfg = tiny_with_vocab(d, vocab)
    data = corpus(d, 20000)
    base = ["--device", "cpu", "--threads", 1, "--config", cfg, "--batch", 4, "--seq", 16]
    run("train", *base, "--data", data, "--tokenizer", tok, "--tokenizer-pattern", "gpt2",
        "--steps", 6, "--out", os.path.join(d, "full"))
    part = os.path.join(d, "part")
    run("train", *base, "--data", data, "--tokenizer", tok, "--tokenizer-pattern", "gpt2",
        "--steps", 6, "--stop-at", 3, "--out", part)
    ckpt = os.path.join(part, "step_000003")
    state = json.load(open(os.path.join(ckpt, "state.json")))
    want = hashlib.sha256(open(tok, "rb").read()).hexdigest()
    assert state["data"]["tokenizer_sha256"] == want, state["data"]
    assert open(os.path.join(ckpt, "tokenizer.tiktoken"), "rb").read() == open(tok, "rb").read()
    expect_error(["train", "--resume", part, "--steps", 6, "--tokenizer", "bytes"],
                 ["not the tokenizer", "mine.tiktoken"])
    os.rename(tok, tok + ".moved")  # from here on only the checkpoint's copy exists
    run("train", "--device", "cpu", "--threads", 1, "--resume", part, "--steps", 6, "--out", part)
    a = open(os.path.join(d, "full", "step_000006", "model.safetensors"), "rb").read()
    b = open(os.path.join(part, "step_000006", "model.safetensors"), "rb").read()
    assert a == b, "resume with the checkpoint's tokenizer is not exact"
    g = run("generate", "--device", "cpu", "--threads", 1, "--checkpoint", part, "--prompt",
            "the king", "--max-new", 5, "--json")
    j = json.loads(g.stdout)
    assert len(j["tokens"]) == 5 and max(j["tokens"]) < vocab, j
    ev = run("eval", "--device", "cpu", "--threads", 1, "--checkpoint", part, "--data", data,
             "--batch", 4, "--seq", 16, "--batches", 2)
    assert json.loads(ev.stdout.strip().splitlines()[-1])["tokens"] == 128
    copy = os.path.join(part, "step_000006", "tokenizer.tiktoken")
    with open(copy, "a") as f:
        f.write("eA== 999\n")
    expect_error(["generate", "--checkpoint", part, "--max-new", 2],
                 ["tokenizer.tiktoken", "SHA-256"])


if __name__ == "__main__":
    cli.TESTS.clear()
    cli.TESTS.update(TESTS)
    sys.exit(cli.main())
