#!/usr/bin/env python3
"""Multi-process tests of the communicator and of `mpirun -np N moetrain train` (stdlib only).
Each test is registered with ctest:

    dist_tests.py --mpirun mpiexec --moetrain build/moetrain --comm-check build/moetrain_comm_check
                  --work DIR TEST_NAME

mpirun gets --allow-run-as-root and --oversubscribe here, in the command, so that the tests run
as root in CI containers and with more ranks than cores without touching the machine's settings.
"""
import argparse
import functools
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


# ---- data-parallel training ----------------------------------------------------------------

def corpus(d, n_bytes=40000, seed=0):
    """A deterministic English-like text."""
    import random
    rng = random.Random(seed)
    words = ("the king and queen of a far land spoke to their people about bread wine and war "
             "while the young prince rode north to find his brother in the old castle").split()
    text = ""
    while len(text) < n_bytes:
        s = " ".join(rng.choice(words) for _ in range(rng.randint(4, 12)))
        text += s[0].upper() + s[1:] + ".\n"
    path = os.path.join(d, "corpus.txt")
    with open(path, "w") as f:
        f.write(text[:n_bytes])
    return path


def train_argv(d, data, batch, out, device="cpu", extra=()):
    # tiny: MoE layer with a shared expert, softmax top-2 router, aux and z losses.
    return [ARGS.moetrain, "train", "--device", device, "--preset", "tiny", "--data", data,
            "--steps", "10", "--batch", str(batch), "--seq", "32",
            "--log-json", os.path.join(d, out + ".jsonl"), "--out", os.path.join(d, out),
            "--quiet", *(["--threads", "1"] if device == "cpu" else []), *map(str, extra)]


def train(n, d, data, batch, out, device="cpu", extra=()):
    argv = train_argv(d, data, batch, out, device, extra)
    if n == 1:
        p = subprocess.run(argv, capture_output=True, text=True,
                           env=dict(os.environ, OMP_NUM_THREADS="1"))
        return must_pass(p, " ".join(argv))
    return must_pass(mpirun(n, argv), f"mpirun -np {n} " + " ".join(argv))


def read_log(path):
    with open(path) as f:
        return [json.loads(l) for l in f if '"step"' in l and '"split"' not in l]


def read_safetensors(path):
    import array
    with open(path, "rb") as f:
        raw = f.read()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        assert info["dtype"] in ("F32", "U8"), (name, info["dtype"])  # U8: 8-bit AdamW codes
        a, b = info["data_offsets"]
        out[name] = array.array("f" if info["dtype"] == "F32" else "B", raw[8 + n + a:8 + n + b])
    return out


def final_dir(d, out):
    return os.path.join(d, out, "step_000010")


def compare_runs(d, ref, other, loss_rel=1e-5, weight_rel=1e-4):
    la, lb = read_log(os.path.join(d, ref + ".jsonl")), read_log(os.path.join(d, other + ".jsonl"))
    assert len(la) == len(lb) == 10, (len(la), len(lb))
    worst = 0.0
    for x, y in zip(la, lb):
        assert x["step"] == y["step"]
        for key in ("loss", "ce", "aux", "z"):
            rel = abs(x[key] - y[key]) / max(abs(x[key]), 1e-30)
            assert rel <= loss_rel, f"step {x['step']} {key}: {x[key]} vs {y[key]} (rel {rel:.2e})"
            worst = max(worst, rel)
        assert x.get("expert_load") == y.get("expert_load"), (x.get("expert_load"),
                                                               y.get("expert_load"))
    wa = read_safetensors(os.path.join(final_dir(d, ref), "model.safetensors"))
    wb = read_safetensors(os.path.join(final_dir(d, other), "model.safetensors"))
    assert wa.keys() == wb.keys()
    wworst = 0.0
    for name in wa:
        scale = max(max(abs(v) for v in wa[name]), 1e-30)
        diff = max(abs(p - q) for p, q in zip(wa[name], wb[name]))
        assert diff <= weight_rel * scale, f"{name}: max diff {diff} vs scale {scale}"
        wworst = max(wworst, diff / scale)
    print(f"ok: {other} matches {ref}: losses rel <= {worst:.2e}, weights rel <= {wworst:.2e}")


