#!/usr/bin/env python3
"""Hostile-input and fault tests of the moetrain CLI (stdlib only): defects an adversarial
review found, checkpoint integrity (checksums, byte flips, `moetrain verify`), graceful stop,
SIGKILL chaos, injected IO faults, memory limits. Registered with ctest like cli_tests.py:

    harden_tests.py --moetrain build/moetrain --work DIR [--fault-lib LIB] TEST_NAME
"""
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

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import cli_testlib  # noqa: E402
from cli_testlib import (ARGS, Skip, expect_error, last_json, main, read_json, run,  # noqa: E402
                         test, work)

TINY = ["--device", "cpu", "--preset", "tiny", "--batch", "2", "--seq", "16", "--threads", "1"]


def corpus(d):
    """The shared test corpus, small: these cases train only a few steps of batch 2."""
    return cli_testlib.corpus(d, 20000)


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


# ---- checkpoint integrity ----------------------------------------------------------------

def crc32c(data, crc=0):
    """Reference CRC32C (bitwise table, independent of moetrain's implementation)."""
    table = crc32c.table
    if table is None:
        table = []
        for i in range(256):
            c = i
            for _ in range(8):
                c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
            table.append(c)
        crc32c.table = table
    c = crc ^ 0xFFFFFFFF
    for b in data:
        c = table[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


crc32c.table = None


def safetensors_layout(path):
    """(header_end, {name: (begin, end)}) with absolute file offsets."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
    spans = {k: (8 + n + v["data_offsets"][0], 8 + n + v["data_offsets"][1])
             for k, v in header.items() if k != "__metadata__"}
    return 8 + n, spans, header.get("__metadata__", {})


def small_checkpoint(d, optimizer="adamw"):
    data = corpus(d)
    run("train", *TINY, "--data", data, "--steps", 2, "--optimizer", optimizer, "--out",
        f"{d}/run", "--quiet")
    return data, f"{d}/run/step_000002"


@test
def checksums_are_crc32c_of_files_and_tensors():
    d = work("checksums_are_crc32c")
    _, ck = small_checkpoint(d)
    state = read_json(f"{ck}/state.json")
    sums = state["checksums"]
    for name in ["model.safetensors", "optimizer.safetensors"]:
        with open(f"{ck}/{name}", "rb") as f:
            raw = f.read()
        assert sums[name] == f"crc32c:{crc32c(raw):08x}", name
        _, spans, meta = safetensors_layout(f"{ck}/{name}")
        per_tensor = json.loads(meta["crc32c"])
        assert set(per_tensor) == set(spans)
        for t, (b, e) in list(spans.items())[:6]:
            assert per_tensor[t] == f"crc32c:{crc32c(raw[b:e]):08x}", t
    canon = dict(state)
    canon["checksums"] = {k: v for k, v in sums.items() if k != "state.json"}
    text = json.dumps(canon, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert sums["state.json"] == f"crc32c:{crc32c(text.encode()):08x}", text[:200]
    p = run("verify", ck)
    j = last_json(p)
    n = sum(len(safetensors_layout(f"{ck}/{x}")[1])
            for x in ["model.safetensors", "optimizer.safetensors"])
    assert j["checksummed"] and j["tensors"] == n, (j, n)


@test
def byte_flips_are_detected():
    d = work("byte_flips")
    data, ck = small_checkpoint(d)
    files = ["model.safetensors", "optimizer.safetensors", "state.json"]
    blobs = {f: open(f"{ck}/{f}", "rb").read() for f in files}
    layouts = {f: safetensors_layout(f"{ck}/{f}") for f in files[:2]}
    rng = random.Random(17)
    total = sum(len(b) for b in blobs.values())
    offsets = []  # (file, offset): 60 anywhere, 20 in the safetensors headers, 20 in state.json
    for _ in range(60):
        o = rng.randrange(total)
        for f in files:
            if o < len(blobs[f]):
                offsets.append((f, o))
                break
            o -= len(blobs[f])
    for _ in range(20):
        f = rng.choice(files[:2])
        offsets.append((f, rng.randrange(layouts[f][0])))
    for _ in range(20):
        offsets.append(("state.json", rng.randrange(len(blobs["state.json"]))))
    flip_dir = f"{d}/flipped"
    detected = harmless = 0
    for i, (f, o) in enumerate(offsets):
        shutil.rmtree(flip_dir, ignore_errors=True)
        shutil.copytree(ck, flip_dir)
        b = bytearray(blobs[f])
        old = b[o]
        b[o] ^= rng.randrange(1, 256)
        with open(f"{flip_dir}/{f}", "wb") as fh:
            fh.write(b)
        p = run("verify", flip_dir, ok=False)
        if p.returncode == 0:
            # Only a whitespace byte of state.json turned into another whitespace byte can
            # leave the contents (and so the canonical checksum) unchanged.
            ws = b" \t\r\n"
            assert f == "state.json" and old in ws and b[o] in ws, (f, o, old, b[o], p.stdout)
            harmless += 1
            continue
        err = p.stderr.strip().splitlines()
        assert 0 < p.returncode < 128 and len(err) == 1, (f, o, p.returncode, p.stderr)
        assert f in err[0], (f, o, err[0])
        if f != "state.json":
            hdr_end, spans, _ = layouts[f]
            inside = [t for t, (s0, e0) in spans.items() if s0 <= o < e0]
            if inside:
                assert f'"{inside[0]}"' in err[0], (f, o, inside, err[0])
        detected += 1
        if i % 20 == 0:  # loading refuses it too, with the same line
            q = run("eval", "--checkpoint", flip_dir, "--data", data, "--batch", 2, "--seq", 16,
                    "--batches", 1, ok=False)
            assert q.returncode == 1 and q.stderr.strip().splitlines() == err, (q.stderr, err)
            q = run("train", *TINY, "--data", data, "--steps", 3, "--resume", flip_dir, ok=False)
            assert q.returncode == 1 and q.stderr.strip().splitlines() == err, (q.stderr, err)
    print(f"{len(offsets)} flips: {detected} detected, {harmless} harmless (state.json "
          f"whitespace), 0 loaded")
    assert detected + harmless == len(offsets) == 100


@test
def tokenizer_copy_flips_are_detected():
    # The tokenizer copy next to state.json is not among the CRC32C checksums: its SHA-256 in
    # state.json guards it, checked by verify as by loading.
    d = work("tokenizer_copy_flips")
    data = corpus(d)
    tok = f"{d}/tok.json"
    run("tokenizer", "train", "--data", data, "--vocab-size", 300, "--out", tok)
    vocab = len(json.load(open(tok))["model"]["vocab"])
    cfg = json.loads(run("config", "--preset", "tiny").stdout)
    cfg["vocab_size"] = vocab
    with open(f"{d}/model.json", "w") as f:
        json.dump(cfg, f)
    run("train", "--device", "cpu", "--config", f"{d}/model.json", "--batch", 2, "--seq", 16,
        "--threads", 1, "--data", data, "--tokenizer", tok, "--steps", 2, "--out", f"{d}/run",
        "--quiet")
    ck = f"{d}/run/step_000002"
    blob = open(f"{ck}/tokenizer.json", "rb").read()
    assert blob == open(tok, "rb").read()
    j = last_json(run("verify", ck))
    assert j["tokenizer"] == "tokenizer.json", j
    rng = random.Random(23)
    flip_dir = f"{d}/flipped"
    flips = 30
    for i in range(flips):
        shutil.rmtree(flip_dir, ignore_errors=True)
        shutil.copytree(ck, flip_dir)
        b = bytearray(blob)
        b[rng.randrange(len(b))] ^= rng.randrange(1, 256)
        with open(f"{flip_dir}/tokenizer.json", "wb") as fh:
            fh.write(b)
        p = run("verify", flip_dir, ok=False)
        err = p.stderr.strip().splitlines()
        assert 0 < p.returncode < 128 and len(err) == 1, (i, p.returncode, p.stdout, p.stderr)
        assert err[0].startswith("moetrain: error: ") and "tokenizer.json" in err[0] and \
            "SHA-256" in err[0], err[0]
        if i % 5 == 0:  # loading refuses it with the same line
            q = run("eval", "--checkpoint", flip_dir, "--data", data, "--batch", 2, "--seq", 16,
                    "--batches", 1, ok=False)
            assert q.returncode == 1 and q.stderr.strip().splitlines() == err, (q.stderr, err)
    # A missing copy is reported too.
    os.remove(f"{flip_dir}/tokenizer.json")
    p = expect_error(["verify", flip_dir], "tokenizer.json")
    print(f"{flips} flips in the tokenizer copy: all detected by verify, and by eval")


@test
def checkpoints_without_checksums_load_with_a_warning():
    d = work("without_checksums")
    data, ck = small_checkpoint(d)
    state = read_json(f"{ck}/state.json")
    del state["checksums"]
    with open(f"{ck}/state.json", "w") as f:
        json.dump(state, f, indent=2)
    p = run("verify", ck)
    assert "no checksums" in p.stderr and p.stderr.startswith("moetrain: warning: "), p.stderr
    assert last_json(p)["checksummed"] is False
    p = run("train", *TINY, "--data", data, "--steps", 3, "--resume", f"{d}/run", "--out",
            f"{d}/run", "--quiet")
    assert "no checksums" in p.stderr, p.stderr
    run("verify", f"{d}/run")  # the new checkpoint has them
    assert "checksums" in json.load(open(f"{d}/run/step_000003/state.json"))


# ---- graceful stop and crash chaos -------------------------------------------------------

def popen_train(argv):
    return subprocess.Popen([ARGS.moetrain, "train", *map(str, argv)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def wait_for_log_step(log, step, proc, timeout=120):
    deadline = time.time() + timeout
    while time.time() < deadline and proc.poll() is None:
        if os.path.exists(log):
            with open(log) as f:
                # Only whole lines: the writer may be in the middle of the next one.
                done = [json.loads(x)["step"] for x in f if x.endswith("\n") and x.strip()]
            if done and done[-1] >= step:
                return done[-1]
        time.sleep(0.01)
    raise AssertionError(f"the run did not reach step {step}")


def same_files(a, b, names=("model.safetensors", "optimizer.safetensors")):
    for n in names:
        with open(f"{a}/{n}", "rb") as fa, open(f"{b}/{n}", "rb") as fb:
            if fa.read() != fb.read():
                return False
    return True


@test
def sigint_and_sigterm_stop_gracefully_and_resume_exactly():
    d = work("graceful_stop")
    data = corpus(d)
    common = [*TINY, "--data", data, "--steps", 100000, "--lr", "3e-3", "--quiet"]
    for sig, code in [(signal.SIGINT, 130), (signal.SIGTERM, 143)]:
        run_dir, log = f"{d}/run{code}", f"{d}/log{code}.jsonl"
        proc = popen_train([*common, "--out", run_dir, "--log-json", log])
        wait_for_log_step(log, 3, proc)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == code, (proc.returncode, err)
        lines = err.strip().splitlines()
        assert len(lines) == 1 and "stopped by" in lines[0], err
        stopped = int(lines[0].split("after step ")[1].split(";")[0])
        ck = f"{run_dir}/step_{stopped:06d}"
        assert os.path.isdir(ck), (ck, os.listdir(run_dir))
        run("verify", ck)
        with open(log) as f:
            assert [json.loads(x)["step"] for x in f][-1] == stopped
        # --resume continues exactly: same bytes as an uninterrupted run of the same length.
        end = stopped + 3
        run("train", *common, "--resume", run_dir, "--out", run_dir, "--stop-at", end)
        ref = f"{d}/ref{code}"
        run("train", *common, "--out", ref, "--stop-at", end)
        assert same_files(f"{run_dir}/step_{end:06d}", f"{ref}/step_{end:06d}")
        print(f"{sig.name}: exit {code} after step {stopped}; resumed to {end} bit-identical")


@test
def sigint_at_random_moments_of_a_step_never_crashes():
    # The handler runs on its own stack: on the interrupted one it overwrote data that
    # compute kernels keep below the stack pointer (free(): invalid pointer in ~1 of 8 runs).
    d = work("sigint_random_moments")
    data = corpus(d)
    rng = random.Random(11)
    for i in range(24):
        log = f"{d}/log{i}.jsonl"
        proc = popen_train([*TINY, "--data", data, "--steps", 100000, "--lr", "3e-3", "--quiet",
                            "--log-json", log])
        wait_for_log_step(log, 1, proc)
        time.sleep(rng.uniform(0, 0.08))
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 130, (i, proc.returncode, err)
    print("24 SIGINTs at random moments: every run exited 130")


@test
def second_sigint_exits_at_once_and_keeps_checkpoints():
    d = work("second_sigint")
    data = corpus(d)
    run_dir, log = f"{d}/run", f"{d}/log.jsonl"
    proc = popen_train([*TINY, "--data", data, "--steps", 100000, "--save-every", 1, "--out",
                        run_dir, "--log-json", log, "--quiet"])
    # A step is logged before its checkpoint is written, so step 5 in the log means that
    # step_000004 is complete; the interrupt may land in the middle of step 5's own write.
    wait_for_log_step(log, 5, proc)
    proc.send_signal(signal.SIGINT)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, (proc.returncode, err)
    assert len(err.strip().splitlines()) == 1, err
    steps = sorted(x for x in os.listdir(run_dir) if x.startswith("step_") and ".tmp-" not in x)
    assert len(steps) >= 4, steps
    for s in steps:
        run("verify", f"{run_dir}/{s}")
    print(f"exit 130 at once; {len(steps)} checkpoints intact: {steps[0]}..{steps[-1]}")


@test
def sigkill_chaos_ends_bit_identical():
    d = work("sigkill_chaos")
    data = corpus(d)
    # ~30 ms per step, so that each life of the process (0.05-0.8 s, scaled below) covers a few steps
    # and 20 kills land before step `total`: during start-up, steps and checkpoint writes.
    total = 400
    common = ["--device", "cpu", "--preset", "tiny", "--batch", 8, "--seq", 64, "--threads", 1,
              "--data", data, "--steps", total, "--lr", "3e-3", "--save-every", 3, "--quiet"]
    ref = f"{d}/ref"
    t_ref = time.monotonic()
    run("train", *common, "--out", ref)
    # Lives scale with the measured step time (faster machines or builds get shorter lives), so
    # that 20 kills land before step `total` whatever the speed.
    life_scale = min(1.0, max(0.1, (time.monotonic() - t_ref) / total / 0.030))
    run_dir = f"{d}/run"
    rng = random.Random(5)
    kills = progressed = 0
    while kills < 20:
        resume = ["--resume", run_dir] if os.path.isdir(run_dir) and any(
            x.startswith("step_") and ".tmp-" not in x for x in os.listdir(run_dir)) else []
        proc = popen_train([*common, "--out", run_dir, *resume])
        time.sleep(rng.uniform(0.05, 0.8) * life_scale)
        if proc.poll() is not None:
            out, err = proc.communicate()
            assert proc.returncode == 0, err
            break  # finished before 20 kills: the assertion below reports it
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
        kills += 1
        steps = sorted(int(x[5:]) for x in os.listdir(run_dir)
                       if x.startswith("step_") and ".tmp-" not in x) if os.path.isdir(
                           run_dir) else []
        progressed = steps[-1] if steps else 0
        if steps:
            run("verify", f"{run_dir}/step_{steps[-1]:06d}")
    assert kills >= 20, f"the run finished after {kills} kills; make it longer"
    run("train", *common, "--out", run_dir, "--resume", run_dir)
    final = f"step_{total:06d}"
    assert same_files(f"{run_dir}/{final}", f"{ref}/{final}"), "weights differ"
    print(f"{kills} SIGKILLs (newest checkpoint at the last kill: step {progressed}); final "
          f"weights and moments bit-identical to the uninterrupted run")
    shutil.rmtree(d, ignore_errors=True)  # ~130 checkpoints of 2.4 MB each


# ---- IO faults ----------------------------------------------------------------------------

def fault_env(op, err, path, nth=1):
    if not ARGS.fault_lib or not os.path.exists(ARGS.fault_lib):
        raise Skip("no --fault-lib (the LD_PRELOAD shim of tests/fault_inject/)")
    return dict(os.environ, LD_PRELOAD=ARGS.fault_lib, MOETRAIN_FAULT_OP=op,
                MOETRAIN_FAULT_ERRNO=err, MOETRAIN_FAULT_PATH=path, MOETRAIN_FAULT_NTH=str(nth))


STRERROR = {"ENOSPC": "No space left on device", "EIO": "Input/output error"}


def complete_and_verified(run_dir):
    """Names in run_dir; every one must be a complete checkpoint that verifies."""
    names = sorted(os.listdir(run_dir))
    for n in names:
        assert n.startswith("step_") and ".tmp-" not in n, f"left behind in {run_dir}: {n}"
        run("verify", f"{run_dir}/{n}")
    return names


@test
def checkpoint_write_faults_stop_with_one_line():
    d = work("checkpoint_write_faults")
    data = corpus(d)
    cases = [("write", "ENOSPC", 1), ("write", "EIO", 3), ("fsync", "EIO", 1),
             ("fsync", "ENOSPC", 2), ("close", "EIO", 1), ("rename", "EIO", 1),
             ("rename", "ENOSPC", 1)]
    for op, err, nth in cases:
        run_dir = f"{d}/run_{op}_{err}"
        # Step 2's checkpoint is written; the fault hits the writing of step 4's.
        p = expect_error(["train", *TINY, "--data", data, "--steps", 6, "--save-every", 2,
                          "--out", run_dir, "--quiet"], [STRERROR[err], "step_000004"],
                         env=fault_env(op, err, "step_000004", nth))
        assert complete_and_verified(run_dir) == ["step_000002"], os.listdir(run_dir)
        # The run continues from the checkpoint that was written.
        run("train", *TINY, "--data", data, "--steps", 6, "--save-every", 2, "--resume",
            run_dir, "--out", run_dir, "--quiet")
        assert complete_and_verified(run_dir) == ["step_000002", "step_000004", "step_000006"]


@test
def log_write_faults_stop_with_one_line():
    d = work("log_write_faults")
    data = corpus(d)
    for op, err in [("write", "ENOSPC"), ("write", "EIO"), ("close", "EIO")]:
        run_dir, log = f"{d}/run_{op}_{err}", f"{d}/log_{op}_{err}.jsonl"
        nth = 3 if op == "write" else 1
        steps = 5
        p = expect_error(["train", *TINY, "--data", data, "--steps", steps, "--out", run_dir,
                          "--log-json", log, "--quiet"], ["--log-json", STRERROR[err]],
                         env=fault_env(op, err, os.path.basename(log), nth))
        names = complete_and_verified(run_dir)
        with open(log) as f:
            logged = [json.loads(x)["step"] for x in f if x.strip()]
        if op == "write":  # stopped after step 3, whose checkpoint was saved first
            assert names == ["step_000003"] and logged == [1, 2], (names, logged)
        else:  # the close at the end: every step logged and the final checkpoint saved
            assert names == [f"step_{steps:06d}"] and logged == list(range(1, steps + 1))


@test
def shard_write_faults_stop_with_one_line():
    # `moetrain tokenize` writes each shard to a temporary sibling, fsyncs and renames it, all
    # in a temporary directory whose shards reach --out only when the corpus is complete: a
    # fault leaves no shard at all (a part of the corpus would pass for the whole of it).
    d = work("shard_write_faults")
    data = corpus(d)
    argv = ["tokenize", "--tokenizer", "bytes", "--eot", 0, "--data", data, "--shard-tokens",
            5000, "--val-tokens", 2000, "--quiet"]
    ref = f"{d}/ref"
    run(*argv, "--out", ref)
    want = tree_digest(ref)
    manifest = ".moetrain-output.json"  # written once the shards are published (RELIABILITY.md)
    # 20001 tokens: 2000 val, 3 x 5000 and 3001 train, and the manifest
    assert len(want) == 6 and manifest in want, sorted(want)
    kept = []
    cases = [("write", "ENOSPC", "data_train_000002", kept),
             ("write", "EIO", "data_train_000002", kept),
             ("fsync", "ENOSPC", "data_train_000002", kept),
             ("fsync", "EIO", "data_train_000002", kept),
             ("close", "EIO", "data_train_000002", kept),
             ("rename", "ENOSPC", "data_train_000002", kept),
             ("rename", "EIO", "data_train_000002", kept),
             ("write", "ENOSPC", "data_val_000000", kept)]
    for i, (op, err, shard, left) in enumerate(cases):
        out = f"{d}/out{i}"  # the fault's path matches only the shard's files
        expect_error([*argv, "--out", out], [STRERROR[err], f"{shard}.bin",
                                             f"no shard was written to {out}"],
                     env=fault_env(op, err, shard))
        got = tree_digest(out)
        assert sorted(got) == left, f"{op} {err}: left in {out}: {sorted(got)}"
        run(*argv, "--out", out)  # without the fault the same command completes the set
        assert tree_digest(out) == want, f"{op} {err}: rerun differs"
    print(f"{len(cases)} shard-write faults: one line each, no shard under a final name, no "
          "temporary file left; a rerun writes the same shards")


def mount_tmpfs_and_run(d, size, script):
    """Run `script` (sh) with a fresh tmpfs of `size` at d/disk: directly as root, else in a
    user + mount namespace. Returns the CompletedProcess; skips when neither can mount."""
    disk = f"{d}/disk"
    os.makedirs(disk, exist_ok=True)
    body = f"mount -t tmpfs -o size={size} tmpfs {disk} || exit 99\n{script}"
    for prefix in ([] if os.geteuid() != 0 else [["sh", "-c"]]) + [["unshare", "-rm", "sh",
                                                                      "-c"]]:
        if os.geteuid() == 0 and prefix[0] == "sh":
            full = f"{body}\nrc=$?\numount {disk}\nexit $rc"
        else:
            full = body
        try:
            p = subprocess.run([*prefix, full], capture_output=True, text=True, timeout=600)
        except FileNotFoundError:
            continue
        if p.returncode != 99:
            return p
    raise Skip("cannot mount a tmpfs here (not root, no user namespaces)")


@test
def real_disk_full_on_tmpfs():
    d = work("real_disk_full")
    data = corpus(d)
    exe = ARGS.moetrain
    tiny = " ".join(map(str, TINY))
    # 6 MB: two checkpoints of ~2.5 MB fit, the third does not.
    script = f"""
{exe} train {tiny} --data {data} --steps 10 --save-every 2 --out {d}/disk/run --quiet \
    >{d}/train.out 2>{d}/train.err
echo "train-rc=$?"
for c in {d}/disk/run/*; do {exe} verify $c >/dev/null 2>&1 && echo "ok $(basename $c)" \
    || echo "bad $(basename $c)"; done
"""
    p = mount_tmpfs_and_run(d, "6m", script)
    print(p.stdout, p.stderr)
    err = open(f"{d}/train.err").read().strip().splitlines()
    assert "train-rc=1" in p.stdout, p.stdout
    assert len(err) == 1 and err[0].startswith("moetrain: error: ") and \
        "No space left on device" in err[0], err
    lines = [x for x in p.stdout.splitlines() if x.startswith(("ok ", "bad "))]
    assert lines and all(x.startswith("ok step_") for x in lines), lines
    print(f"disk full: {err[0]}; kept {[x[3:] for x in lines]}")


# ---- out of memory --------------------------------------------------------------------------

@test
def plans_beyond_memory_fail_before_step_1():
    d = work("memory_limits")
    data = corpus(d)
    p = expect_error(["train", *TINY, "--data", data, "--steps", 5, "--memory-limit", "0.001",
                      "--out", f"{d}/run"], ["needs", "GB", "0.001 GB available"])
    assert no_steps_ran(p) and not os.path.exists(f"{d}/run/step_000005")
    # Larger than this machine's memory, whatever the data: refused before reading it.
    t0 = time.time()
    p = expect_error(["train", *TINY[:4], "--batch", 200000, "--seq", 128, "--data", data,
                      "--steps", 5], ["needs", "GB available on cpu"])
    assert time.time() - t0 < 30 and no_steps_ran(p)
    run("train", *TINY, "--data", data, "--steps", 1, "--out", f"{d}/ok", "--quiet",
        "--memory-limit", 1)
    expect_error(["eval", "--checkpoint", f"{d}/ok", "--data", data, "--batch", 200000, "--seq",
                  128], ["this evaluation needs", "GB available"])


@test
def endless_and_deep_inputs_are_refused():
    d = work("endless_inputs")
    data = corpus(d)
    for dev in ["/dev/zero", "/dev/urandom"]:
        expect_error(["train", *TINY, "--data", dev, "--steps", 1], [dev, "not a regular file"])
        expect_error(["config", "--config", dev], [dev, "not a regular file"])
    deep = f"{d}/deep.json"
    with open(deep, "w") as f:
        f.write("[" * 200000 + "]" * 200000)
    expect_error(["config", "--config", deep], "nested deeper")
    with open(f"{d}/layers.json", "w") as f:
        cfg = json.loads(run("config", "--preset", "tiny").stdout)
        cfg["n_layers"] = 1000000000
        json.dump(cfg, f)
    for sub in [["config"], ["plan", "--batch", 1, "--seq", 8]]:
        expect_error([*sub, "--config", f"{d}/layers.json"], "n_layers")


if __name__ == "__main__":
    sys.exit(main(lambda ap: ap.add_argument("--fault-lib", default="")))
