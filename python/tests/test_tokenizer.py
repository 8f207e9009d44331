"""Tokenizer specs from Python: encode_text / decode_tokens / load_tokens with a tokenizer.json
from `moetrain tokenizer train` give Hugging Face `tokenizers`' ids and round-trip, and
generate_text uses the tokenizer of the checkpoint the model came from (or `tokenizer=`),
as `moetrain generate` does."""
import json

import pytest

import moetrain

SAMPLE = "The young prince rode north, 42 times!<|endoftext|> Über das Land\n"
CONFIG = dict(vocab_size=300, d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, max_seq_len=64,
              norm="rmsnorm", pos="rope", ffn="swiglu", d_ff=48, bias=False)


@pytest.fixture(scope="module")
def tok(cli, corpus, tmp_path_factory):
    path = tmp_path_factory.mktemp("tok") / "tok.json"
    cli("tokenizer", "train", "--data", corpus, "--vocab-size", 290, "--special",
        "<|endoftext|>", "--out", path, "--threads", 1)
    return str(path)


@pytest.fixture(scope="module")
def run_dir(cli, corpus, tok, tmp_path_factory):
    d = tmp_path_factory.mktemp("tokrun")
    cfg = d / "config.json"
    cfg.write_text(json.dumps(CONFIG))
    cli("train", "--device", "cpu", "--threads", "1", "--config", cfg, "--data", corpus,
        "--tokenizer", tok, "--batch", 2, "--seq", 16, "--steps", 2, "--out", d / "run",
        "--quiet")
    return str(d / "run")


def test_encode_decode_match_hf_tokenizers(cli, tok, tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    ids = moetrain.encode_text(SAMPLE, tokenizer=tok)
    want = tokenizers.Tokenizer.from_file(tok).encode(SAMPLE).ids
    assert ids.tolist() == want
    assert 0 in want and len(want) < len(SAMPLE.encode())  # the special and some merges
    assert moetrain.decode_tokens(ids, tokenizer=tok) == SAMPLE
    f = tmp_path / "sample.txt"
    f.write_bytes(SAMPLE.encode())
    assert moetrain.load_tokens(str(f), tokenizer=tok).tolist() == want
    assert json.loads(cli("tokenizer", "encode", "--tokenizer", tok, f).stdout) == want


def test_generate_text_uses_checkpoint_tokenizer(cli, tok, run_dir):
    prompt, n = "The king", 12
    p = cli("generate", "--checkpoint", run_dir, "--device", "cpu", "--threads", "1",
            "--prompt", prompt, "--max-new", n, "--temperature", 0, "--json")
    want = json.loads(p.stdout.strip().splitlines()[-1])
    dev = moetrain.open_device("cpu", threads=1)

    model = moetrain.Model.from_checkpoint(dev, run_dir)
    assert moetrain.generate_text(model, prompt, max_new_tokens=n, temperature=0) == want["text"]
    assert moetrain.generate_text(model, prompt, max_new_tokens=n, temperature=0,
                                  tokenizer=tok) == want["text"]
    ids = moetrain.generate(model, moetrain.encode_text(prompt, tokenizer=tok),
                            max_new_tokens=n, temperature=0)
    assert ids.tolist() == want["tokens"]
    # tokenizer="bytes" overrides the checkpoint's: the prompt's bytes are the ids.
    by_bytes = moetrain.generate(model, moetrain.encode_text(prompt), max_new_tokens=n,
                                 temperature=0)
    assert by_bytes.tolist() != want["tokens"]
    assert moetrain.generate_text(model, prompt, max_new_tokens=n, temperature=0,
                                  tokenizer="bytes") == moetrain.decode_tokens(by_bytes)

    # Model.load records the checkpoint's tokenizer too; a model from a config has bytes.
    fresh = moetrain.Model.from_config(dev, CONFIG)
    fresh.load(run_dir)
    assert moetrain.generate_text(fresh, prompt, max_new_tokens=n, temperature=0) == want["text"]
    plain = moetrain.Model.from_config(dev, CONFIG)
    plain.init_weights(3)
    ids = moetrain.generate(plain, moetrain.encode_text(prompt), max_new_tokens=n, temperature=0)
    assert moetrain.generate_text(plain, prompt, max_new_tokens=n,
                                  temperature=0) == moetrain.decode_tokens(ids)


def test_generate_text_refuses_tokenizer_beyond_vocab(cli, corpus, tmp_path):
    big = tmp_path / "big.json"
    cli("tokenizer", "train", "--data", corpus, "--vocab-size", 400, "--out", big,
        "--threads", 1)
    model = moetrain.Model.from_config(moetrain.open_device("cpu", threads=1), CONFIG)
    model.init_weights(1)
    with pytest.raises(moetrain.Error) as e:
        moetrain.generate_text(model, "The king", max_new_tokens=2, tokenizer=str(big))
    assert "vocab_size" in str(e.value) and "\n" not in str(e.value), str(e.value)
