#!/usr/bin/env python3
"""End-to-end tests of the MoE routing options of MODEL.md v2 through the moetrain CLI
(stdlib only): sigmoid_topk routing, routed scaling, the expert bias (bias_update_rate) and a
capacity factor. Registered with ctest like cli_tests.py:

    route_tests.py --moetrain build/moetrain --work DIR TEST_NAME

Checks: the step line and --log-json carry the dropped share and the bias range per MoE
layer; --resume continues the bias exactly; eval and generate run (dropless); every hostile
config is one stderr line naming the key; HF export refuses the bias in one line.
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from cli_testlib import (corpus, expect_error, last_json, main, read_log, run,  # noqa: E402
                         test, work)


def routed_config(d, **moe):
    c = {"vocab_size": 256, "d_model": 64, "n_layers": 2, "n_heads": 4, "n_kv_heads": 2,
         "max_seq_len": 64, "d_ff": 96,
         "moe": {"n_experts": 4, "top_k": 2, "router": "sigmoid_topk", "routed_scaling": 2.0,
                 "bias_update_rate": 0.01, "capacity_factor": 0.75, "aux_loss_alpha": 0.0,
                 "first_layer": 1}}
    c["moe"].update(moe)
    path = os.path.join(d, "config.json")
    with open(path, "w") as f:
        json.dump(c, f)
    return path


def common(d, data, config):
    return ["--device", "cpu", "--config", config, "--data", data, "--batch", 4, "--seq", 32,
            "--threads", 1, "--lr", "3e-3", "--warmup", 2]


@test
def train_logs_drops_and_bias():
    d = work("route_train_logs")
    data = corpus(d)
    config = routed_config(d)
    log = os.path.join(d, "log.jsonl")
    p = run("train", *common(d, data, config), "--steps", 6, "--out", f"{d}/run",
                      "--log-json", log)
    steps = [r for r in read_log(log) if "eval" not in r]
    assert [r["step"] for r in steps] == [1, 2, 3, 4, 5, 6]
    dropped = 0.0
    for r in steps:
        (layer,) = r["expert_load"]  # layer 1 is the only MoE layer
        assert layer["layer"] == 1 and set(layer) >= {"dropped", "bias_min", "bias_max"}, layer
        assert 0.0 <= layer["dropped"] < 1.0, layer
        dropped += layer["dropped"]
    # capacity 0.75 * 128 * 2 / 4 = 48 of 256 selections per expert: something drops.
    assert dropped > 0, steps
    # After six updates of +-0.01 the biases differ (the experts' loads are not all equal).
    last = steps[-1]["expert_load"][0]
    assert last["bias_max"] > last["bias_min"], last
    assert abs(last["bias_max"]) <= 0.06 + 1e-6 and abs(last["bias_min"]) <= 0.06 + 1e-6, last
    assert " bias " in p.stdout and "L1 " in p.stdout, p.stdout
    # The checkpoint holds the bias; eval and generation use it (dropless).
    p = run("eval", "--checkpoint", f"{d}/run", "--data", data, "--batch", 4, "--seq",
                      32, "--batches", 2)
    assert last_json(p)["loss"] > 0, p.stdout
    g = run("generate", "--checkpoint", f"{d}/run", "--prompt", "The king",
                      "--max-new", 12, "--temperature", 0, "--json")
    assert len(last_json(g)["tokens"]) == 12


@test
def resume_continues_the_bias():
    d = work("route_resume")
    data = corpus(d)
    config = routed_config(d)
    args = common(d, data, config) + ["--steps", 6]
    run("train", *args, "--log-json", f"{d}/full.jsonl")
    run("train", *args, "--stop-at", 3, "--out", f"{d}/run",
                  "--log-json", f"{d}/a.jsonl")
    run("train", "--resume", f"{d}/run", "--out", f"{d}/run", "--steps", 6,
                  "--threads", 1, "--log-json", f"{d}/b.jsonl")

    def trace(path):
        return [(r["step"], r["loss"], r["expert_load"][0]["bias_min"],
                 r["expert_load"][0]["bias_max"], r["expert_load"][0]["counts"])
                for r in read_log(path) if "eval" not in r]

    full, split = trace(f"{d}/full.jsonl"), trace(f"{d}/a.jsonl") + trace(f"{d}/b.jsonl")
    assert full == split, f"resumed run differs:\n{full}\n{split}"
    print("identical:", full[-1])


@test
def hostile_routing_configs():
    d = work("route_hostile")
    data = corpus(d, n_bytes=5000)
    hash_router = {"router": "hash", "routed_scaling": 1.0, "bias_update_rate": 0.0,
                   "capacity_factor": 0.0}
    cases = [
        (dict(hash_router, bias_update_rate=0.01), ["moe.bias_update_rate", "top-k router"]),
        (dict(hash_router, capacity_factor=1.0), ["moe.capacity_factor", "top-k router"]),
        (dict(hash_router, routed_scaling=2.0), ["moe.routed_scaling", "top-k router"]),
        ({"bias_update_rate": -1}, ["moe.bias_update_rate", ">= 0"]),
        ({"capacity_factor": -0.5}, ["moe.capacity_factor", ">= 0"]),
        ({"capacity_factor": 0.25}, ["moe.capacity_factor", "below 1"]),
        ({"routed_scaling": 0}, ["moe.routed_scaling", "positive"]),
        ({"router": "sigmoid"}, ["moe.router"]),
        ({"capacity_factor": "big"}, ["moe.capacity_factor"]),
    ]
    for moe, words in cases:
        config = routed_config(d, **moe)
        expect_error(["train", *common(d, data, config), "--steps", 1], words)


@test
def export_refuses_the_expert_bias():
    d = work("route_export")
    data = corpus(d, n_bytes=20000)
    config = routed_config(d, router="softmax_topk", routed_scaling=1.0, capacity_factor=0.0)
    run("train", *common(d, data, config), "--steps", 1, "--out", f"{d}/run")
    expect_error(["export", "--checkpoint", f"{d}/run", "--out", f"{d}/hf"],
                 ["moe.bias_update_rate", "expert bias"])
    assert not os.path.exists(f"{d}/hf")


if __name__ == "__main__":
    sys.exit(main())
