#!/usr/bin/env python3
"""Hostile-input and fault tests of the moetrain CLI (stdlib only): defects an adversarial
review found, checkpoint integrity (checksums, byte flips, `moetrain verify`), graceful stop,
SIGKILL chaos, injected IO faults, memory limits. Registered with ctest like cli_tests.py:

    harden_tests.py --moetrain build/moetrain --work DIR [--fault-lib LIB] TEST_NAME
"""
import argparse
import hashlib
import json
import os
import random
import shutil
import signal
import struct
import subprocess
import sys
import time

ARGS = None
TESTS = {}
TINY = ["--device", "cpu", "--preset", "tiny", "--batch", "2", "--seq", "16", "--threads", "1"]


def test(fn):
    TESTS[fn.__name__] = fn
    return fn


def run(*argv, ok=True, env=None, timeout=600):
    p = subprocess.run([ARGS.moetrain, *map(str, argv)], capture_output=True, text=True,
                       encoding="utf-8", errors="replace", timeout=timeout, env=env)
    if ok and p.returncode != 0:
        raise AssertionError(f"moetrain {' '.join(map(str, argv))} failed ({p.returncode}):\n"
                             f"{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    return p


def expect_error(argv, must_contain, env=None):
    p = run(*argv, ok=False, env=env)
    err = p.stderr.strip().splitlines()
    assert p.returncode != 0, f"expected failure for {argv}, got exit 0:\n{p.stdout[-2000:]}"
    assert 0 < p.returncode < 128, f"{argv}: crashed with exit {p.returncode}: {p.stderr}"
    assert len(err) == 1, f"{argv}: expected one stderr line, got:\n{p.stderr[-3000:]}"
    assert err[0].startswith("moetrain: error: "), f"{argv}: bad message: {err[0]}"
    for word in ([must_contain] if isinstance(must_contain, str) else must_contain):
        assert word.lower() in err[0].lower(), f"{argv}: '{word}' not in: {err[0]}"
    print(f"ok: {' '.join(map(str, argv))[:100]}\n    -> {err[0][:300]}")
    return p


def work(name):
    d = os.path.join(ARGS.work, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    return d


def corpus(d, n_bytes=20000, seed=0):
    rng = random.Random(seed)
    words = "the king and queen spoke to their people about bread wine and war".split()
    text = ""
    while len(text) < n_bytes:
        text += " ".join(rng.choice(words) for _ in range(rng.randint(4, 12))) + ".\n"
    path = os.path.join(d, "corpus.txt")
    with open(path, "w") as f:
        f.write(text[:n_bytes])
    return path


def tree_digest(d):
    """sha256 of every file under d, by relative path (to show nothing changed)."""
    out = {}
    for root, _, files in os.walk(d):
        for f in files:
            p = os.path.join(root, f)
            with open(p, "rb") as fh:
                out[os.path.relpath(p, d)] = hashlib.sha256(fh.read()).hexdigest()
    return out


def no_steps_ran(p):
    return "step 1/" not in p.stdout


# ---- defects of the adversarial review -------------------------------------------------

@test
def cleaner_keeps_user_folders():
    d = work("cleaner_keeps_user_folders")
    data = corpus(d)
    run_dir = f"{d}/RUN"
    # pid 4194999 is above the kernel's pid_max default: no such process exists.
    os.makedirs(f"{run_dir}/thesis.tmp-31000/chapters")
    os.makedirs(f"{run_dir}/notes.tmp-4194999")
    with open(f"{run_dir}/thesis.tmp-31000/chapters/one.tex", "w") as f:
        f.write("precious")
    os.makedirs(f"{d}/elsewhere")
    os.symlink(f"{d}/elsewhere", f"{run_dir}/link.tmp-4194998")
    before = tree_digest(run_dir)
    run("train", *TINY, "--data", data, "--steps", 2, "--out", run_dir, "--quiet")
    after = tree_digest(run_dir)
    for k, v in before.items():
        assert after.get(k) == v, (k, after)
    assert os.path.isdir(f"{run_dir}/notes.tmp-4194999")
    assert os.path.islink(f"{run_dir}/link.tmp-4194998") and os.path.isdir(f"{d}/elsewhere")


@test
def resume_never_replaces_another_runs_checkpoint():
    d = work("resume_never_replaces")
    data = corpus(d)
    run("train", *TINY, "--data", data, "--steps", 2, "--out", f"{d}/A", "--quiet")
    run("train", *TINY, "--data", data, "--steps", 3, "--out", f"{d}/B", "--seed", 9, "--quiet")
    before = tree_digest(f"{d}/B")
    p = expect_error(["train", *TINY, "--data", data, "--steps", 3, "--resume", f"{d}/A",
                      "--out", f"{d}/B"], ["--out", "step_000003"])
    assert no_steps_ran(p)
    assert tree_digest(f"{d}/B") == before
    # Resuming an older step of a run with new hyper-parameters into the same run directory.
    run("train", *TINY, "--data", data, "--steps", 4, "--save-every", 2, "--out", f"{d}/C",
        "--quiet")
    before = tree_digest(f"{d}/C")
    expect_error(["train", *TINY, "--data", data, "--steps", 4, "--lr", "1e-2", "--resume",
                  f"{d}/C/step_000002", "--out", f"{d}/C"], ["step_000004", "newer"])
    assert tree_digest(f"{d}/C") == before
    # Resuming the newest step into its own run directory is the normal case.
    run("train", *TINY, "--data", data, "--steps", 6, "--resume", f"{d}/C", "--out", f"{d}/C",
        "--quiet")
    assert os.path.isdir(f"{d}/C/step_000006")


@test
def unwritable_out_fails_before_step_1():
    d = work("unwritable_out")
    data = corpus(d)
    with open(f"{d}/plain", "w") as f:
        f.write("x")
    for out in [f"{d}/plain/run", "/proc/x", f"{d}/plain"]:
        p = expect_error(["train", *TINY, "--data", data, "--steps", 50, "--out", out], out)
        assert no_steps_ran(p), p.stdout


@test
def huge_step_numbers_are_found():
    d = work("huge_step_numbers")
    data = corpus(d)
    run("train", *TINY, "--data", data, "--steps", 1, "--out", f"{d}/run", "--quiet")
    # A run directory holding a 19-digit step (the writer's name for steps >= 10^18) besides
    # an older one: the run directory resolves to the 19-digit one.
    big = "step_1000000000000000001"
    shutil.copytree(f"{d}/run/step_000001", f"{d}/run/{big}")
    p = run("eval", "--checkpoint", f"{d}/run", "--data", data, "--batch", 2, "--seq", 16,
            "--batches", 1)
    assert big in p.stdout, p.stdout
    # A resume into that run directory from the older step is refused (it would hide it).
    expect_error(["train", *TINY, "--data", data, "--steps", 3, "--resume",
                  f"{d}/run/step_000001", "--out", f"{d}/run"], big)


@test
def outputs_never_overwrite_inputs():
    d = work("outputs_never_overwrite_inputs")
    data = corpus(d)
    with open(data, "rb") as f:
        original = f.read()
    expect_error(["train", *TINY, "--data", data, "--steps", 2, "--log-json", data],
                 ["--log-json", "--data"])
    rel = os.path.relpath(data)
    expect_error(["train", *TINY, "--data", data, "--steps", 2, "--log-json", rel], "--data")
    os.symlink(data, f"{d}/alias.txt")
    expect_error(["train", *TINY, "--data", data, "--steps", 2, "--log-json", f"{d}/alias.txt"],
                 "--data")
    expect_error(["train", *TINY, "--data", data, "--steps", 2, "--out", data], "--data")
    with open(data, "rb") as f:
        assert f.read() == original, "the corpus changed"
    conf = f"{d}/model.json"
    with open(conf, "w") as f:
        f.write(run("config", "--preset", "tiny").stdout)
    expect_error(["train", "--device", "cpu", "--config", conf, "--batch", 2, "--seq", 16,
                  "--data", data, "--steps", 2, "--log-json", conf], "--config")


@test
def log_to_full_device_fails():
    d = work("log_to_full_device")
    data = corpus(d)
    if not os.path.exists("/dev/full"):
        raise Skip("no /dev/full")
    p = expect_error(["train", *TINY, "--data", data, "--steps", 3, "--log-json", "/dev/full",
                      "--out", f"{d}/run"], ["/dev/full", "no space"])
    # The step that was done is saved before stopping.
    assert os.path.isdir(f"{d}/run/step_000001"), os.listdir(f"{d}/run")
    run("eval", "--checkpoint", f"{d}/run", "--data", data, "--batch", 2, "--seq", 16,
        "--batches", 1)


@test
def thread_counts_are_bounded():
    d = work("thread_counts")
    data = corpus(d)
    for sub in [["train", *TINY[:-2], "--data", data, "--steps", 1],
                ["bench", "--device", "cpu", "--preset", "tiny", "--batch", 1, "--seq", 8]]:
        expect_error([*sub, "--threads", 200000], ["--threads", "at most"])


@test
def error_messages_are_quoted_and_short():
    d = work("error_messages")
    data = corpus(d)
    huge = "x" * 100_000  # one argument may hold at most 128 KiB
    p = expect_error(["train", "--device", "cpu", "--preset", huge, "--batch", 2, "--seq", 16,
                      "--data", data, "--steps", 1], "preset")
    assert len(p.stderr) < 1200, len(p.stderr)
    conf = f"{d}/huge.json"
    with open(conf, "w") as f:
        json.dump({"name": "y" * 10_000_000}, f)
    p = expect_error(["config", "--config", conf], conf)
    assert len(p.stderr) < 1200, len(p.stderr)
    conf = f"{d}/binary.json"
    with open(conf, "wb") as f:
        f.write(b'{"\x01\xff\xfe\x1b[31m": 1}')
    p = expect_error(["config", "--config", conf], conf)
    assert "\x1b" not in p.stderr and "\ufffd" not in p.stderr, repr(p.stderr)


class Skip(Exception):
    pass


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--moetrain", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--fault-lib", default="")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("name", nargs="?")
    ARGS = ap.parse_args()
    if ARGS.list:
        print(";".join(TESTS))
        return 0
    os.makedirs(ARGS.work, exist_ok=True)
    try:
        TESTS[ARGS.name]()
    except Skip as e:
        print(f"{ARGS.name}: skipped: {e}")
        return 77
    print(f"{ARGS.name}: passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