def equivalence(n, device="cpu", extra=(), accum=1, both=(), weight_rel=1e-4):
    """1 rank x 4 rows vs n ranks x 4/n; `extra` for the n-rank run, `both` for both."""
    name = f"{'zero' if extra else 'dp'}{'_'.join(map(str, both)).replace('-', '')}"
    d = work(f"equiv_{device}_np{n}_{name}_a{accum}")
    data = corpus(d)
    train(1, d, data, 4, "single", device, [*both, "--accum", accum])
    train(n, d, data, 4 // n, "multi", device, [*extra, *both, "--accum", accum])
    compare_runs(d, "single", "multi", weight_rel=weight_rel)
    return d


@test
def dp_np2():
    equivalence(2)


@test
def dp_np4():
    equivalence(4, accum=2)


@test
def dp_np2_recompute_ffn():
    # The backward's re-run of the MoE forward reads the global expert counts of the forward.
    equivalence(2, both=["--recompute", "ffn"])


@test
def zero_np2():
    equivalence(2, extra=["--zero", 1])


@test
def zero_np4():
    equivalence(4, extra=["--zero", 1])


# 8-bit moments amplify rounding: a gradient one ulp off (N ranks sum in another order) can move
# a moment to the neighbouring code, a step of up to ~1% of its block's scale, so the weights
# drift further from one process than with fp32 moments (plain data parallelism with 8-bit AdamW
# shows the same drift, without ZeRO). The losses still agree within 1e-5.
W8 = 5e-3


@test
def dp_overlap_matches_blocking():
    # Each layer's all-reduce started during the backward sums the same two shares: the same
    # bytes as the all-reduces after it.
    d = work("dp_overlap")
    data = corpus(d)
    for overlap in (0, 1):
        p = train(2, d, data, 2, f"o{overlap}", extra=["--overlap", overlap])
        said = "gradient all-reduce overlapped with the backward" in p.stdout
        assert said == (overlap == 1), p.stdout
    for f in ("model.safetensors", "optimizer.safetensors"):
        with open(os.path.join(final_dir(d, "o0"), f), "rb") as x, \
                open(os.path.join(final_dir(d, "o1"), f), "rb") as y:
            assert x.read() == y.read(), f"{f} differs between --overlap 0 and 1"
    print("ok: --overlap 1 writes the bytes of --overlap 0 (2 ranks)")


@test
def zero8_np2():
    # ZeRO-1 with 8-bit AdamW: block-aligned shards of the quantised state.
    equivalence(2, extra=["--zero", 1], both=["--optimizer", "adamw8bit"], weight_rel=W8)


@test
def zero8_np4():
    equivalence(4, extra=["--zero", 1], both=["--optimizer", "adamw8bit"], weight_rel=W8)


@test
def dp8_np2():
    # The reference drift: 8-bit AdamW without ZeRO over 2 ranks.
    equivalence(2, both=["--optimizer", "adamw8bit"], weight_rel=W8)


def rank_report(name, n, batch, runs):
    """What rank 0 reports on its "data parallel:" line for each run {key: extra arguments}:
    {key: (optimizer state MB, parameters on this rank, parameters of the model)}, the
    parameter counts in millions to 3 decimals."""
    d = work(name)
    data = corpus(d)
    out = {}
    for key, extra in runs.items():
        p = train(n, d, data, batch, f"run{key}", extra=extra)
        line = [l for l in p.stdout.splitlines() if l.startswith("data parallel:")][0]
        mb = float(line.split("optimizer state ")[1].split(" MB")[0])
        here, total = line.split(" MB and ")[1].split(" parameters on this rank")[0].split(
            "M of the ")
        out[key] = (mb, float(here), float(total.rstrip("M")))
    return out


def optimizer_mb(name, n, batch, runs):
    """The optimizer state MB rank 0 reports for each run {key: extra arguments}."""
    return {key: r[0] for key, r in rank_report(name, n, batch, runs).items()}


def zero_shards_state(name, optimizer, lo, hi):
    # The optimizer state rank 0 allocates: about 1/N of the replicated one under ZeRO-1.
    mb = optimizer_mb(name, 4, 1, {z: ["--zero", z, "--optimizer", optimizer] for z in (0, 1)})
    ratio = mb[1] / mb[0]
    assert lo <= ratio <= hi, f"{optimizer} ZeRO-1 over 4 ranks keeps {ratio:.3f} of the state"
    print(f"ok: {optimizer} state per rank {mb[0]:.4f} MB replicated, {mb[1]:.4f} MB with "
          f"ZeRO-1 over 4 ranks ({ratio:.3f})")


@test
def zero8_shards_optimizer_memory():
    # The gains and biases (under 1% of tiny's parameters) stay replicated.
    zero_shards_state("zero8_memory", "adamw8bit", 0.25, 0.27)


@test
def zero_shards_optimizer_memory():
    zero_shards_state("zero_memory", "adamw", 0.24, 0.26)


@test
def dp_opencl_np2():
    if not opencl_available():
        print("skipped: no opencl device")
        sys.exit(77)
    equivalence(2, device="opencl")


@test
def zero_opencl_np2():
    if not opencl_available():
        print("skipped: no opencl device")
        sys.exit(77)
    equivalence(2, device="opencl", extra=["--zero", 1])


def assert_same_runs(d, a, b, what, fields=("loss", "grad_norm")):
    # Runs a and b in d wrote the same bytes (weights and moments) and logged the same `fields`
    # at every step.
    for f in ("model.safetensors", "optimizer.safetensors"):
        with open(os.path.join(final_dir(d, a), f), "rb") as x, \
                open(os.path.join(final_dir(d, b), f), "rb") as y:
            assert x.read() == y.read(), f"{f} differs between two {what}"
    la, lb = read_log(os.path.join(d, a + ".jsonl")), read_log(os.path.join(d, b + ".jsonl"))
    assert [[x[k] for k in fields] for x in la] == [[y[k] for k in fields] for y in lb], what


def bit_identical(name, n, batch, extra, what):
    d = work(name)
    data = corpus(d)
    for out in ("a", "b"):
        train(n, d, data, batch, out, extra=extra)
    assert_same_runs(d, "a", "b", what)
    print(f"ok: two {what} are bit-identical")


@test
def dp_bit_identical():
    bit_identical("dp_bit_identical", 2, 2, ["--zero", 1], "runs with 2 ranks")


@test
def threads_shared_by_node_ranks():
    # Unbound ranks (no --threads, no OMP_NUM_THREADS) share the node's processors instead of
    # each starting one thread per processor; --threads still wins.
    d = work("threads")
    data = corpus(d)
    usable = len(os.sched_getaffinity(0))
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}

    def threads_line(out, extra):
        argv = [ARGS.mpirun, "--allow-run-as-root", "--oversubscribe", "--bind-to", "none",
                "-np", "2", "--mca", "btl", "self,vader", ARGS.moetrain, "train", "--preset",
                "tiny", "--data", data, "--steps", "1", "--batch", "2", "--seq", "16", "--out",
                os.path.join(d, out), *extra]
        p = must_pass(subprocess.run(argv, capture_output=True, text=True, timeout=120,
                                     env=dict(env, OMP_WAIT_POLICY="passive")), " ".join(argv))
        line = next(x for x in p.stdout.splitlines() if x.startswith("train:"))
        return line

    want = max(1, usable // 2)
    line = threads_line("default", [])
    assert f"({want} thread{'s' if want > 1 else ''})" in line, (usable, line)
    line = threads_line("given", ["--threads", "3"])
    assert "(3 threads)" in line, line
    print(f"ok: 2 unbound ranks on {usable} processors run {want} thread(s) each; --threads 3 "
          "gives 3")


# ---- expert parallel -----------------------------------------------------------------------

def ep_equivalence(n, ep, device="cpu", accum=1, both=(), zero=0, weight_rel=1e-4):
    """1 rank x 4 rows vs n ranks x 4/n with --expert-parallel ep (tiny: 4 experts, top-2, a
    shared expert, aux and z losses), and --zero `zero`."""
    tag = "_".join(map(str, both)).replace("-", "")
    d = work(f"ep_{device}_np{n}_ep{ep}_z{zero}_a{accum}{tag}")
    data = corpus(d)
    train(1, d, data, 4, "single", device, [*both, "--accum", accum])
    p = train(n, d, data, 4 // n, "multi", device,
              ["--expert-parallel", ep, "--zero", zero, *both, "--accum", accum])
    assert f"expert parallel {ep} ({4 // ep} experts per rank)" in p.stdout, p.stdout
    assert ("ZeRO-1" in p.stdout) == (zero == 1), p.stdout
    if zero:  # the norm from the shards of both parts, every element once
        worst = 0.0
        for x, y in zip(read_log(os.path.join(d, "single.jsonl")),
                        read_log(os.path.join(d, "multi.jsonl"))):
            rel = abs(x["grad_norm"] - y["grad_norm"]) / x["grad_norm"]
            assert rel <= 1e-5, (x["step"], x["grad_norm"], y["grad_norm"])
            worst = max(worst, rel)
        print(f"ok: grad norms rel <= {worst:.2e}")
    compare_runs(d, "single", "multi", weight_rel=weight_rel)
    return d


@test
def ep_np2():
    ep_equivalence(2, 2)


@test
def ep_np4():
    # Two groups of 2: every expert has a replica whose gradients are summed with its own.
    ep_equivalence(4, 2, accum=2)


@test
def ep_zero_np2():
    # ZeRO-1 under expert parallelism: the non-expert moments sharded over both ranks; one
    # replica per expert, so each rank's expert shard is its whole experts.
    ep_equivalence(2, 2, zero=1)


@test
def ep_zero_np4():
    # Two groups of 2: the non-expert moments in 4 shards, each rank's experts in 2 (over the
    # ranks holding them).
    ep_equivalence(4, 2, accum=2, zero=1)


@test
def ep8_np2():
    # 8-bit AdamW under expert parallelism: one adamw8bit call per owned segment (tiny's expert
    # blocks start and end on 256-element blocks of the decayed range), the grid of one process.
    ep_equivalence(2, 2, accum=2, both=["--optimizer", "adamw8bit"], weight_rel=W8)


@test
def ep8_np4():
    ep_equivalence(4, 2, accum=2, both=["--optimizer", "adamw8bit"], weight_rel=W8)


@test
def ep_np4_one_expert_per_rank():
    ep_equivalence(4, 4)


@test
def ep_np2_recompute_ffn():
    # The backward's re-run of the MoE forward dispatches the rows again.
    ep_equivalence(2, 2, both=["--recompute", "ffn"])


@test
def ep_np2_bf16():
    # 16-bit expert input rows travel as bf16.
    ep_equivalence(2, 2, both=["--precision", "bf16"])


@test
def ep_np2_hash_router():
    d = work("ep_hash_router")
    cfg = json.loads(subprocess.run([ARGS.moetrain, "config", "--preset", "tiny"],
                                    capture_output=True, text=True, check=True).stdout)
    cfg["moe"].update(router="hash", top_k=1, aux_loss_alpha=0.0, z_loss_alpha=0.0)
    path = os.path.join(d, "hash.json")
    with open(path, "w") as f:
        json.dump(cfg, f)
    data = corpus(d)
    for n, out in ((1, "single"), (2, "multi")):
        argv = train_argv(d, data, 4 // n, out, extra=["--expert-parallel", n])
        argv[argv.index("--preset"):argv.index("--preset") + 2] = ["--config", path]
        if n == 1:
            must_pass(subprocess.run(argv, capture_output=True, text=True,
                                     env=dict(os.environ, OMP_NUM_THREADS="1")), out)
        else:
            must_pass(mpirun(n, argv), out)
    compare_runs(d, "single", "multi")


@test
def ep_opencl_np2():
    if not opencl_available():
        print("skipped: no opencl device")
        sys.exit(77)
    ep_equivalence(2, 2, device="opencl")


@test
def ep8_opencl_np2():
    # The 8-bit update on views of the compact state (codes and scales at nonzero offsets).
    if not opencl_available():
        print("skipped: no opencl device")
        sys.exit(77)
    ep_equivalence(2, 2, device="opencl", both=["--optimizer", "adamw8bit"], weight_rel=W8)


@test
def ep_zero_opencl_np2():
    if not opencl_available():
        print("skipped: no opencl device")
        sys.exit(77)
    ep_equivalence(2, 2, device="opencl", zero=1)


@test
def ep_evaluates_every_expert():
    # Every rank of the group runs the evaluation, its experts serving the others' rows.
    d = work("ep_eval")
    data = corpus(d)
    train(1, d, data, 4, "single", extra=["--eval-every", 5, "--eval-batches", 2])
    train(2, d, data, 2, "multi", extra=["--eval-every", 5, "--eval-batches", 2,
                                         "--expert-parallel", 2])
    ev = {}
    for run in ("single", "multi"):
        with open(os.path.join(d, run + ".jsonl")) as f:
            ev[run] = [json.loads(l) for l in f if '"split"' in l]
    assert len(ev["single"]) == len(ev["multi"]) == 2, ev
    for x, y in zip(ev["single"], ev["multi"]):
        rel = abs(x["eval"]["loss"] - y["eval"]["loss"]) / x["eval"]["loss"]
        assert x["step"] == y["step"] and rel <= 1e-5, (x, y)
    print(f"ok: val losses of EP 2 match one process at steps {[x['step'] for x in ev['multi']]}")


@test
def ep_bit_identical():
    bit_identical("ep_bit_identical", 4, 1, ["--expert-parallel", 2],
                  "4-rank expert-parallel runs")


@test
def ep_overlap_bit_identical():
    # The overlapped token exchange (--overlap 1, the default over mpi: the experts run over
    # the rows a rank keeps, and the shared expert's backward, while the others travel) against
    # the plain one: the same weights, moments and logged losses, bit for bit. Every step logs
    # the rank's time inside collectives (comm_ms).
    d = work("ep_overlap_bit_identical")
    data = corpus(d)
    for out, overlap, says in (("plain", 0, "(2 experts per rank), all-to-all token exchange"),
                               ("overlapped", 1, "overlapped all-to-all token exchange")):
        p = train(4, d, data, 1, out, extra=["--expert-parallel", 2, "--overlap", overlap])
        assert says in p.stdout, p.stdout
    assert_same_runs(d, "plain", "overlapped", "expert-parallel runs, plain and overlapped")
    log = read_log(os.path.join(d, "overlapped.jsonl"))
    assert all(x["comm_ms"] > 0 for x in log), log
    print(f"ok: the overlapped token exchange is bit-identical to the plain one; comm_ms "
          f"{[round(x['comm_ms'], 1) for x in log]}")


@test
def ep_zero_bit_identical():
    bit_identical("ep_zero_bit_identical", 4, 1, ["--expert-parallel", 2, "--zero", 1],
                  "4-rank expert-parallel ZeRO-1 runs")


@test
def ep8_bit_identical():
    bit_identical("ep8_bit_identical", 4, 1, ["--expert-parallel", 2, "--optimizer", "adamw8bit"],
                  "4-rank expert-parallel 8-bit AdamW runs")


@test
def ep_optimizer_state_per_rank():
    # Each rank keeps the weights, gradients and moments of the shared weights and of its own
    # experts only.
    r = rank_report("ep_memory", 2, 2, {ep: ["--expert-parallel", ep] for ep in (1, 2)})
    mb = {ep: r[ep][0] for ep in r}
    # tiny: 3 x 4 x 128 x 64 expert weights, m and v in fp32 (8 bytes), half of them here.
    experts = 4 * 3 * 128 * 64
    want = mb[1] - experts * 8 / 2 / 1e6
    assert abs(mb[2] - want) < 0.002, (mb, want)
    (_, all1, total1), (_, here2, total2) = r[1], r[2]
    assert all1 == total1 == total2, r
    assert abs(here2 - (total2 - experts / 2 / 1e6)) < 0.0015, r  # the flat buffers' length
    print(f"ok: per rank {mb[1]:.3f} MB of optimizer state and {all1:.3f}M parameters "
          f"replicated; {mb[2]:.3f} MB and {here2:.3f}M with 2 experts of 4 per rank")


@test
def ep_zero_optimizer_state_per_rank():
    # EP 2 with ZeRO-1 on 4 ranks: the non-expert moments S / 4 and this rank's experts (half
    # of the experts) over the 2 ranks holding them: S / 4 + (X / 2) / 2 elements of m and v.
    mb = optimizer_mb("ep_zero_memory", 4, 1, {"replicated": [],
                                               "ep_zero": ["--expert-parallel", 2, "--zero", 1]})
    experts = 4 * 3 * 128 * 64
    shared = mb["replicated"] * 1e6 / 8 - experts
    want = 8 * (shared / 4 + experts / 2 / 2) / 1e6
    assert abs(mb["ep_zero"] - want) < 0.002, (mb, want)
    print(f"ok: optimizer state per rank {mb['replicated']:.3f} MB replicated, "
          f"{mb['ep_zero']:.3f} MB with EP 2 + ZeRO-1 over 4 ranks (formula {want:.3f})")


@test
def ep8_optimizer_state_per_rank():
    # 8-bit AdamW under EP 2 on 2 ranks: each rank keeps the codes (1 byte each of m and v) and
    # block scales (4 bytes each per 256 elements) of the shared weights and of its own experts.
    mb = optimizer_mb("ep8_memory", 2, 2, {ep: ["--expert-parallel", ep, "--optimizer",
                                                 "adamw8bit"] for ep in (1, 2)})
    half = 4 * 3 * 128 * 64 // 2  # tiny's expert weights not on this rank
    want = mb[1] - half * (2 + 8 / 256) / 1e6
    assert abs(mb[2] - want) < 0.002, (mb, want)
    print(f"ok: 8-bit optimizer state per rank {mb[1]:.3f} MB replicated, {mb[2]:.3f} MB with "
          f"2 experts of 4 per rank (formula {want:.3f})")


# ---- checkpoints: saved with N ranks, resumed with M ------------------------------------------

def resume_case(n, m, zero_n, zero_m, ep_n=1, ep_m=1, optimizer="adamw"):
    d = work(f"resume_{n}z{zero_n}e{ep_n}_to_{m}z{zero_m}e{ep_m}_{optimizer}")
    data = corpus(d)
    train(n, d, data, 4 // n, "first", extra=["--zero", zero_n, "--expert-parallel", ep_n,
                                              "--optimizer", optimizer, "--save-every", 5])
    argv = [ARGS.moetrain, "train", "--device", "cpu", "--threads", "1", "--data", data,
            "--steps", "10", "--resume", os.path.join(d, "first", "step_000005"),
            "--out", os.path.join(d, "second"), "--log-json", os.path.join(d, "second.jsonl"),
            "--quiet", "--zero", str(zero_m), "--expert-parallel", str(ep_m),
            "--batch", str(4 // m), "--seq", "32"]
    if m == 1:
        must_pass(subprocess.run(argv, capture_output=True, text=True,
                                 env=dict(os.environ, OMP_NUM_THREADS="1")), " ".join(argv))
    else:
        must_pass(mpirun(m, argv), f"mpirun -np {m} " + " ".join(argv))
    la = read_log(os.path.join(d, "first.jsonl"))[5:]
    lb = read_log(os.path.join(d, "second.jsonl"))
    assert [x["step"] for x in la] == [x["step"] for x in lb] == list(range(6, 11))
    same_n = n == m and zero_n == zero_m and ep_n == ep_m
    for x, y in zip(la, lb):
        rel = abs(x["loss"] - y["loss"]) / abs(x["loss"])
        assert (rel == 0) if same_n else (rel <= 1e-5), (x["step"], x["loss"], y["loss"])
    for f in ("model.safetensors", "optimizer.safetensors"):
        a = read_safetensors(os.path.join(final_dir(d, "first"), f))
        b = read_safetensors(os.path.join(final_dir(d, "second"), f))
        for name in a:
            if same_n:
                assert a[name] == b[name], f"{f} {name}: resume with the same ranks is not exact"
            elif f == "model.safetensors":
                scale = max(max(abs(v) for v in a[name]), 1e-30)
                diff = max(abs(p - q) for p, q in zip(a[name], b[name]))
                tol = W8 if optimizer == "adamw8bit" else 1e-4
                assert diff <= tol * scale, f"{name}: max diff {diff} vs scale {scale}"
    print(f"ok: saved with {n} ranks (zero {zero_n}, ep {ep_n}), resumed with {m} (zero {zero_m}, "
          f"ep {ep_m}): " + ("exact" if same_n else "within tolerance"))


# Save with one layout, resume with another: (ranks, zero, expert parallel) before and after.
# resume_zero8_*: the 8-bit codes and block scales are gathered into the checkpoint and
# scattered back; resume_ep_2_to_2_exact: the moments of every expert are gathered into the
# checkpoint and scattered back; resume_ep_zero_*: the same from the shards of both parts;
# resume_ep8_*: the 8-bit codes and scales of every expert block from its owner.
RESUME_CASES = {
    "resume_2_to_1": dict(n=2, m=1, zero_n=0, zero_m=0),
    "resume_1_to_2": dict(n=1, m=2, zero_n=0, zero_m=0),
    "resume_zero_2_to_1": dict(n=2, m=1, zero_n=1, zero_m=0),
    "resume_1_to_zero_2": dict(n=1, m=2, zero_n=0, zero_m=1),
    "resume_zero_2_to_2_exact": dict(n=2, m=2, zero_n=1, zero_m=1),
    "resume_2_to_zero_2": dict(n=2, m=2, zero_n=0, zero_m=1),
    "resume_zero8_2_to_2_exact": dict(n=2, m=2, zero_n=1, zero_m=1, optimizer="adamw8bit"),
    "resume_zero8_2_to_1": dict(n=2, m=1, zero_n=1, zero_m=0, optimizer="adamw8bit"),
    "resume_1_to_zero8_4": dict(n=1, m=4, zero_n=0, zero_m=1, optimizer="adamw8bit"),
    "resume_ep_2_to_1": dict(n=2, m=1, zero_n=0, zero_m=0, ep_n=2),
    "resume_1_to_ep_2": dict(n=1, m=2, zero_n=0, zero_m=0, ep_m=2),
    "resume_ep_2_to_2_exact": dict(n=2, m=2, zero_n=0, zero_m=0, ep_n=2, ep_m=2),
    "resume_ep_zero_2_to_2_exact": dict(n=2, m=2, zero_n=1, zero_m=1, ep_n=2, ep_m=2),
    "resume_ep_zero_2_to_1": dict(n=2, m=1, zero_n=1, zero_m=0, ep_n=2),
    "resume_1_to_ep_zero_4": dict(n=1, m=4, zero_n=0, zero_m=1, ep_m=2),
    "resume_ep8_2_to_2_exact": dict(n=2, m=2, zero_n=0, zero_m=0, ep_n=2, ep_m=2,
                                    optimizer="adamw8bit"),
    "resume_ep8_2_to_1": dict(n=2, m=1, zero_n=0, zero_m=0, ep_n=2, optimizer="adamw8bit"),
    "resume_1_to_ep8_2": dict(n=1, m=2, zero_n=0, zero_m=0, ep_m=2, optimizer="adamw8bit"),
}
for _name, _kw in RESUME_CASES.items():
    TESTS[_name] = functools.partial(resume_case, **_kw)


# ---- bad combinations and failing ranks during training -------------------------------------

def one_error_line(p, must_contain):
    assert p.returncode != 0, f"expected a failure, got exit 0:\n{p.stdout[-2000:]}"
    lines = [l for l in p.stderr.splitlines() if l.startswith("moetrain: error: ")]
    assert len(lines) == 1, f"expected one error line, got:\n{p.stderr}"
    for w in must_contain:
        assert w in lines[0], f"'{w}' not in: {lines[0]}"
    assert "step 1/" not in p.stdout, f"training started:\n{p.stdout}"
    print(f"ok: exit {p.returncode} after {p.seconds:.1f} s -> {lines[0]}")


@test
def zero_with_sgd():
    d = work("zero_with_sgd")
    p = mpirun(2, train_argv(d, corpus(d), 2, "run", extra=["--zero", 1, "--optimizer", "sgd"]))
    one_error_line(p, ["rank 0 of 2", "--zero 1", "sgd has no optimizer state"])


@test
def ep_not_dividing_experts():
    d = work("ep_not_dividing_experts")
    p = mpirun(3, train_argv(d, corpus(d), 1, "run", extra=["--expert-parallel", 3]))
    one_error_line(p, ["rank 0 of 3", "--expert-parallel 3 does not divide the 4 experts"])


@test
def ep_not_dividing_ranks():
    d = work("ep_not_dividing_ranks")
    p = mpirun(2, train_argv(d, corpus(d), 2, "run", extra=["--expert-parallel", 4]))
    one_error_line(p, ["rank 0 of 2", "--expert-parallel 4 does not divide the 2 ranks"])


@test
def ep_dense_model():
    d = work("ep_dense_model")
    cfg = json.loads(subprocess.run([ARGS.moetrain, "config", "--preset", "tiny"],
                                    capture_output=True, text=True, check=True).stdout)
    del cfg["moe"]
    path = os.path.join(d, "dense.json")
    with open(path, "w") as f:
        json.dump(cfg, f)
    argv = train_argv(d, corpus(d), 2, "run", extra=["--expert-parallel", 2])
    argv[argv.index("--preset"):argv.index("--preset") + 2] = ["--config", path]
    one_error_line(mpirun(2, argv), ["rank 0 of 2", "needs an MoE model"])


@test
def ep_with_adamw8bit():
    # d_ff 130: the dense FFN before the MoE layer (3 x 130 x 64 elements) leaves the first
    # expert block off the 256-element grid of the 8-bit state.
    d = work("ep_with_adamw8bit")
    cfg = json.loads(subprocess.run([ARGS.moetrain, "config", "--preset", "tiny"],
                                    capture_output=True, text=True, check=True).stdout)
    cfg["d_ff"] = 130
    path = os.path.join(d, "unaligned.json")
    with open(path, "w") as f:
        json.dump(cfg, f)
    argv = train_argv(d, corpus(d), 2, "run", extra=["--expert-parallel", 2, "--optimizer",
                                                     "adamw8bit"])
    argv[argv.index("--preset"):argv.index("--preset") + 2] = ["--config", path]
    one_error_line(mpirun(2, argv), ["rank 0 of 2", "--expert-parallel 2 with --optimizer "
                                     "adamw8bit needs every expert block to start and end at a "
                                     "multiple of 256", "layers.1.moe.experts.w_", "offset ",
                                     "use --optimizer adamw"])


@test
def ep_zero_with_adamw8bit():
    d = work("ep_zero_with_adamw8bit")
    p = mpirun(2, train_argv(d, corpus(d), 2, "run", extra=["--expert-parallel", 2, "--zero", 1,
                                                            "--optimizer", "adamw8bit"]))
    one_error_line(p, ["rank 0 of 2", "--expert-parallel with --zero 1 and --optimizer adamw8bit "
                       "is not supported", "use --zero 0 or --optimizer adamw"])


@test
def ranks_disagree_on_data():
    d = work("ranks_disagree_on_data")
    a = corpus(d)
    b = os.path.join(d, "other.txt")
    with open(a) as f:
        text = f.read()
    with open(b, "w") as f:
        f.write(text[::-1])
    cmd = [ARGS.mpirun, "--allow-run-as-root", "--oversubscribe", "--mca", "btl", "self,vader",
           "-np", "1", *train_argv(d, a, 2, "run"), ":", "-np", "1", *train_argv(d, b, 2, "run")]
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=240,
                       env=dict(os.environ, OMP_NUM_THREADS="1"))
    p.seconds = time.monotonic() - t0
    one_error_line(p, ["rank 1 of 2: its training data differs from rank 0's"])


@test
def comm_single_with_ranks():
    d = work("comm_single_with_ranks")
    p = mpirun(2, train_argv(d, corpus(d), 2, "run", extra=["--comm", "single"]))
    assert p.returncode != 0
    assert "--comm single, but the launcher started 2 ranks" in p.stderr, p.stderr
    print("ok: --comm single under mpirun -np 2 fails")


@test
def rank_killed_during_training():
    # A rank killed in the middle of a run ends the job within a bounded time and the last
    # checkpoint rank 0 wrote stays loadable.
    d = work("rank_killed_during_training")
    data = corpus(d, 200000)
    argv = train_argv(d, data, 2, "run", extra=["--save-every", 2])
    argv[argv.index("--steps") + 1] = "100000"
    cmd = [ARGS.mpirun, "--allow-run-as-root", "--oversubscribe", "--mca", "btl", "self,vader",
           "-np", "2", *argv]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, OMP_NUM_THREADS="1"))
    run_dir = os.path.join(d, "run")
    deadline = time.monotonic() + 120
    while not (os.path.isdir(run_dir) and any(n.startswith("step_") for n in os.listdir(run_dir))):
        assert time.monotonic() < deadline and proc.poll() is None, "no checkpoint appeared"
        time.sleep(0.2)
    ranks = subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True, text=True)
    pids = [int(x) for x in ranks.stdout.split()]
    assert len(pids) == 2, f"expected 2 rank processes under mpirun, found {pids}"
    t0 = time.monotonic()
    os.kill(max(pids), 9)
    out, err = proc.communicate(timeout=120)
    took = time.monotonic() - t0
    assert proc.returncode != 0 and took < 60, (proc.returncode, took, err[-2000:])
    assert "signal 9" in err, err[-2000:]
    steps = sorted(n for n in os.listdir(run_dir) if n.startswith("step_"))
    ev = subprocess.run([ARGS.moetrain, "eval", "--checkpoint", run_dir, "--data", data,
                         "--batch", "2", "--seq", "32", "--threads", "1"],
                        capture_output=True, text=True)
    must_pass(ev, "eval of the last checkpoint")
    print(f"ok: killed a rank; job ended in {took:.1f} s (exit {proc.returncode}); "
          f"{steps[-1]} loads")


