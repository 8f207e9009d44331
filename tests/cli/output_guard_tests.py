#!/usr/bin/env python3
"""No output can destroy anything (issue 27, section 1): every command that writes resolves its
output paths (`..` against the real parent, links followed) before any check, refuses an output
that is, contains or lies inside one of its inputs, a checkpoint or another run's directory,
and deletes only files that its own manifest lists. Stdlib only; registered with ctest as
`outputs:*`:

    output_guard_tests.py --moetrain build/moetrain --work DIR TEST_NAME
"""
import glob
import hashlib
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import cli_testlib  # noqa: E402
from cli_testlib import expect_error, main, run, test, work, write  # noqa: E402

TINY = ["--device", "cpu", "--preset", "tiny", "--batch", "2", "--seq", "16", "--threads", "1"]
LLAMA = dict(vocab_size=260, d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, max_seq_len=32,
             norm="rmsnorm", pos="rope", ffn="swiglu", d_ff=48, bias=False)
MANIFEST = ".moetrain-output.json"


def digest(d):
    """sha256 of every file under d (or of the file d), by relative path, links not followed."""
    if os.path.isfile(d):
        with open(d, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    out = {}
    for root, dirs, files in os.walk(d):
        for f in files + [x for x in dirs if os.path.islink(os.path.join(root, x))]:
            p = os.path.join(root, f)
            if os.path.islink(p):
                out[os.path.relpath(p, d)] = "link:" + os.readlink(p)
                continue
            with open(p, "rb") as fh:
                out[os.path.relpath(p, d)] = hashlib.sha256(fh.read()).hexdigest()
    return out


class Unchanged:
    """`with Unchanged(path, ...):` asserts that the files under each path are the same after."""

    def __init__(self, *paths):
        self.paths = paths

    def __enter__(self):
        self.before = [digest(p) for p in self.paths]

    def __exit__(self, *exc):
        if exc[0] is None:
            for p, b in zip(self.paths, self.before):
                assert digest(p) == b, f"{p} changed"


def corpus(d):
    return cli_testlib.corpus(d, 20000)


def small_run(d, name="run", steps=2):
    """A training run directory with checkpoints and its log, and the corpus it read."""
    data = corpus(d)
    run_dir = os.path.join(d, name)
    run("train", *TINY, "--data", data, "--steps", steps, "--save-every", 1, "--out", run_dir,
        "--log-json", os.path.join(run_dir, "log.jsonl"), "--quiet")
    return data, run_dir


def hf_checkpoint(d):
    """A step_000000 checkpoint of a Llama-shaped model that `export` accepts."""
    cfg = os.path.join(d, "cfg.json")
    with open(cfg, "w") as f:
        json.dump(LLAMA, f)
    data = write(os.path.join(d, "hf_corpus.txt"), "the king and the queen spoke. " * 200)
    run("train", "--config", cfg, "--data", data, "--steps", 0, "--batch", 1, "--seq", 8,
        "--threads", 1, "--out", os.path.join(d, "ckrun"))
    return os.path.join(d, "ckrun", "step_000000")


def export(ck, out, ok=True):
    return run("export", "--checkpoint", ck, "--format", "hf", "--out", out, ok=ok)


# ---- resolution: MISSING/../EXISTING is EXISTING ----------------------------------------

@test
def dotdot_through_missing_dir_is_resolved_for_every_command():
    d = work("dotdot")
    data, run_dir = small_run(d)
    other = os.path.join(d, "other")
    os.makedirs(other)
    write(os.path.join(other, "thesis.txt"), "precious")
    ck = hf_checkpoint(d)
    with Unchanged(run_dir, other, data):
        # train: another run's step_000002 is not replaced through a missing directory.
        expect_error(["train", *TINY, "--data", data, "--steps", 2,
                      "--out", f"{d}/missing/../run"], ["already holds", "step_00000"])
        # export / import: a foreign directory is not emptied.
        expect_error(["export", "--checkpoint", ck, "--format", "hf",
                      "--out", f"{d}/missing/../other"], "thesis.txt")
        expect_error(["import", "--from", f"{d}/other", "--out", f"{d}/missing2/../run"],
                     "run")
        # tokenizer train / report / tokenize / train --log-json onto an input.
        expect_error(["tokenizer", "train", "--data", data, "--vocab-size", 300,
                      "--out", f"{d}/missing/../corpus.txt"], ["--data", "is the input"])
        expect_error(["report", run_dir, "--out", f"{d}/missing/../run/log.jsonl"],
                     ["is the input", "log.jsonl"])
        expect_error(["tokenize", "--tokenizer", "bytes", "--eot", 0, "--data", data,
                      "--out", f"{d}/missing/../other"], "thesis.txt")
        expect_error(["train", *TINY, "--data", data, "--steps", 1,
                      "--log-json", f"{d}/missing/../corpus.txt"], "--data")
    for m in ["missing", "missing2"]:
        assert not os.path.exists(os.path.join(d, m)), f"a refused command made {m}"


# ---- outputs over inputs, per command --------------------------------------------------

@test
def tokenizer_train_never_overwrites_its_corpus():
    d = work("tok_train_corpus")
    data = corpus(d)
    os.symlink(data, f"{d}/alias.json")
    with Unchanged(data):
        expect_error(["tokenizer", "train", "--data", data, "--vocab-size", 300, "--out", data],
                     ["--out", "is the input", "--data"])
        expect_error(["tokenizer", "train", "--data", data, "--vocab-size", 300,
                      "--out", f"{d}/alias.json"], "is the input")
        expect_error(["tokenizer", "train", "--data", f"{d}/*.txt", "--vocab-size", 300,
                      "--out", data], "is the input")
        expect_error(["tokenizer", "train", "--data", d, "--vocab-size", 300,
                      "--out", f"{d}/tok.json"], "lies inside the input")
    run("tokenizer", "train", "--data", data, "--vocab-size", 300, "--out", f"{d}/new/tok.json")
    assert os.path.isfile(f"{d}/new/tok.json")


@test
def report_never_overwrites_the_run_it_reads():
    d = work("report_inputs")
    _, run_dir = small_run(d)
    os.symlink(f"{run_dir}/log.jsonl", f"{d}/link.html")
    os.symlink(f"{run_dir}/step_000002/new.html", f"{d}/dangling.html")
    with Unchanged(run_dir):
        expect_error(["report", run_dir, "--out", f"{run_dir}/log.jsonl"],
                     ["is the input", "--log"])
        expect_error(["report", run_dir, "--out", f"{run_dir}/step_000001/state.json"],
                     "checkpoint")
        expect_error(["report", run_dir, "--out", f"{run_dir}/step_000002/state.json"],
                     "checkpoint")
        expect_error(["report", run_dir, "--out", f"{d}/link.html"], "is the input")
        expect_error(["report", run_dir, "--out", f"{d}/dangling.html"], "checkpoint")
        expect_error(["report", run_dir, "--out", run_dir], "contains the input")
    # Its temporary file is made exclusively: a link planted at the old fixed name or at
    # another process's temporary name is never followed.
    victim = write(f"{d}/victim.txt", "precious")
    os.symlink(victim, f"{d}/r.html.tmp")
    os.symlink(victim, f"{d}/r.html.tmp-1")
    run("report", run_dir, "--out", f"{d}/r.html")
    assert open(victim).read() == "precious"
    assert "<html" in open(f"{d}/r.html").read()
    # A report inside the run directory (not in a checkpoint) is fine.
    run("report", run_dir, "--out", f"{run_dir}/report.html")


@test
def train_outputs_never_overwrite_its_inputs():
    d = work("train_inputs")
    data = corpus(d)
    tok = f"{d}/tok.json"
    run("tokenizer", "train", "--data", data, "--vocab-size", 300, "--special", "<|endoftext|>",
        "--out", tok)
    conf = write(f"{d}/model.json", run("config", "--preset", "tiny").stdout)
    _, run_dir = small_run(d, "prev")
    common = ["--device", "cpu", "--batch", "2", "--seq", "16", "--threads", "1", "--steps", 1,
              "--data", data]
    with Unchanged(tok, conf, data, run_dir):
        expect_error(["train", *common, "--preset", "tiny", "--tokenizer", tok,
                      "--log-json", tok], ["--log-json", "--tokenizer"])
        os.symlink(tok, f"{d}/tok_link.jsonl")
        expect_error(["train", *common, "--preset", "tiny", "--tokenizer", tok,
                      "--log-json", f"{d}/tok_link.jsonl"], "--tokenizer")
        expect_error(["train", *common, "--config", conf, "--log-json", conf], "--config")
        expect_error(["train", *common, "--preset", "tiny", "--tensorboard", data], "--data")
        expect_error(["train", *common, "--preset", "tiny", "--out", f"{d}/corpus.txt/x"],
                     "--data")
        # A log inside another run's checkpoint, a run directory inside a checkpoint.
        expect_error(["train", *common, "--preset", "tiny",
                      "--log-json", f"{run_dir}/step_000002/log.jsonl"], "checkpoint")
        expect_error(["train", *common, "--preset", "tiny",
                      "--out", f"{run_dir}/step_000002/run"], "checkpoint")
        expect_error(["train", *common, "--preset", "tiny",
                      "--tensorboard", f"{run_dir}/step_000001"], "checkpoint")
        # The resumed checkpoint is an input of --log-json.
        expect_error(["train", *common, "--resume", run_dir, "--out", f"{d}/r2",
                      "--log-json", f"{run_dir}/step_000002/model.safetensors"], "--resume")


@test
def export_deletes_only_what_its_manifest_lists():
    d = work("export_manifest")
    ck = hf_checkpoint(d)
    out = f"{d}/hf"
    export(ck, out)
    assert os.path.isfile(f"{out}/{MANIFEST}")
    listed = {e["name"] for e in json.load(open(f"{out}/{MANIFEST}"))["files"]}
    assert listed == set(os.listdir(out)) - {MANIFEST}, (listed, os.listdir(out))
    # A second export replaces the first and says so.
    p = export(ck, out)
    assert "replaced the earlier export" in p.stdout, p.stdout
    # A user's file beside the export, a file changed since, a directory: refused, kept.
    for name, make in [("model-original-fp32.safetensors", "file"),
                       ("tokenizer.json", "file"),
                       ("model_backup.safetensors", "dir"),
                       ("config.json", "changed")]:
        path = os.path.join(out, name)
        if make == "dir":
            os.makedirs(path)
            write(os.path.join(path, "keep.txt"), "mine")
        elif make == "changed":
            keep = open(path).read()
            write(path, keep.replace("{", "{\"mine\": 1, ", 1))
        else:
            write(path, "mine")
        with Unchanged(out):
            expect_error(["export", "--checkpoint", ck, "--format", "hf", "--out", out], name)
        if make == "dir":
            os.remove(os.path.join(path, "keep.txt"))
            os.rmdir(path)
        elif make == "changed":
            write(path, keep)
        else:
            os.remove(path)
    export(ck, out)
    # A directory without a manifest holding only names an export would write is not ours.
    bare = f"{d}/bare"
    os.makedirs(bare)
    write(f"{bare}/config.json", "{}")
    with Unchanged(bare):
        expect_error(["export", "--checkpoint", ck, "--format", "hf", "--out", bare],
                     "config.json")
    # The checkpoint itself, a directory inside it, a link to it, its run directory.
    os.symlink(ck, f"{d}/ck_link")
    with Unchanged(f"{d}/ckrun"):
        for o in [ck, f"{ck}/hf", f"{d}/ck_link", f"{d}/ckrun"]:
            expect_error(["export", "--checkpoint", ck, "--format", "hf", "--out", o],
                         "--out")


@test
def import_never_writes_over_its_source_or_a_run():
    d = work("import_outputs")
    ck = hf_checkpoint(d)
    hf = f"{d}/hf"
    export(ck, hf)
    with Unchanged(hf, f"{d}/ckrun"):
        expect_error(["import", "--from", hf, "--out", hf], "is the input")
        expect_error(["import", "--from", hf, "--out", f"{hf}/ck"], "lies inside the input")
        expect_error(["import", "--from", hf, "--out", d], "contains the input")
        expect_error(["import", "--from", hf, "--out", f"{ck}/sub"], "checkpoint")
        expect_error(["import", "--from", hf, "--out", f"{d}/missing/../ckrun"], "--out")
    run("import", "--from", hf, "--out", f"{d}/imported")


@test
def tokenize_replaces_only_its_own_earlier_output():
    d = work("tokenize_out")
    data = corpus(d)
    out = f"{d}/shards"
    base = ["tokenize", "--tokenizer", "bytes", "--eot", 0, "--quiet"]
    run(*base, "--data", data, "--out", out, "--shard-tokens", 3000)
    first = sorted(glob.glob(f"{out}/*.bin"))
    assert len(first) > 3, first
    m = json.load(open(f"{out}/{MANIFEST}"))
    assert m["complete"] and {e["name"] for e in m["files"]} == {os.path.basename(f)
                                                                  for f in first}
    # Another corpus into the same --out: the earlier shards go, with a line saying so.
    small = write(f"{d}/small.txt", "a short corpus. " * 100)
    p = run(*base, "--data", small, "--out", out)
    assert "replaces" in p.stdout and "different-settings" in p.stdout, p.stdout
    now = sorted(glob.glob(f"{out}/*.bin"))
    assert [os.path.basename(f) for f in now] == ["data_train_000000.bin"], now
    # train then sees only the new corpus's tokens.
    size = os.path.getsize(now[0])
    assert size < 7000, size  # one shard of the small corpus, not 3000 tokens of the first
    # A file that is not its own output: refused, nothing deleted.
    write(f"{out}/notes.txt", "mine")
    with Unchanged(out):
        expect_error([*base, "--data", small, "--out", out], "notes.txt")
    os.remove(f"{out}/notes.txt")
    # A shard changed since it was written is not deleted either.
    with open(now[0], "ab") as f:
        f.write(b"\0\0")
    with Unchanged(out):
        expect_error([*base, "--data", small, "--out", out], ["data_train_000000.bin",
                                                               "changed"])
    # A directory that holds shards but no manifest (another tool's, or older) is refused.
    other = f"{d}/other"
    os.makedirs(other)
    write(f"{other}/data_train_000000.bin", "x" * 100)
    with Unchanged(other):
        expect_error([*base, "--data", small, "--out", other], "data_train_000000.bin")
    # A prefix may not leave --out.
    expect_error([*base, "--data", small, "--out", f"{d}/p", "--prefix", "../escape"],
                 "--prefix")


@test
def tokenize_never_writes_into_its_data():
    d = work("tokenize_data")
    texts = os.path.join(d, "texts")
    os.makedirs(texts)
    write(f"{texts}/a.txt", "some text. " * 200)
    base = ["tokenize", "--tokenizer", "bytes", "--eot", 0, "--quiet"]
    os.symlink(texts, f"{d}/texts_link")
    with Unchanged(texts):
        expect_error([*base, "--data", texts, "--out", texts], ["is the input", "--data"])
        expect_error([*base, "--data", texts, "--out", f"{texts}/shards"], "lies inside")
        expect_error([*base, "--data", f"{texts}/a.txt", "--out", texts], "contains")
        expect_error([*base, "--data", f"{texts}/*.txt", "--out", texts], "contains")
        expect_error([*base, "--data", texts, "--out", f"{d}/texts_link"], "is the input")
        expect_error([*base, "--data", texts, "--out", f"{d}/nothing/../texts"], "is the input")
    # With a tokenizer file: --out may not be it either.
    tok = f"{d}/tok.json"
    run("tokenizer", "train", "--data", f"{texts}/a.txt", "--vocab-size", 280, "--out", tok)
    with Unchanged(tok):
        expect_error(["tokenize", "--tokenizer", tok, "--eot", 0, "--data", f"{texts}/a.txt",
                      "--out", tok], "--tokenizer")


if __name__ == "__main__":
    sys.exit(main())
