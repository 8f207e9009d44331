"""Generation from Python equals `moetrain generate` (same checkpoint, prompt and sampling
options), from text and from token ids."""
import json

import numpy as np
import pytest

import moetrain


@pytest.fixture(scope="module")
def run_dir(cli, corpus, tmp_path_factory):
    d = tmp_path_factory.mktemp("gen") / "run"
    cli("train", "--device", "cpu", "--threads", "1", "--preset", "tiny", "--data", corpus,
        "--batch", 4, "--seq", 32, "--steps", 5, "--lr", 3e-3, "--out", d, "--quiet")
    return str(d)


@pytest.mark.parametrize("sampling", [
    dict(temperature=0.0),
    dict(temperature=0.8, top_k=40, seed=5),
    dict(temperature=1.0, top_p=0.9, seed=11),
])
def test_generation_equals_cli(cli, run_dir, sampling):
    prompt, n = "The king", 40
    flags = ["--temperature", sampling.get("temperature", 1.0),
             "--top-k", sampling.get("top_k", 0), "--top-p", sampling.get("top_p", 1.0),
             "--seed", sampling.get("seed", 1337)]
    p = cli("generate", "--checkpoint", run_dir, "--device", "cpu", "--threads", "1",
            "--prompt", prompt, "--max-new", n, "--json", *flags)
    want = json.loads(p.stdout.strip().splitlines()[-1])

    model = moetrain.Model.from_checkpoint(moetrain.open_device("cpu", threads=1), run_dir)
    text = moetrain.generate_text(model, prompt, max_new_tokens=n, **sampling)
    ids = moetrain.generate(model, moetrain.encode_text(prompt), max_new_tokens=n, **sampling)
    assert ids.dtype == np.int32 and ids.tolist() == want["tokens"]
    assert text == want["text"]
    assert moetrain.decode_tokens(ids) == want["text"]