# ---- moetrain plan --ranks ------------------------------------------------------------------

def plan_json(*argv, ok=True):
    p = subprocess.run([ARGS.moetrain, "plan", "--preset", "moe-mini", "--batch", "2", "--seq",
                        "256", "--memory-gb", "80", *map(str, argv)], capture_output=True,
                       text=True)
    if not ok:
        return p
    must_pass(p, "plan " + " ".join(map(str, argv)))
    return json.loads(p.stdout.strip().splitlines()[-1])


@test
def plan_ranks_zero():
    one = plan_json()
    dp = plan_json("--ranks", 4)
    z = plan_json("--ranks", 4, "--zero", 1)
    assert dp["optimizer"] == one["optimizer"], (dp["optimizer"], one["optimizer"])
    ratio = z["optimizer"] / one["optimizer"]
    assert 0.2499 <= ratio <= 0.2501, ratio
    names = [c["collective"] for c in dp["collectives"]]
    assert "all_reduce gradients" in names and "all_reduce expert counts" in names, names
    zn = [c["collective"] for c in z["collectives"]]
    assert "reduce_scatter gradients" in zn and "all_gather parameters" in zn, zn
    grads = one["grads"]
    ar = sum(c["sent_bytes"] for c in dp["collectives"] if c["collective"] == "all_reduce gradients")
    assert abs(ar - 2 * 3 / 4 * grads) <= 1e-6 * grads + 16, (ar, grads)
    p = plan_json("--ranks", 2, "--zero", 1, "--optimizer", "sgd", ok=False)
    err = [l for l in p.stderr.splitlines() if l]
    assert p.returncode == 1 and len(err) == 1 and "sgd has no optimizer state" in err[0], p.stderr
    print(f"ok: plan: optimizer {one['optimizer']/1e9:.3f} GB, ZeRO-1 over 4: "
          f"{z['optimizer']/1e9:.3f} GB; gradient all-reduce {ar/1e6:.1f} MB sent per rank")


