"""A training loop written in Python reproduces `moetrain train` bit for bit: the same
batches, losses, lr, grad norms, expert loads, evaluations and final weights."""
import numpy as np
import pytest

import moetrain
from conftest import read_jsonl

B, T, ACCUM, STEPS, EVAL_EVERY, EVAL_BATCHES = 4, 32, 2, 6, 3, 2
LR, WARMUP, SEED = 3e-3, 2, 7


@pytest.mark.parametrize("optimizer", ["adamw", "sgd"])
def test_python_loop_reproduces_cli(cli, corpus, tmp_path, optimizer):
    log = tmp_path / "log.jsonl"
    cli("train", "--device", "cpu", "--threads", "1", "--preset", "tiny", "--data", corpus,
        "--batch", B, "--seq", T, "--accum", ACCUM, "--steps", STEPS, "--lr", LR,
        "--warmup", WARMUP, "--seed", SEED, "--optimizer", optimizer,
        "--eval-every", EVAL_EVERY, "--eval-batches", EVAL_BATCHES,
        "--out", tmp_path / "run", "--log-json", log, "--quiet")
    records = read_jsonl(log)
    steps = [r for r in records if "eval" not in r]
    evals = [r for r in records if "eval" in r]
    assert len(steps) == STEPS and len(evals) == STEPS // EVAL_EVERY

    dev = moetrain.open_device("cpu", threads=1)
    model = moetrain.Model.from_preset(dev, "tiny")
    model.init_weights(SEED)
    trainer = moetrain.Trainer(model, optimizer=optimizer, lr=LR, warmup=WARMUP,
                               total_steps=STEPS, accum=ACCUM)
    train, val = moetrain.split_tokens(moetrain.load_tokens(corpus))
    loader = moetrain.BatchLoader(train, B, T)
    got_evals = []
    for i in range(STEPS):
        batches = [loader.next() for _ in range(ACCUM)]
        x = np.concatenate([b[0] for b in batches])
        y = np.concatenate([b[1] for b in batches])
        assert x.shape == (ACCUM * B, T) and x.dtype == np.int32
        s = trainer.step(x, y)
        want = steps[i]
        assert s.step == want["step"]
        for key in ("loss", "ce", "aux", "z", "lr", "grad_norm", "loss_scale"):
            assert getattr(s, key) == want[key], (i, key, getattr(s, key), want[key])
        assert len(s.expert_load) == len(want["expert_load"])
        for mine, theirs in zip(s.expert_load, want["expert_load"]):
            assert mine.layer == theirs["layer"]
            assert (mine.min_share, mine.max_share, mine.empty) == (
                theirs["min_share"], theirs["max_share"], theirs["empty"])
        if s.step % EVAL_EVERY == 0:
            got_evals.append(moetrain.evaluate(model, val, B, T, EVAL_BATCHES))
    for mine, theirs in zip(got_evals, evals):
        for key in ("loss", "ce", "aux", "z", "tokens"):
            assert getattr(mine, key) == theirs["eval"][key], key

    # The final weights equal the CLI's final checkpoint, bit for bit.
    saved = moetrain.Model.from_checkpoint(dev, str(tmp_path / "run"))
    for name in model.param_names():
        assert np.array_equal(model.get_param(name), saved.get_param(name)), name
    assert loader.position == moetrain.read_checkpoint_info(str(tmp_path / "run"))["train_pos"]


def test_python_checkpoint_resumes_in_cli(cli, corpus, tmp_path):
    """A checkpoint saved from Python with the run's settings continues in `moetrain train
    --resume` exactly like an uninterrupted CLI run."""
    common = ["--device", "cpu", "--threads", "1", "--preset", "tiny", "--data", corpus,
              "--batch", B, "--seq", T, "--steps", 4, "--lr", LR, "--seed", SEED, "--quiet"]
    cli("train", *common, "--out", tmp_path / "full", "--log-json", tmp_path / "full.jsonl")

    dev = moetrain.open_device("cpu", threads=1)
    model = moetrain.Model.from_preset(dev, "tiny")
    model.init_weights(SEED)
    trainer = moetrain.Trainer(model, lr=LR, total_steps=4)
    tokens = moetrain.load_tokens(corpus)
    train, _ = moetrain.split_tokens(tokens)
    loader = moetrain.BatchLoader(train, B, T)
    for _ in range(2):
        trainer.step(*loader.next())
    moetrain.save_checkpoint(str(tmp_path / "py" / "step_000002"), model, trainer, seed=SEED,
                             batch=B, seq=T, train_pos=loader.position, data_path=corpus,
                             data_tokens=len(tokens))
    cli("train", *common, "--resume", tmp_path / "py", "--log-json", tmp_path / "py.jsonl")
    full = [r["loss"] for r in read_jsonl(tmp_path / "full.jsonl")]
    resumed = [r["loss"] for r in read_jsonl(tmp_path / "py.jsonl")]
    assert resumed == full[2:]
