"""The routing-v2 fields of moetrain.ExpertLoad (docs/MODEL.md 2): the selections a capacity
dropped and the expert bias range, per MoE layer, equal to what `moetrain train --log-json`
logs for the same run."""
import json

import numpy as np

import moetrain
from conftest import read_jsonl

B, T, STEPS, LR, SEED = 4, 32, 4, 3e-3, 7


def test_expert_load_has_drops_and_bias_range(cli, corpus, tmp_path):
    cfg = json.loads(cli("config", "--preset", "tiny").stdout)
    cfg["moe"].update(router="sigmoid_topk", bias_update_rate=0.01, capacity_factor=1.0)
    (tmp_path / "cap.json").write_text(json.dumps(cfg))
    log = tmp_path / "log.jsonl"
    cli("train", "--device", "cpu", "--threads", "1", "--config", tmp_path / "cap.json",
        "--data", corpus, "--batch", B, "--seq", T, "--steps", STEPS, "--lr", LR,
        "--seed", SEED, "--log-json", log, "--quiet")
    steps = [r for r in read_jsonl(log) if "eval" not in r]

    dev = moetrain.open_device("cpu", threads=1)
    model = moetrain.Model.from_config(dev, cfg)
    model.init_weights(SEED)
    trainer = moetrain.Trainer(model, lr=LR, total_steps=STEPS)
    train, _ = moetrain.split_tokens(moetrain.load_tokens(corpus))
    loader = moetrain.BatchLoader(train, B, T)
    dropped_any = False
    for want in steps:
        s = trainer.step(*loader.next())
        assert len(s.expert_load) == len(want["expert_load"]) == 1
        for mine, theirs in zip(s.expert_load, want["expert_load"]):
            assert mine.layer == theirs["layer"] and mine.counts == theirs["counts"]
            assert mine.dropped_share == theirs["dropped"], (mine.dropped, theirs["dropped"])
            assert (mine.bias_min, mine.bias_max) == (theirs["bias_min"], theirs["bias_max"])
            assert 0 <= mine.dropped < mine.total
            dropped_any |= mine.dropped > 0
    assert dropped_any, "capacity 1.0 dropped nothing"
    last = model.expert_load()[0]
    assert last.bias_min < 0 < last.bias_max  # the bias moved both ways
    assert np.float32(last.bias_max) == last.bias_max


def test_expert_load_defaults_without_routing_v2():
    dev = moetrain.open_device("cpu", threads=1)
    model = moetrain.Model.from_preset(dev, "tiny")
    model.init_weights(3)
    x = (np.arange(64, dtype=np.int32).reshape(2, 32) * 7) % 256
    model.evaluate(x, np.roll(x, -1, axis=1))
    for e in model.expert_load():
        assert (e.dropped, e.dropped_share, e.bias_min, e.bias_max) == (0, 0.0, 0.0, 0.0)
        assert e.total == 2 * 32 * model.config["moe"]["top_k"]
