#!/usr/bin/env python3
"""Multi-process tests of the communicator and of `mpirun -np N moetrain train` (stdlib only).
Each test is registered with ctest:

    dist_tests.py --mpirun mpiexec --moetrain build/moetrain --comm-check build/moetrain_comm_check
                  --work DIR TEST_NAME

mpirun gets --allow-run-as-root and --oversubscribe here, in the command, so that the tests run
as root in CI containers and with more ranks than cores without touching the machine's settings.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time

ARGS = None
TESTS = {}


def test(fn):
    TESTS[fn.__name__] = fn
    return fn


def mpirun(n, argv, timeout=240, env=None):
    cmd = [ARGS.mpirun, "--allow-run-as-root", "--oversubscribe", "-np", str(n),
           "--mca", "btl", "self,vader", *map(str, argv)]
    e = dict(os.environ, OMP_NUM_THREADS="1", OMP_WAIT_POLICY="passive")
    e.update(env or {})
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, encoding="utf-8", errors="replace",
                       timeout=timeout, env=e)
    p.seconds = time.monotonic() - t0
    return p


def must_pass(p, what):
    if p.returncode != 0:
        raise AssertionError(f"{what} failed ({p.returncode}):\n{p.stdout[-3000:]}\n"
                             f"{p.stderr[-3000:]}")
    return p


def work(name):
    d = os.path.join(ARGS.work, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    return d


# ---- the communicator ---------------------------------------------------------------------

def collectives(n, device="cpu"):
    p = must_pass(mpirun(n, [ARGS.comm_check, "collectives", device]), f"collectives -np {n}")
    assert f"ok: {n} ranks, 0 mismatches" in p.stdout, p.stdout
    print(p.stdout.strip())


@test
def collectives_np2():
    collectives(2)


@test
def collectives_np4():
    collectives(4)


@test
def collectives_opencl_np2():
    if not opencl_available():
        print("skipped: no opencl device")
        sys.exit(77)
    collectives(2, "opencl")


def fault(mode, want, env=None, bound=60):
    p = mpirun(2, [ARGS.comm_check, mode], timeout=bound + 60, env=env)
    assert p.returncode != 0, f"{mode}: the job exited 0:\n{p.stdout}\n{p.stderr}"
    assert p.seconds < bound, f"{mode}: took {p.seconds:.1f} s (bound {bound} s)"
    lines = [l for l in p.stderr.splitlines() if l.startswith("moetrain: error: ")]
    if want:
        assert any(want in l for l in lines), f"{mode}: no line with '{want}':\n{p.stderr}"
    print(f"ok: {mode}: exit {p.returncode} after {p.seconds:.1f} s; {lines[:1]}")


@test
def rank_fails():
    fault("fail", "rank 1 of 2: injected failure")


@test
def rank_dies():
    # The killed rank prints nothing; mpirun ends the job and names the rank and its signal.
    p = mpirun(2, [ARGS.comm_check, "die"], timeout=120)
    assert p.returncode != 0 and p.seconds < 60, (p.returncode, p.seconds, p.stderr)
    assert "rank 1" in p.stderr and "signal 9" in p.stderr, p.stderr
    print(f"ok: die: exit {p.returncode} after {p.seconds:.1f} s")


@test
def rank_hangs():
    fault("hang", "rank 0 of 2: all_reduce did not complete within 2 s",
          env={"MOETRAIN_COMM_TIMEOUT": "2"}, bound=30)


@test
def comm_module_missing():
    # A multi-rank launch whose communicator module cannot be found fails at once on every rank.
    env = {"MOETRAIN_BACKEND_PATH": "/nonexistent"}
    exe = work("comm_module_missing") + "/moetrain_comm_check"
    shutil.copy(ARGS.comm_check, exe)  # libmoetrain.so is found by rpath; its directory holds
    # the module, so point the search at a copy of the library without it
    libdir = os.path.dirname(ARGS.moetrain)
    lib_copy = os.path.dirname(exe)
    for f in os.listdir(libdir):
        if f.startswith("libmoetrain.so"):
            shutil.copy(os.path.join(libdir, f), lib_copy, follow_symlinks=True)
    env["LD_LIBRARY_PATH"] = lib_copy
    p = mpirun(2, [exe, "collectives"], env=env, timeout=120)
    assert p.returncode != 0, p.stdout
    assert "launched with 2 ranks but the mpi communicator is not built" in p.stderr, p.stderr
    print("ok: module missing -> " + p.stderr.splitlines()[0])


def opencl_available():
    p = subprocess.run([ARGS.moetrain, "info"], capture_output=True, text=True)
    return any(l.split()[:2] == ["opencl", "available"] for l in p.stdout.splitlines())


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--mpirun", default="mpirun")
    ap.add_argument("--moetrain", default="")
    ap.add_argument("--comm-check", default="")
    ap.add_argument("--work", default="")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("name", nargs="?")
    ARGS = ap.parse_args()
    if ARGS.list:
        print(";".join(TESTS))
        return
    os.makedirs(ARGS.work, exist_ok=True)
    TESTS[ARGS.name]()


if __name__ == "__main__":
    main()