@test
def plan_expert_parallel():
    # moe-mini over 8 ranks, groups of 4: each rank keeps the weights, gradients and moments of
    # 1/4 of the experts and moves its routed rows with four all-to-all-v per MoE layer.
    dp = plan_json("--ranks", 8)
    ep = plan_json("--ranks", 8, "--expert-parallel", 4)
    cfg = json.loads(subprocess.run([ARGS.moetrain, "config", "--preset", "moe-mini"],
                                    capture_output=True, text=True, check=True).stdout)
    m = cfg["moe"]
    moe_layers = cfg["n_layers"] - m.get("first_layer", 0)
    hidden = 3 if cfg["ffn"] == "swiglu" else 2
    experts = moe_layers * m["n_experts"] * hidden * cfg["d_ff"] * cfg["d_model"]
    saved = dp["optimizer"] - ep["optimizer"]
    assert abs(saved - 8 * experts * 3 / 4) <= 64, (saved, experts)  # m and v, 3/4 of them
    for part in ("weights", "grads"):  # fp32: 4 bytes each, 3/4 of the experts elsewhere
        assert abs(dp[part] - ep[part] - 4 * experts * 3 / 4) <= 64, (part, dp[part], ep[part])
    names = {c["collective"]: c for c in ep["collectives"]}
    for n in ("all_to_all_v rows to experts", "all_to_all_v expert outputs",
              "all_to_all_v output grads", "all_to_all_v input grads",
              "all_reduce shared grads", "all_reduce expert grads"):
        assert n in names, (n, list(names))
    rows = 2 * 256 * m["top_k"]  # B T k rows per rank and MoE layer
    a2a = names["all_to_all_v expert outputs"]
    assert a2a["calls"] == moe_layers and a2a["message_bytes"] == rows * cfg["d_model"] * 4, a2a
    assert abs(a2a["sent_bytes"] - moe_layers * rows * cfg["d_model"] * 4 * 3 / 4) < 1, a2a
    assert 0 < ep["expert_dispatch"] < ep["expert_dispatch_max"], ep
    # 8-bit AdamW: 2 bytes of codes and 8 / 256 of block scales per element, 3/4 of the experts
    # saved (moe-mini's expert blocks lie on the 256-element grid).
    dp8 = plan_json("--ranks", 8, "--optimizer", "adamw8bit")
    ep8 = plan_json("--ranks", 8, "--expert-parallel", 4, "--optimizer", "adamw8bit")
    saved8 = dp8["optimizer"] - ep8["optimizer"]
    assert abs(saved8 - (2 + 8 / 256) * experts * 3 / 4) <= 64, (saved8, experts)
    for bad, why in ((["--ranks", 8, "--expert-parallel", 3], "does not divide the 8 ranks"),
                     (["--ranks", 32, "--expert-parallel", 32], "does not divide the 16 experts")):
        p = plan_json(*bad, ok=False)
        err = [l for l in p.stderr.splitlines() if l]
        assert p.returncode == 1 and len(err) == 1 and why in err[0], p.stderr
    print(f"ok: plan --expert-parallel 4 over 8 ranks: optimizer {ep['optimizer']/1e9:.3f} GB "
          f"(replicated {dp['optimizer']/1e9:.3f}; adamw8bit {ep8['optimizer']/1e9:.3f} of "
          f"{dp8['optimizer']/1e9:.3f}), expert rows {ep['expert_dispatch']/1e6:.1f} MB")


