#!/usr/bin/env python3
"""`moetrain train --tensorboard DIR`: the event files are read back with the tensorboard
package's own reader (which checks the TFRecord CRCs) and must hold exactly the scalars of
--log-json. Run with the test venv's Python (tools/requirements-test.txt), one ctest test per
case:

    tensorboard_tests.py --moetrain build/moetrain --work DIR TEST_NAME
"""
import glob
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from cli_testlib import corpus, main, run, test, work  # noqa: E402

STEP_TAGS = ["loss", "ce", "aux", "z", "lr", "grad_norm", "tokens_per_s", "loss_scale"]


def train(d, data, steps, *extra):
    run("train", "--device", "cpu", "--threads", "1", "--preset", "tiny", "--data", data,
        "--batch", 4, "--seq", 32, "--steps", steps, "--lr", 3e-3, "--eval-every", 3,
        "--eval-batches", 2, "--log-json", f"{d}/log.jsonl", "--tensorboard", f"{d}/tb",
        "--quiet", *extra)


def read_events(path):
    """Every Event of a file, through tensorboard's TFRecord reader, which raises
    DataLossError on a bad length or payload CRC (its loaders would stop quietly)."""
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.tensorflow_stub import errors, pywrap_tensorflow
    reader = pywrap_tensorflow.PyRecordReader_New(path, 0, None, None)
    events = []
    while True:
        try:
            reader.GetNext()
        except errors.OutOfRangeError:
            return events
        events.append(Event.FromString(reader.record()))


def scalars(events):
    out = {}
    for e in events:
        for v in e.summary.value:
            assert (v.tag, e.step) not in out, f"{v.tag} written twice at step {e.step}"
            out[(v.tag, e.step)] = v.simple_value
    return out


def expected(log_path):
    want = {}
    for r in map(json.loads, open(log_path)):
        s = r["step"]
        if "eval" in r:
            for k in ("loss", "ce", "aux", "z"):
                want[(f"val/{k}", s)] = r["eval"][k]
            continue
        for k in STEP_TAGS:
            want[(f"train/{k}", s)] = r[k]
        for layer in r.get("expert_load", []):
            base = f"expert_load/layer_{layer['layer']}"
            want[(f"{base}/min_share", s)] = layer["min_share"]
            want[(f"{base}/max_share", s)] = layer["max_share"]
            want[(f"{base}/empty_experts", s)] = layer["empty"]
            for k in ("dropped", "bias_min", "bias_max"):
                want[(f"{base}/{k}", s)] = layer[k]
    return want


@test
def scalars_equal_log_json():
    d = work("tb_scalars")
    train(d, corpus(d), 6)
    files = glob.glob(f"{d}/tb/events.out.tfevents.*")
    assert len(files) == 1, files
    events = read_events(files[0])
    assert events[0].file_version == "brain.Event:2"
    assert events[0].wall_time > 1.6e9
    got, want = scalars(events[1:]), expected(f"{d}/log.jsonl")
    assert set(got) == set(want), sorted(set(got) ^ set(want))
    assert any(t.startswith("expert_load/layer_1/") for t, _ in want)
    assert any(t.startswith("val/") for t, _ in want)
    for key, value in want.items():  # simple_value is a float32
        assert got[key] == np.float32(value), (key, got[key], value)
    print(f"ok: {len(got)} scalars over {len(events) - 1} events equal --log-json")


@test
def routing_v2_scalars():
    # A capacity that drops and an expert bias that moves: their per-layer scalars are written.
    d = work("tb_routing_v2")
    cfg = json.loads(run("config", "--preset", "tiny").stdout)
    cfg["moe"].update(router="sigmoid_topk", bias_update_rate=0.01, capacity_factor=1.0)
    with open(f"{d}/cap.json", "w") as f:
        json.dump(cfg, f)
    run("train", "--device", "cpu", "--threads", "1", "--config", f"{d}/cap.json", "--data",
        corpus(d), "--batch", 4, "--seq", 32, "--steps", 4, "--log-json", f"{d}/log.jsonl",
        "--tensorboard", f"{d}/tb", "--quiet")
    got = scalars(read_events(glob.glob(f"{d}/tb/events.out.tfevents.*")[0])[1:])
    want = expected(f"{d}/log.jsonl")
    assert set(got) == set(want), sorted(set(got) ^ set(want))
    assert all(got[k] == np.float32(v) for k, v in want.items())
    base = "expert_load/layer_1"
    assert max(got[(f"{base}/dropped", s)] for s in range(1, 5)) > 0
    assert got[(f"{base}/bias_max", 4)] > 0 > got[(f"{base}/bias_min", 4)]
    print("ok: dropped share and expert bias range written per layer and step")


@test
def tensorboard_loads_the_run_and_checks_crcs():
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    d = work("tb_crc")
    train(d, corpus(d), 4)
    acc = EventAccumulator(f"{d}/tb")
    acc.Reload()
    tags = acc.Tags()["scalars"]
    assert "train/loss" in tags and "val/loss" in tags and "expert_load/layer_1/max_share" in tags
    assert [s.step for s in acc.Scalars("train/loss")] == [1, 2, 3, 4]
    assert [s.step for s in acc.Scalars("val/loss")] == [3, 4]
    # A flipped payload byte must fail the reader's CRC check.
    path = glob.glob(f"{d}/tb/events.out.tfevents.*")[0]
    raw = bytearray(open(path, "rb").read())
    raw[len(raw) // 2] ^= 0x40
    open(path, "wb").write(bytes(raw))
    try:
        read_events(path)
    except Exception as e:  # tensorboard's DataLossError
        assert type(e).__name__ == "DataLossError" and "crc32" in str(e), e
        print("ok: corrupted file rejected:", type(e).__name__, e)
    else:
        raise AssertionError("the reader accepted a corrupted event file")


@test
def resume_adds_an_event_file():
    d = work("tb_resume")
    data = corpus(d)
    train(d, data, 6, "--out", f"{d}/run", "--stop-at", 3)
    train(d, data, 6, "--resume", f"{d}/run", "--out", f"{d}/run")
    files = sorted(glob.glob(f"{d}/tb/events.out.tfevents.*"))
    assert len(files) == 2, files
    got = {}
    for f in files:
        got.update(scalars(read_events(f)[1:]))
    assert sorted(s for t, s in got if t == "train/loss") == [1, 2, 3, 4, 5, 6]
    want = expected(f"{d}/log.jsonl")
    assert all(got[k] == np.float32(v) for k, v in want.items())


@test
def unusable_directory_is_one_line_error():
    d = work("tb_error")
    data = corpus(d)
    open(f"{d}/file", "w").write("x")
    p = run("train", "--device", "cpu", "--preset", "tiny", "--data", data, "--batch", 2,
            "--seq", 16, "--steps", 1, "--tensorboard", f"{d}/file", ok=False)
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 1 and len(lines) == 1, p.stderr
    assert lines[0].startswith("moetrain: error: --tensorboard: cannot create directory"), lines


if __name__ == "__main__":
    sys.exit(main())
