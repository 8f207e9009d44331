#!/usr/bin/env python3
"""SIGINT / SIGTERM against every long-running command (docs/RELIABILITY.md, "Stops and
interruptions"), stdlib only. A stop takes effect within one bounded unit of work (an
evaluation batch, a piece of text, a tensor), the command prints one line saying what it
stopped and what it left, exits 130 / 143, and leaves nothing that a later command would
trust: no shard of a part of the corpus, no half export or import, no temporary directory.

Each case waits for a marker that the work is under way (a progress line, a logged step, a
file of the run appearing or opened) before it sends the signal, so that a loaded machine
only makes it slower. Registered with ctest as signals:CASE:

    signal_tests.py --moetrain build/moetrain --work DIR CASE
"""
import glob
import json
import os
import queue
import random
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import cli_testlib  # noqa: E402
from cli_testlib import ARGS, expect_error, main, run, test, work  # noqa: E402

TINY = ["--device", "cpu", "--preset", "tiny", "--batch", "2", "--seq", "16", "--threads", "1"]
SIGNALS = [(signal.SIGINT, 130), (signal.SIGTERM, 143)]
STOP_WITHIN_S = 20  # one bounded unit of work, with room for a loaded 2-core machine


class Running:
    """moetrain ARGV in the background; its stdout lines are collected as they come."""

    def __init__(self, *argv):
        self.argv = [str(a) for a in argv]
        self.proc = subprocess.Popen([ARGS.moetrain, *self.argv], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)
        self.lines = queue.Queue()
        self.out = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):  # chunks as they come: generated text has no line ends
        while chunk := os.read(self.proc.stdout.fileno(), 1 << 16):
            self.lines.put(chunk.decode("utf-8", "replace"))

    def stderr(self):
        return self.proc.stderr.read().decode("utf-8", "replace")

    def wait_for(self, ready, what, timeout=300):
        """Polls ready() (and the stdout lines) until it is true; fails if the process ends
        first or the timeout passes."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            while not self.lines.empty():
                self.out.append(self.lines.get())
            if ready():
                return
            if self.proc.poll() is not None:
                raise AssertionError(f"{' '.join(self.argv)[:200]} ended ({self.proc.returncode})"
                                     f" before {what}:\n{''.join(self.out)[-2000:]}\n"
                                     f"{self.stderr()[-2000:]}")
            time.sleep(0.005)
        raise AssertionError(f"no {what} within {timeout} s")

    def printed(self, prefix):
        return lambda: any(line.startswith(prefix) for line in "".join(self.out).splitlines())

    def handlers_installed(self):
        """main() has installed its SIGINT and SIGTERM handlers (/proc/PID/status SigCgt)."""
        try:
            with open(f"/proc/{self.proc.pid}/status") as f:
                caught = int(f.read().split("SigCgt:")[1].split()[0], 16)
        except (OSError, IndexError, ValueError):
            return False
        want = (1 << (signal.SIGINT - 1)) | (1 << (signal.SIGTERM - 1))
        return caught & want == want

    def stop(self, sig, code):
        """Sends `sig`; the process must exit with `code` within STOP_WITHIN_S seconds with
        exactly one stderr line "moetrain: stopped by SIG...". Returns that line."""
        t0 = time.time()
        self.proc.send_signal(sig)
        try:
            self.proc.wait(timeout=STOP_WITHIN_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise AssertionError(f"{sig.name} did not stop {' '.join(self.argv)[:200]} within "
                                 f"{STOP_WITHIN_S} s")
        took = time.time() - t0
        err = self.stderr().strip().splitlines()
        assert self.proc.returncode == code, (self.proc.returncode, err)
        assert len(err) == 1 and err[0].startswith(f"moetrain: stopped by {sig.name}"), err
        print(f"{sig.name}: exit {code} after {took:.2f} s: {err[0]}")
        return err[0]


def corpus(d, n_bytes=20000):
    return cli_testlib.corpus(d, n_bytes)


def listing(d):
    """Every file and directory under d (hidden ones too), relative."""
    out = []
    for root, dirs, files in os.walk(d):
        out += [os.path.relpath(os.path.join(root, n), d) for n in dirs + files]
    return sorted(out)


def leftovers(parent):
    """Temporary names (*.tmp-PID) directly in `parent`."""
    return [n for n in os.listdir(parent) if ".tmp-" in n]


@test
def eval_command_stops_within_a_batch():
    # --batches 10^9 would run for days: the first signal must end it at the next batch.
    d = work("eval_stops")
    data = corpus(d)
    run("train", *TINY, "--data", data, "--steps", 1, "--out", f"{d}/run")
    for sig, code in SIGNALS:
        r = Running("eval", "--checkpoint", f"{d}/run", "--data", data, "--batch", 2, "--seq",
                    16, "--threads", 1, "--batches", 10**9)
        r.wait_for(r.printed("eval: "), "a progress line of the evaluation")
        line = r.stop(sig, code)
        assert "during the evaluation (batch " in line and "eval writes no files" in line, line


@test
def train_abandons_a_long_evaluation_and_saves_the_step():
    # An evaluation of 10^9 batches after step 1: the stop abandons it, saves step 1, exits.
    d = work("train_eval_stops")
    data = corpus(d)
    for sig, code in SIGNALS:
        run_dir, log = f"{d}/run{code}", f"{d}/log{code}.jsonl"
        r = Running("train", *TINY, "--data", data, "--steps", 1000, "--eval-every", 1,
                    "--eval-batches", 10**9, "--out", run_dir, "--log-json", log, "--quiet")
        # Step 1 is logged before its evaluation starts (no save: --save-every is not given).
        r.wait_for(lambda: os.path.exists(log) and any(
            json.loads(x).get("step") == 1 for x in open(log) if x.endswith("\n")),
            "step 1 in the log")
        line = r.stop(sig, code)
        assert "during the evaluation (batch " in line and "after step 1;" in line, line
        assert f"saved {run_dir}/step_000001" in line, line
        run("verify", f"{run_dir}/step_000001")
        assert not any("eval" in json.loads(x) for x in open(log)), "an abandoned eval logged"
        assert leftovers(run_dir) == [], os.listdir(run_dir)
        # The run continues from the saved step.
        run("train", *TINY, "--data", data, "--steps", 1000, "--resume", run_dir, "--out",
            run_dir, "--stop-at", 2, "--quiet")


def big_corpus(d, n_bytes):
    """A text of n_bytes from the shared sentence generator, written in blocks."""
    block = open(corpus(d, 1 << 20)).read()
    path = os.path.join(d, "big.txt")
    with open(path, "w") as f:
        for _ in range(n_bytes // len(block)):
            f.write(block)
    return path


def tokenize_argv(data, out):
    # Many small shards (each fsynced): the run takes a while, and shards appear early.
    return ["tokenize", "--tokenizer", "bytes", "--eot", 0, "--data", data, "--out", out,
            "--shard-tokens", 20000, "--threads", 1, "--piece-bytes", 1 << 16]


def staged_shards(out):
    return glob.glob(f"{out}/.tokenize.tmp-*/data_train_*.bin")


@test
def tokenize_stopped_leaves_no_shards():
    d = work("tokenize_stops")
    data = big_corpus(d, 24 << 20)
    for sig, code in SIGNALS:
        out = f"{d}/shards{code}"
        r = Running(*tokenize_argv(data, out))
        r.wait_for(lambda: staged_shards(out), "a finished shard in the temporary directory")
        line = r.stop(sig, code)
        assert "during tokenize after" in line and f"no shard was written to {out}" in line, line
        assert listing(out) == [], listing(out)
        # Nothing that train would take for a corpus.
        expect_error(["train", *TINY, "--data", out, "--steps", 1], out)


@test
def tokenize_killed_leaves_nothing_train_reads_and_the_next_run_cleans_it():
    # SIGKILL (or a second signal) leaves the temporary directory: train ignores it (it reads
    # the directory's regular files), and the next tokenize into --out removes it and says so.
    d = work("tokenize_killed")
    data = big_corpus(d, 8 << 20)
    out = f"{d}/shards"
    r = Running(*tokenize_argv(data, out))
    r.wait_for(lambda: staged_shards(out), "a finished shard in the temporary directory")
    r.proc.kill()
    r.proc.wait()
    stage = [n for n in os.listdir(out) if n.startswith(".tokenize.tmp-")]
    assert len(stage) == 1 and len(os.listdir(out)) == 1, os.listdir(out)
    expect_error(["train", *TINY, "--data", out, "--steps", 1], out)
    p = run(*tokenize_argv(data, out))
    assert "removed 1 temporary directories of interrupted runs" in p.stdout, p.stdout
    # Only the finished run's manifest is hidden; no stage of either run is left.
    hidden = [n for n in os.listdir(out) if n.startswith(".")]
    assert hidden == [".moetrain-output.json"], hidden
    print(f"killed run's {stage[0]} ignored by train, removed by the next tokenize")


LLAMA = dict(vocab_size=260, d_model=384, n_layers=8, n_heads=6, n_kv_heads=2, max_seq_len=32,
             norm="rmsnorm", pos="rope", ffn="swiglu", d_ff=1024, bias=False)


def llama_checkpoint(d):
    """A Llama-layout checkpoint of ~14M parameters (57 MB): big enough that its export and
    import take a noticeable time."""
    cfg = os.path.join(d, "cfg.json")
    with open(cfg, "w") as f:
        json.dump(LLAMA, f)
    run("train", "--config", cfg, "--data", corpus(d), "--steps", 0, "--batch", 1, "--seq", 8,
        "--threads", 1, "--out", f"{d}/run")
    return f"{d}/run/step_000000"


def stopped_or_complete(line, during, out, check_complete):
    """A stop lands either inside the work (nothing under `out`) or, when the work's last
    unit had begun, after it (the output is complete and says so)."""
    if "had finished" in line:
        assert "its output is complete" in line, line
        check_complete()
        print("the stop came after the last unit of work: the output is complete")
    else:
        assert during in line and f"nothing was written to {out}" in line, line
        assert not os.path.exists(out), listing(out)
    assert leftovers(os.path.dirname(out)) == [], os.listdir(os.path.dirname(out))


@test
def export_stopped_leaves_no_temporary_and_no_half_output():
    d = work("export_stops")
    ck = llama_checkpoint(d)
    for sig, code in SIGNALS:
        out = f"{d}/hf{code}"
        # One shard per tensor: the stop lands between two shard files.
        r = Running("export", "--checkpoint", ck, "--out", out, "--max-shard-mb", 0.01)
        r.wait_for(lambda: glob.glob(f"{out}.tmp-*/model-*.safetensors"),
                   "a shard in the temporary directory")
        line = r.stop(sig, code)
        stopped_or_complete(line, "during export at", out,
                            lambda: run("import", "--from", out, "--out", f"{d}/check{code}"))


@test
def import_stopped_leaves_no_checkpoint():
    d = work("import_stops")
    ck = llama_checkpoint(d)
    hf = f"{d}/hf"
    run("export", "--checkpoint", ck, "--out", hf, "--max-shard-mb", 2)
    for sig, code in SIGNALS:
        out = f"{d}/imported{code}"
        r = Running("import", "--from", hf, "--out", out)

        def reading():  # import_hf reads the tensors (57 MB; the rest is a few KB)
            try:
                with open(f"/proc/{r.proc.pid}/io") as f:
                    return int(f.read().split("rchar:")[1].split()[0]) > (4 << 20)
            except (OSError, IndexError, ValueError):
                return False
        r.wait_for(reading, "the import reading its tensors")
        line = r.stop(sig, code)
        stopped_or_complete(line, "during import at tensor", out,
                            lambda: run("verify", out))


@test
def generate_stops_within_a_token():
    d = work("generate_stops")
    data = corpus(d)
    run("train", *TINY, "--data", data, "--steps", 1, "--out", f"{d}/run")
    for sig, code in SIGNALS:
        r = Running("generate", "--checkpoint", f"{d}/run", "--prompt", "The king",
                    "--max-new", 10**8, "--threads", 1)
        r.wait_for(lambda: sum(len(x) for x in r.out) > 200, "generated text")
        line = r.stop(sig, code)
        assert "during generate after" in line and "the text so far is on stdout" in line, line


@test
def tokenizer_train_stops_and_writes_nothing():
    # Random words: far more merges to make than 60000 - 256, so the merging is under way
    # when the signal comes.
    d = work("tokenizer_train_stops")
    rng = random.Random(5)
    data = cli_testlib.write(f"{d}/words.txt", "\n".join(
        " ".join("".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(
            3, 12))) for _ in range(16)) for _ in range(40000)))
    out = f"{d}/tok.json"
    r = Running("tokenizer", "train", "--data", data, "--vocab-size", 60000, "--out", out,
                "--threads", 1)
    r.wait_for(r.printed("tokenizer train: counted"), "the end of the counting")
    line = r.stop(signal.SIGINT, 130)
    assert "during tokenizer train" in line and "nothing was written" in line, line
    assert os.listdir(d) == ["words.txt"], os.listdir(d)


@test
def commands_without_output_in_progress_stop_at_once():
    # Before a command acts on stops itself (and for those that write nothing) a signal ends
    # it at once, with one line.
    d = work("at_once")
    ck = llama_checkpoint(d)  # 57 MB of checksums for verify to read
    for sig, code in SIGNALS:
        r = Running("verify", ck)
        r.wait_for(r.handlers_installed, "the signal handlers")
        line = r.stop(sig, code)
        assert line.endswith("; no output was in progress"), line


if __name__ == "__main__":
    sys.exit(main())
