"""The rest of the Python API: backends and devices, config sources, parameters as NumPy
arrays, checkpoints, logits, the GIL being released, and the typed stubs."""
import ast
import json
import os
import threading
import time

import numpy as np

import moetrain


def test_backends_and_devices():
    backends = {b["name"]: b for b in moetrain.list_backends()}
    assert backends["cpu"]["loaded"] and backends["cpu"]["devices"][0]["available"]
    for b in backends.values():  # every unusable backend says why
        if not b["loaded"] or not any(d["available"] for d in b["devices"]):
            assert b["reason"] or all(d["reason"] for d in b["devices"]), b
    assert "cpu:0" in moetrain.available_devices()
    dev = moetrain.open_device("cpu")
    assert dev.backend == "cpu" and dev.name
    assert moetrain.device_info("cpu")["id"] == "cpu:0"


def test_model_from_preset_dict_and_file(tmp_path):
    dev = moetrain.open_device("cpu", threads=1)
    cfg = moetrain.preset_config("tiny")
    cfg["n_layers"] = 1
    path = tmp_path / "m.json"
    path.write_text(json.dumps(cfg))
    a = moetrain.Model.from_config(dev, cfg)
    b = moetrain.Model.from_json(dev, str(path))
    c = moetrain.Model.from_preset(dev, "tiny")
    assert a.config == b.config and a.config["n_layers"] == 1
    assert c.config == moetrain.preset_config("tiny")
    assert a.num_params == sum(int(np.prod(a.param_shape(n))) for n in a.param_names())
    assert set(moetrain.preset_names()) >= {"tiny", "moe-mini"}


def test_params_roundtrip_and_checkpoint(tmp_path):
    dev = moetrain.open_device("cpu", threads=1)
    model = moetrain.Model.from_preset(dev, "tiny")
    model.init_weights(5)
    name = "tok_emb.weight"
    w = model.get_param(name)
    assert w.dtype == np.float32 and w.shape == tuple(model.param_shape(name))
    w2 = (w * 2).astype(np.float32)
    model.set_param(name, w2)
    assert np.array_equal(model.get_param(name), w2)
    model.set_param(name, np.asfortranarray(w2))  # any layout
    assert np.array_equal(model.get_param(name), w2)
    moetrain.save_checkpoint(str(tmp_path / "ck"), model)
    other = moetrain.Model.from_preset(dev, "tiny")
    other.load(str(tmp_path / "ck"))
    for n in model.param_names():
        assert np.array_equal(model.get_param(n), other.get_param(n)), n
    info = moetrain.read_checkpoint_info(str(tmp_path / "ck"))
    assert info["config"] == model.config and not info["has_optimizer"]


def test_trainer_resume_state(tmp_path):
    dev = moetrain.open_device("cpu", threads=1)
    x = (np.arange(2 * 16, dtype=np.int32).reshape(2, 16) * 7) % 256
    y = np.roll(x, -1, axis=1)

    def fresh():
        m = moetrain.Model.from_preset(dev, "tiny")
        m.init_weights(2)
        return m, moetrain.Trainer(m, lr=1e-2, total_steps=10)

    m, t = fresh()
    t.step(x, y)
    moetrain.save_checkpoint(str(tmp_path / "ck"), m, t)
    after = t.step(x, y)
    m2, t2 = fresh()
    m2.load(str(tmp_path / "ck"))
    t2.load(str(tmp_path / "ck"))
    assert t2.steps_done == 1
    assert t2.step(x, y) == after
    assert t2.lr_at(0) == 1e-2 * (1 + np.cos(0)) / 2 * 0.9 + 1e-3


def test_logits_and_eval_agree():
    dev = moetrain.open_device("cpu", threads=1)
    model = moetrain.Model.from_preset(dev, "tiny")
    model.init_weights(4)
    x = (np.arange(32, dtype=np.int32).reshape(2, 16) * 5) % 256
    y = np.roll(x, -1, axis=1)
    logits = model.logits(x).astype(np.float64)
    assert logits.shape == (2, 16, 256)
    lse = np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1)) + logits.max(-1)
    ce = (lse - np.take_along_axis(logits, y[..., None], -1)[..., 0]).mean()
    s = model.evaluate(x, y)
    assert abs(s.ce - ce) < 1e-4 and s.tokens == 32
    moe = model.config["moe"]
    assert [e.layer for e in model.expert_load()] == list(
        range(moe["first_layer"], model.config["n_layers"]))


def test_gil_is_released_during_steps_and_generation():
    """While a worker thread is inside a step or a generation, the main thread keeps running
    Python code. Were the GIL held for the whole call, the main thread could run only within
    about one switch interval (5 ms) of the call's start and end."""
    dev = moetrain.open_device("cpu", threads=1)
    cfg = moetrain.preset_config("tiny")
    cfg["max_seq_len"] = 1024
    model = moetrain.Model.from_config(dev, cfg)
    model.init_weights(1)
    trainer = moetrain.Trainer(model)
    x = np.zeros((32, 128), np.int32)
    for call in (lambda: trainer.step(x, x),
                 lambda: moetrain.generate_text(model, "a", max_new_tokens=1000)):
        span = {}

        def work():
            span["enter"] = time.perf_counter()
            call()
            span["exit"] = time.perf_counter()

        worker = threading.Thread(target=work)
        seen = []
        worker.start()
        while worker.is_alive():
            seen.append(time.perf_counter())
        worker.join()
        margin = 0.015
        inside = [t for t in seen if span["enter"] + margin < t < span["exit"] - margin]
        assert span["exit"] - span["enter"] > 4 * margin, span  # long enough to tell
        assert len(inside) > 1000, (len(inside), span)


def test_stubs_are_shipped_and_parse():
    here = os.path.dirname(moetrain.__file__)
    stub = os.path.join(here, "_moetrain.pyi")
    assert os.path.exists(os.path.join(here, "py.typed"))
    tree = ast.parse(open(stub).read())
    names = {n.name for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    assert {"Model", "Trainer", "Device", "BatchLoader", "open_device", "generate",
            "generate_text", "save_checkpoint", "list_backends"} <= names
    step = next(f for c in tree.body if isinstance(c, ast.ClassDef) and c.name == "Trainer"
                for f in c.body if isinstance(f, ast.FunctionDef) and f.name == "step")
    assert "StepStats" in ast.unparse(step.returns)