@test
def plan_expert_parallel_zero():
    # moe-mini over 8 ranks, EP 4 with ZeRO-1: the non-expert moments over 8 ranks and each
    # rank's quarter of the experts over the 2 ranks holding it: 1/8 of the moments per rank.
    one = plan_json()
    epz = plan_json("--ranks", 8, "--expert-parallel", 4, "--zero", 1)
    ratio = epz["optimizer"] / one["optimizer"]
    assert abs(ratio - 1 / 8) <= 1e-5, ratio
    names = [c["collective"] for c in epz["collectives"]]
    for n in ("reduce_scatter shared grads", "reduce_scatter expert grads", "all_reduce grad norm",
              "all_gather shared params", "all_gather expert params"):
        assert n in names, (n, names)
    assert "all_reduce shared grads" not in names, names
    p = plan_json("--ranks", 8, "--expert-parallel", 4, "--zero", 1, "--optimizer", "adamw8bit",
                  ok=False)
    err = [l for l in p.stderr.splitlines() if l]
    assert p.returncode == 1 and len(err) == 1 and "--zero 1 and --optimizer adamw8bit is not " \
        "supported" in err[0], p.stderr
    print(f"ok: plan --expert-parallel 4 --zero 1 over 8 ranks: optimizer "
          f"{epz['optimizer']/1e9:.4f} GB, 1/{1 / ratio:.3f} of one process's")


