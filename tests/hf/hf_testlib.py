"""Shared driver of the Hugging Face interoperability test scripts in this folder: the case
registry, running build/moetrain, one-line error checks, work directories and main()."""
import argparse
import os
import shutil
import subprocess

ARGS = argparse.Namespace()
TESTS = {}


def test(fn):
    TESTS[fn.__name__] = fn
    return fn


def run(*argv, ok=True):
    p = subprocess.run([ARGS.moetrain, *map(str, argv)], capture_output=True, text=True,
                       errors="replace", timeout=600)
    if ok and p.returncode != 0:
        raise AssertionError(f"moetrain {' '.join(map(str, argv))} failed ({p.returncode}):\n"
                             f"{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    return p


def expect_error(argv, *words):
    """The command fails with exactly one stderr line "moetrain: error: ..." holding `words`."""
    p = run(*argv, ok=False)
    err = p.stderr.strip().splitlines()
    assert 0 < p.returncode < 128, f"{argv}: exit {p.returncode}: {p.stderr}"
    assert len(err) == 1 and err[0].startswith("moetrain: error: "), f"{argv}: {p.stderr}"
    for w in words:
        assert w.lower() in err[0].lower(), f"'{w}' not in: {err[0]}"
    print(f"ok -> {err[0]}")
    return err[0]


def work(name):
    d = os.path.join(ARGS.work, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    return d


def main(setup=None):
    """--list prints the cases (';'-separated for CMake); otherwise runs one case."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--moetrain")
    ap.add_argument("--logits", help="build/moetrain_hf_logits")
    ap.add_argument("--work")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("case", nargs="?")
    ap.parse_args(namespace=ARGS)
    if ARGS.list:
        print(";".join(TESTS))
        return 0
    if setup:
        setup()
    TESTS[ARGS.case]()
    print("PASS", ARGS.case)
    return 0
