"""Library errors raise moetrain.Error (a RuntimeError) with exactly the one-line message the
CLI prints after "moetrain: error: "; bad arrays are refused with a message, never read."""
import json
import os

import numpy as np
import pytest

import moetrain


def cli_error(cli, *argv):
    p = cli(*argv, ok=False)
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 1 and len(lines) == 1, p.stderr
    assert lines[0].startswith("moetrain: error: ")
    return lines[0][len("moetrain: error: "):]


def raised(fn, *args, **kwargs):
    with pytest.raises(moetrain.Error) as e:
        fn(*args, **kwargs)
    assert isinstance(e.value, RuntimeError)
    return str(e.value)


@pytest.fixture(scope="module")
def dev():
    return moetrain.open_device("cpu", threads=1)


def test_same_messages_as_cli(cli, corpus, tmp_path, dev):
    bad_cfg = tmp_path / "bad.json"
    cfg = moetrain.preset_config("tiny")
    cfg["n_heads"] = 3
    bad_cfg.write_text(json.dumps(cfg))
    missing = str(tmp_path / "no_such_run")
    cases = [
        (["bench", "--device", "cuda:7", "--preset", "tiny", "--batch", 1, "--seq", 8],
         lambda: moetrain.open_device("cuda:7")),
        (["bench", "--device", "nosuch", "--preset", "tiny", "--batch", 1, "--seq", 8],
         lambda: moetrain.open_device("nosuch")),
        (["config", "--preset", "huge"], lambda: moetrain.preset_config("huge")),
        (["train", "--config", bad_cfg, "--data", corpus, "--batch", 1, "--seq", 8, "--steps", 1],
         lambda: moetrain.Model.from_json(dev, str(bad_cfg))),
        (["generate", "--checkpoint", missing, "--max-new", 1],
         lambda: moetrain.Model.from_checkpoint(dev, missing)),
        (["train", "--preset", "tiny", "--data", tmp_path / "none.txt", "--batch", 1, "--seq", 8,
          "--steps", 1], lambda: moetrain.load_tokens(str(tmp_path / "none.txt"))),
        (["train", "--preset", "tiny", "--data", corpus, "--batch", 1, "--seq", 8, "--steps", 1,
          "--optimizer", "lion"],
         lambda: moetrain.Trainer(moetrain.Model.from_preset(dev, "tiny"), optimizer="lion")),
    ]
    for argv, call in cases:
        want = cli_error(cli, *argv)
        got = raised(call)
        # The CLI prefixes option errors with the option's name ("--optimizer: ...").
        assert got == want or want.endswith(": " + got), (argv, want, got)


def test_config_dict_errors_name_the_key(dev):
    cfg = moetrain.preset_config("tiny")
    cfg["n_layerz"] = 2
    assert "n_layerz" in raised(moetrain.Model.from_config, dev, cfg)
    cfg = moetrain.preset_config("tiny")
    cfg["d_model"] = "wide"
    assert "d_model" in raised(moetrain.Model.from_config, dev, cfg)


def test_bad_arrays_are_refused(dev):
    model = moetrain.Model.from_preset(dev, "tiny")
    model.init_weights(1)
    trainer = moetrain.Trainer(model, accum=2)
    good = np.zeros((4, 16), np.int32)
    assert "int32" in raised(trainer.step, good.astype(np.int64), good)
    assert "2-d" in raised(trainer.step, np.zeros(64, np.int32), good)
    assert "same shape" in raised(trainer.step, good, np.zeros((4, 8), np.int32))
    assert "accum * B rows" in raised(trainer.step, np.zeros((3, 16), np.int32),
                                      np.zeros((3, 16), np.int32))
    assert "C-contiguous" in raised(trainer.step, np.zeros((16, 4), np.int32).T, good)
    out_of_vocab = good.copy()
    out_of_vocab[1, 3] = 256
    assert "256" in raised(trainer.step, out_of_vocab, good)
    assert "256" in raised(model.evaluate, out_of_vocab, good)
    name = model.param_names()[0]
    assert "float32" in raised(model.set_param, name, np.zeros(model.param_shape(name)))
    assert "shape" in raised(model.set_param, name, np.zeros((3, 3), np.float32))
    assert "no_such" in raised(model.get_param, "no_such.weight")
    too_long = moetrain.encode_text("x" * 100)
    assert raised(moetrain.generate, model, too_long, max_new_tokens=1000)
    assert "max_new_tokens" in raised(moetrain.generate_text, model, "a", max_new_tokens=0)
    # Nothing was trained by the refused steps.
    assert trainer.steps_done == 0


def test_loading_a_checkpoint_of_another_model(dev, tmp_path):
    tiny = moetrain.Model.from_preset(dev, "tiny")
    tiny.init_weights(3)
    moetrain.save_checkpoint(str(tmp_path / "ck"), tiny)
    cfg = moetrain.preset_config("tiny")
    cfg["n_layers"] = 3
    other = moetrain.Model.from_config(dev, cfg)
    msg = raised(other.load, str(tmp_path / "ck"))
    assert "n_layers" in msg and "\n" not in msg
    assert os.path.isdir(tmp_path / "ck")