# ---- cuda + nccl (machines with two or more GPUs; skipped elsewhere) --------------------------

def cuda_gpus():
    p = subprocess.run([ARGS.moetrain, "info"], capture_output=True, text=True)
    n = sum(1 for l in p.stdout.splitlines()
            if l.strip().startswith("cuda:") and "unavailable" not in l)
    module = os.path.join(os.path.dirname(ARGS.moetrain), "libmoetrain_comm_nccl.so")
    return n if os.path.exists(module) else 0


def need_gpus(n):
    if cuda_gpus() < n:
        print(f"skipped: needs {n} CUDA GPUs and the nccl communicator module")
        sys.exit(77)


@test
def collectives_cuda_np2():
    need_gpus(2)
    collectives(2, "cuda")


@test
def dp_cuda_np2():
    need_gpus(2)
    equivalence(2, device="cuda")


@test
def zero_cuda_np2():
    need_gpus(2)
    equivalence(2, device="cuda", extra=["--zero", 1])


@test
def ep_cuda_np2():
    # NCCL's all-to-all-v (ncclSend / ncclRecv) and ncclCommSplit subgroups.
    need_gpus(2)
    ep_equivalence(2, 2, device="cuda")


@test
def ep_zero_cuda_np2():
    # The two parts' NCCL reduce-scatters and all-gathers (over all ranks, over a subgroup).
    need_gpus(2)
    ep_equivalence(2, 2, device="cuda", zero=1)


def opencl_available():
    p = subprocess.run([ARGS.moetrain, "info"], capture_output=True, text=True)
    return any(l.split()[:2] == ["opencl", "available"] for l in p.stdout.splitlines())


def main(tests=None):
    # Runs one test of `tests` (default: this file's) by name, or lists them; the other dist
    # test scripts call it with theirs.
    global ARGS
    tests = TESTS if tests is None else tests
    ap = argparse.ArgumentParser()
    ap.add_argument("--mpirun", default="mpirun")
    ap.add_argument("--moetrain", default="")
    ap.add_argument("--comm-check", default="")
    ap.add_argument("--work", default="")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("name", nargs="?")
    ARGS = ap.parse_args()
    if ARGS.list:
        print(";".join(tests))
        return
    os.makedirs(ARGS.work, exist_ok=True)
    tests[ARGS.name]()


if __name__ == "__main__":
    main()
