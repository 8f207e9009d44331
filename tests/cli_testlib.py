"""Shared driver of the Python test scripts that run build/moetrain (tests/cli, tests/hf,
tests/dist): the case registry, running the CLI, the one-line error check, work directories,
the test corpus, JSON output and main(). Stdlib only.

A script registers its cases with @test and ends with `sys.exit(main())`; CMake lists the
cases with `--list` and runs one case per ctest test:

    SCRIPT --moetrain build/moetrain --work DIR [script options] CASE

Every user error must end in exactly one stderr line "moetrain: error: ..." and a non-zero
exit status below 128 (no abort, no crash, no stack trace).
"""
import argparse
import json
import os
import random
import shutil
import subprocess

ARGS = argparse.Namespace()
TESTS = {}
SKIP_EXIT = 77  # ctest's SKIP_RETURN_CODE for these scripts


class Skip(Exception):
    """Raised by a case that cannot run on this machine (the reason is its message)."""


def test(fn):
    TESTS[fn.__name__] = fn
    return fn


def run(*argv, ok=True, env=None, timeout=600):
    """moetrain ARGV; with ok, a non-zero exit fails the case with the output's tails."""
    p = subprocess.run([ARGS.moetrain, *map(str, argv)], capture_output=True, text=True,
                       encoding="utf-8", errors="replace", timeout=timeout, env=env)
    if ok and p.returncode != 0:
        raise AssertionError(f"moetrain {' '.join(map(str, argv))} failed ({p.returncode}):\n"
                             f"{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    return p


def expect_error(argv, *words, env=None, timeout=600):
    """moetrain ARGV fails with exactly one stderr line "moetrain: error: ..." holding each of
    `words` (strings, or lists of strings), case-insensitively, within `timeout` seconds.
    Returns the CompletedProcess with that line as `.error`."""
    p = run(*argv, ok=False, env=env, timeout=timeout)
    err = p.stderr.strip().splitlines()
    assert p.returncode != 0, f"expected failure for {argv}, got exit 0:\n{p.stdout[-2000:]}"
    assert 0 < p.returncode < 128, f"{argv}: crashed with exit {p.returncode}: {p.stderr}"
    assert len(err) == 1, f"{argv}: expected one stderr line, got:\n{p.stderr[-3000:]}"
    assert err[0].startswith("moetrain: error: "), f"{argv}: bad message: {err[0]}"
    for group in words:
        for word in [group] if isinstance(group, str) else group:
            assert word.lower() in err[0].lower(), f"{argv}: '{word}' not in: {err[0]}"
    print(f"ok: {' '.join(map(str, argv))[:100]}\n    -> {err[0][:300]}")
    p.error = err[0]
    return p


def last_json(p):
    """The JSON object on the last line of a command's stdout (the machine-readable result)."""
    return json.loads(p.stdout.strip().splitlines()[-1])


def read_json(path):
    with open(path) as f:
        return json.load(f)


def work(name):
    """An empty directory ARGS.work/name for one case."""
    d = os.path.join(ARGS.work, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    return d


def write(path, text):
    with open(path, "w") as f:
        f.write(text)
    return path


def corpus(d, n_bytes=60000, seed=0):
    """d/corpus.txt: an English-like text of sentences from a small vocabulary
    (deterministic)."""
    rng = random.Random(seed)
    words = ("the king and queen of a far land spoke to their people about bread wine and war "
             "while the young prince rode north to find his brother in the old castle").split()
    out = []
    size = 0
    while size < n_bytes:
        s = " ".join(rng.choice(words) for _ in range(rng.randint(4, 12)))
        s = s[0].upper() + s[1:] + ".\n"
        out.append(s)
        size += len(s)
    return write(os.path.join(d, "corpus.txt"), "".join(out)[:n_bytes])


def read_log(path):
    """The records of a --log-json file."""
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def step_losses(path):
    """(step, loss) of each training step of a --log-json file (evaluations left out)."""
    return [(r["step"], r["loss"]) for r in read_log(path) if "eval" not in r]


def main(add_options=None, setup=None):
    """--list prints the cases (';'-separated for CMake); otherwise runs the one named.
    add_options(parser) adds a script's own options; setup() runs before the case, and a
    result other than None ends the run with that exit status. A Skip exits 77."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--moetrain", default="")
    ap.add_argument("--work", default="")
    ap.add_argument("--list", action="store_true")
    if add_options:
        add_options(ap)
    ap.add_argument("name", nargs="?")
    ap.parse_args(namespace=ARGS)
    if ARGS.list:
        print(";".join(TESTS))
        return 0
    if not ARGS.moetrain or not ARGS.work:
        ap.error("--moetrain and --work are needed to run a case")
    os.makedirs(ARGS.work, exist_ok=True)
    if setup:
        code = setup()
        if code is not None:
            return code
    if ARGS.name not in TESTS:
        ap.error(f"unknown case {ARGS.name!r}")
    try:
        TESTS[ARGS.name]()
    except Skip as e:
        print(f"{ARGS.name}: skipped: {e}")
        return SKIP_EXIT
    print(f"{ARGS.name}: passed")
    return 0
