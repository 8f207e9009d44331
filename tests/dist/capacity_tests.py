#!/usr/bin/env python3
"""Capacity admission over several ranks (docs/MODEL.md 2, docs/DISTRIBUTED.md): N ranks x B with
a capacity that drops must train exactly like 1 rank x N B, because the admission order runs over
the global micro-batch (every rank's rows in rank order). Registered with ctest like
dist_tests.py, whose helpers (mpirun, the corpus, the run comparison) it reuses:

    capacity_tests.py --mpirun mpiexec --moetrain build/moetrain --work DIR TEST_NAME
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dist_tests as dt  # noqa: E402

TESTS = {}


def test(fn):
    TESTS[fn.__name__] = fn
    return fn


def capacity_config(d):
    """tiny (4 experts, top-2, a shared expert) with the sigmoid router, an expert bias that
    moves every step and capacity factor 1.0: every expert takes exactly the average load, so
    any imbalance drops selections."""
    cfg = json.loads(subprocess.run([dt.ARGS.moetrain, "config", "--preset", "tiny"],
                                    capture_output=True, text=True, check=True).stdout)
    cfg["moe"].update(router="sigmoid_topk", bias_update_rate=0.01, capacity_factor=1.0)
    path = os.path.join(d, "capacity.json")
    with open(path, "w") as f:
        json.dump(cfg, f)
    return path


def run(n, d, data, cfg, batch, out, device="cpu", extra=()):
    argv = dt.train_argv(d, data, batch, out, device, extra)
    argv[argv.index("--preset"):argv.index("--preset") + 2] = ["--config", cfg]
    if n == 1:
        p = subprocess.run(argv, capture_output=True, text=True,
                           env=dict(os.environ, OMP_NUM_THREADS="1"))
        return dt.must_pass(p, " ".join(argv))
    return dt.must_pass(dt.mpirun(n, argv), f"mpirun -np {n} " + " ".join(argv))


def dropped(d, out):
    """The dropped share of every step (one MoE layer), from the --log-json records."""
    return [x["expert_load"][0]["dropped"] for x in dt.read_log(os.path.join(d, out + ".jsonl"))]


def equivalence(name, n, device="cpu", extra=(), both=()):
    """1 rank x 4 rows vs n ranks x 4/n (`extra` for the n-rank run, `both` for both): per-step
    losses within rel 1e-5, the logged loads, drop shares and bias ranges equal, final weights
    within 1e-4 of each tensor's largest magnitude."""
    d = dt.work(f"capacity_{name}")
    data = dt.corpus(d)
    cfg = capacity_config(d)
    run(1, d, data, cfg, 4, "single", device, both)
    run(n, d, data, cfg, 4 // n, "multi", device, [*extra, *both])
    drops = dropped(d, "single")
    assert sum(drops) > 0, f"capacity 1.0 dropped nothing: {drops}"
    assert dropped(d, "multi") == drops, (dropped(d, "multi"), drops)
    dt.compare_runs(d, "single", "multi")
    print(f"ok: {name}: the {n}-rank run drops {min(drops):.3f}..{max(drops):.3f} of the "
          f"selections per step, as one process does")
    return d


@test
def capacity_dp_np2():
    equivalence("dp_np2", 2)


@test
def capacity_dp_np4():
    equivalence("dp_np4", 4, both=["--accum", 2])


@test
def capacity_dp_np2_recompute_ffn():
    # The backward's re-run of the MoE forward admits with the offsets of the forward.
    equivalence("dp_np2_recompute", 2, both=["--recompute", "ffn"])


@test
def capacity_zero_np2():
    equivalence("zero_np2", 2, extra=["--zero", 1])


@test
def capacity_zero_np4():
    equivalence("zero_np4", 4, extra=["--zero", 1])


@test
def capacity_ep_np2():
    equivalence("ep_np2", 2, extra=["--expert-parallel", 2])


@test
def capacity_ep_np4():
    # Two expert-parallel groups of 2: the admission still spans all 4 ranks' rows.
    equivalence("ep_np4", 4, extra=["--expert-parallel", 2], both=["--recompute", "ffn"])


@test
def capacity_ep_zero_np4():
    # The same with ZeRO-1: the moments sharded, the expert bias still moved on every rank
    # after the parameter all-gather.
    equivalence("ep_zero_np4", 4, extra=["--expert-parallel", 2, "--zero", 1])


@test
def capacity_dp_opencl_np2():
    if not dt.opencl_available():
        print("skipped: no opencl device")
        sys.exit(77)
    equivalence("dp_opencl_np2", 2, device="opencl")


@test
def capacity_plan_collectives():
    # `plan --ranks 4` lists the capacity's exchanges: per MoE layer and micro-batch the shares
    # (4 ranks x k 2 x E 4 i32) reduce-scattered, the admitted counts (E i32) all-reduced.
    d = dt.work("capacity_plan")
    p = dt.must_pass(subprocess.run(
        [dt.ARGS.moetrain, "plan", "--config", capacity_config(d), "--batch", "2", "--seq", "32",
         "--memory-gb", "80", "--ranks", "4", "--accum", "2"], capture_output=True, text=True),
        "plan --ranks 4")
    got = {c["collective"]: c for c in json.loads(p.stdout.strip().splitlines()[-1])["collectives"]}
    rs, ar = got["reduce_scatter capacity offsets"], got["all_reduce admitted counts"]
    assert (rs["calls"], rs["message_bytes"], rs["sent_bytes"]) == (2, 128, 2 * 96), rs
    assert (ar["calls"], ar["message_bytes"], ar["sent_bytes"]) == (2, 16, 2 * 24), ar
    print(f"ok: plan lists {rs} and {ar}")


@test
def capacity_dp_cuda_np2():
    # NCCL's device reduce-scatter of the shares (machines with two or more GPUs).
    dt.need_gpus(2)
    equivalence("dp_cuda_np2", 2, device="cuda")


@test
def capacity_ep_cuda_np2():
    dt.need_gpus(2)
    equivalence("ep_cuda_np2", 2, device="cuda", extra=["--expert-parallel", 2])


@test
def capacity_bit_identical():
    # Two runs with the same ranks write the same bytes, with ZeRO-1 and expert parallel.
    d = dt.work("capacity_bit_identical")
    data = dt.corpus(d)
    cfg = capacity_config(d)
    for tag, extra in (("zero", ["--zero", 1]), ("ep", ["--expert-parallel", 2])):
        for out in ("a", "b"):
            run(2, d, data, cfg, 2, f"{tag}_{out}", extra=extra)
        dt.assert_same_runs(d, f"{tag}_a", f"{tag}_b", f"2-rank {tag} runs",
                            fields=("loss", "grad_norm", "expert_load"))
    print("ok: two 2-rank capacity runs are bit-identical (ZeRO-1 and expert parallel)")


if __name__ == "__main__":
    dt.main(TESTS)
