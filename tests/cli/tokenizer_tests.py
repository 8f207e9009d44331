#!/usr/bin/env python3
"""Tokenizers against the reference libraries (HF `tokenizers`, `tiktoken`, `sentencepiece`
from tools/requirements-test.txt): the same ids and the same decoded text for text that
stresses the split rules, and an exact byte round trip for invalid UTF-8. Registered with ctest
when MOETRAIN_TEST_PYTHON names the venv with those packages:

    tokenizer_tests.py --moetrain build/moetrain --work DIR TEST_NAME
"""
import base64
import json
import os
import random
import shutil
import subprocess
import sys

import cli_tests as cli
from cli_tests import expect_error, work

TESTS = {}
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
# The first 200,000 bytes of tinyshakespeare, shipped with the tests (tests/data/README.md): the
# tests read nothing from outside the repository.
SHAKESPEARE = os.path.join(REPO, "tests", "data", "tinyshakespeare_head.txt")


def test(fn):
    TESTS[fn.__name__] = fn
    return fn


def run_bytes(*argv):
    """moetrain with binary stdout (decoded text must come back byte for byte)."""
    p = subprocess.run([cli.ARGS.moetrain, *map(str, argv)], capture_output=True, timeout=600)
    if p.returncode != 0:
        raise AssertionError(f"moetrain {' '.join(map(str, argv))} failed ({p.returncode}):\n"
                             f"{p.stdout[-2000:]!r}\n{p.stderr[-2000:]!r}")
    return p.stdout


def base_corpus():
    """A training text for the test tokenizers: some Shakespeare plus the stress text, so that
    merges exist across every kind of piece."""
    with open(SHAKESPEARE, encoding="utf-8") as f:
        text = f.read()
    return text + "\n" + "\n".join(STRESS) * 20


STRESS = [
    "Hello world! It's a test: I'm, you're, we've, they'll, he'd, don't, CAN'T, WE'LL, I'M, "
    "'S 's 'T 'Re 'VE 'lL 'd",
    "digits 1 12 123 1234 12345 123456789 3.14159 1,000,000 ٣٤٥ ½ Ⅻ ²³",
    "spaces:  two   three    four\ttab\t\tdouble tab \n\n newline  \n  \r\n crlf \r\r x   ",
    "emoji 👋🏽 👨‍👩‍👧‍👦 🇫🇷 ❤️ 😀😀😀 and ✨sparkles✨",
    "CJK 日本語の文章です。中文句子，还有标点！한국어 문장입니다.",
    "accents café naïve résumé e\u0301 a\u0308 Ωμέγα Привет мир ĲǅǈǋDž Ǆungla",
    "not NFC: A\u030a \u1100\u1161\u11a8 \uf900 \u2126 e\u0327\u0301 \u0958 >\u0338 x\u0301\u0327",
    "camelCase HTTPServer XMLHttpRequest iPhone McDonald's O'Neil ALLCAPS'S",
    "punct ... !!! ??? --- === /// \\\\ (paren) [bracket] {brace} <tag/> a/b/c //\n//\r\n",
    "x" * 3000 + " " + "ab" * 1500 + " " + "9" * 1000,
    " leading space and trailing spaces    ",
    "\n\n\nstarts with newlines",
    "mixed\u00a0nbsp\u2003emspace\u3000ideographic\u2028linesep end",
    "marks alone \u0301\u0302 x\u0301\u0301\u0301y \u0903\u0904",
    "   ",
    "a",
    "'",
    "'s",
    "\r\n",
    "ends with a newline and spaces\n  ",
    "newline space newline\n \n",
    "tabs then newline at the end\t\t\n",
]


def fuzz_text(seed, n):
    alphabet = (list("abcXYZ'sStTdDmMlLvVrReE019 \t\n\r/.,!?-_") +
                ["\u00e9", "\u0301", "\u0903", "\u01c5", "\u02b0", "\u00aa", "\u4e2d", "\u3002",
                 "\u00a0", "\u2003", "\u0663", "\u00bd", "\U0001F600", "\u200d", "\u2028",
                 "\u0391", "\u03b1", "\u2160", "\uff01"])
    rng = random.Random(seed)
    return "".join(rng.choice(alphabet) for _ in range(n))


def texts():
    out = list(STRESS)
    out += ["".join(STRESS), fuzz_text(1, 20000)]
    out += [fuzz_text(100 + i, n) for i, n in enumerate([1, 2, 3, 5, 8, 17, 64, 300, 1000])]
    return out


def ours_encode(d, spec, text, pattern=None):
    path = os.path.join(d, "text.bin")
    with open(path, "wb") as f:
        f.write(text if isinstance(text, bytes) else text.encode("utf-8"))
    extra = ["--tokenizer-pattern", pattern] if pattern else []
    return json.loads(run_bytes("tokenizer", "encode", "--tokenizer", spec, *extra, path))


def ours_decode(d, spec, ids, pattern=None):
    path = os.path.join(d, "ids.json")
    with open(path, "w") as f:
        json.dump(ids, f)
    extra = ["--tokenizer-pattern", pattern] if pattern else []
    return run_bytes("tokenizer", "decode", "--tokenizer", spec, *extra, path)


def compare(d, spec, encode_ref, decode_ref, pattern=None):
    n = 0
    for text in texts():
        ids = ours_encode(d, spec, text, pattern)
        ref = encode_ref(text)
        if ids != ref:
            first = next((i for i, (a, b) in enumerate(zip(ids, ref)) if a != b),
                         min(len(ids), len(ref)))
            raise AssertionError(f"{spec}: ids differ for {text[:60]!r} at {first}: "
                                 f"ours {ids[max(0, first - 3):first + 5]} "
                                 f"reference {ref[max(0, first - 3):first + 5]}")
        back = ours_decode(d, spec, ids, pattern)
        assert back == decode_ref(ids), f"{spec}: decode differs for {text[:60]!r}"
        n += len(ids)
    print(f"{os.path.basename(spec)}: {len(texts())} texts, {n} ids identical to the reference")


def check_invalid_utf8_round_trip(d, spec, pattern=None):
    rng = random.Random(7)
    samples = [b"\xff\xfe abc \x80\x81", b"caf\xc3", b"\xc3\x28 \xa0\xa1 \xe2\x82 \xf0\x9f\x98",
               b"\xed\xa0\x80 surrogate \xc0\xaf overlong \xf4\x90\x80\x80",
               bytes(rng.randrange(256) for _ in range(5000))]
    for s in samples:
        ids = ours_encode(d, spec, s, pattern)
        assert ours_decode(d, spec, ids, pattern) == s, f"{spec}: round trip lost bytes of {s[:40]!r}"
    print(f"{os.path.basename(spec)}: invalid UTF-8 round trips exactly")


# ---- Hugging Face tokenizer.json ----------------------------------------------------------

def train_hf(d, vocab_size=1500):
    from tokenizers import Tokenizer, models, pre_tokenizers, decoders, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator([base_corpus()], trainer)
    path = os.path.join(d, "gpt2.json")
    tok.save(path)
    return path


def hf_variant(d, base, name, edit):
    with open(base) as f:
        j = json.load(f)
    edit(j)
    path = os.path.join(d, name + ".json")
    with open(path, "w") as f:
        json.dump(j, f)
    return path


def check_hf(d, path):
    from tokenizers import Tokenizer
    ref = Tokenizer.from_file(path)
    compare(d, path, lambda t: ref.encode(t, add_special_tokens=False).ids,
            lambda ids: ref.decode(ids, skip_special_tokens=False).encode("utf-8"))


SPLIT_REGEX = {
    "llama3": r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    "qwen2": r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
}


def split_sequence(regex):
    def edit(j):
        j["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated",
             "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
             "use_regex": False}]}
    return edit


@test
def hf_gpt2_bytelevel_identical():
    d = work("hf_gpt2")
    path = train_hf(d)
    check_hf(d, path)
    check_invalid_utf8_round_trip(d, path)


@test
def hf_variants_identical():
    d = work("hf_variants")
    base = train_hf(d)
    for name, regex in SPLIT_REGEX.items():
        check_hf(d, hf_variant(d, base, name, split_sequence(regex)))

    def prefix(j):
        j["pre_tokenizer"]["add_prefix_space"] = True
    check_hf(d, hf_variant(d, base, "prefix_space", prefix))

    def ignore_merges(j):
        j["model"]["ignore_merges"] = True
    check_hf(d, hf_variant(d, base, "ignore_merges", ignore_merges))

    # Qwen2's NFC normalizer (the stress text has decomposed accents, Hangul, CJK
    # compatibility characters), alone and in a Sequence.
    def nfc(j):
        j["normalizer"] = {"type": "NFC"}
    check_hf(d, hf_variant(d, base, "nfc", nfc))

    def nfc_sequence(j):
        j["normalizer"] = {"type": "Sequence", "normalizers": [{"type": "NFC"}]}
        split_sequence(SPLIT_REGEX["qwen2"])(j)
    check_hf(d, hf_variant(d, base, "nfc_sequence", nfc_sequence))

    # The newer ["a", "b"] merge format (tokenizers >= 0.20 writes it; 0.19 cannot read it):
    # the same ids as the "a b" strings of the same merges.
    def pair_merges(j):
        j["model"]["merges"] = [m.split(" ") for m in j["model"]["merges"]]
    from tokenizers import Tokenizer
    ref = Tokenizer.from_file(base)
    compare(d, hf_variant(d, base, "pair_merges", pair_merges),
            lambda t: ref.encode(t, add_special_tokens=False).ids,
            lambda ids: ref.decode(ids, skip_special_tokens=False).encode("utf-8"))


# ---- tiktoken -----------------------------------------------------------------------------

def tiktoken_patterns():
    """tiktoken_ext.openai_public's patterns (its cl100k / o200k functions download the ranks,
    so the two patterns are copied from tiktoken 0.8.0 here)."""
    from tiktoken_ext import openai_public as op
    return {
        "gpt2": op.r50k_pat_str,
        "cl100k": r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s""",
        "o200k": "|".join([
            r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
            r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
            r"""\p{N}{1,3}""",
            r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
            r"""\s*[\r\n]+""",
            r"""\s+(?!\S)""",
            r"""\s+""",
        ]),
    }


def tiktoken_ranks(d):
    """Ranks from a trained byte-level BPE (vocabulary order), written as a .tiktoken file."""
    hf = json.load(open(train_hf(d)))
    from tokenizers.pre_tokenizers import ByteLevel
    inv = {c: b for b, c in bytes_to_unicode().items()}
    items = sorted(((i, s) for s, i in hf["model"]["vocab"].items()
                    if s != "<|endoftext|>"))
    ranks = {bytes(inv[c] for c in s): r for r, (_, s) in enumerate(items)}
    path = os.path.join(d, "test.tiktoken")
    with open(path, "w") as f:
        for b, r in ranks.items():
            f.write(f"{base64.b64encode(b).decode()} {r}\n")
    return path, ranks


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


@test
def tiktoken_patterns_identical():
    import tiktoken
    d = work("tiktoken")
    path, ranks = tiktoken_ranks(d)
    for name, pat in tiktoken_patterns().items():
        enc = tiktoken.Encoding(name=f"test_{name}", pat_str=pat, mergeable_ranks=ranks,
                                special_tokens={"<|endoftext|>": len(ranks)})
        compare(d, path, lambda t: enc.encode(t, allowed_special="all"),
                lambda ids: enc.decode_bytes(ids), pattern=name)
        check_invalid_utf8_round_trip(d, path, pattern=name)


# ---- SentencePiece ------------------------------------------------------------------------

@test
def sentencepiece_identical():
    import sentencepiece as spm
    d = work("sentencepiece")
    corpus = os.path.join(d, "corpus.txt")
    with open(corpus, "w", encoding="utf-8") as f:
        f.write(base_corpus())
    for model_type in ["bpe", "unigram"]:
        prefix = os.path.join(d, model_type)
        spm.SentencePieceTrainer.train(input=corpus, model_prefix=prefix, vocab_size=800,
                                       model_type=model_type, character_coverage=1.0,
                                       byte_fallback=True, minloglevel=2)
        sp = spm.SentencePieceProcessor(model_file=prefix + ".model")
        compare(d, prefix + ".model", lambda t: sp.encode(t),
                lambda ids: sp.decode(ids).encode("utf-8"))


@test
def bpe_model_end_to_end():
    """tokenize -> train -> eval / generate with a byte-level BPE; generate and eval use the
    checkpoint's tokenizer, and generate --json prints only the JSON object."""
    from tokenizers import Tokenizer
    d = work("bpe_end_to_end")
    tok = train_hf(d, vocab_size=400)
    text = os.path.join(d, "corpus.txt")
    with open(text, "w", encoding="utf-8") as f:
        f.write(base_corpus()[:60000])
    shards = os.path.join(d, "shards")
    run_bytes("tokenize", "--tokenizer", tok, "--data", text, "--out", shards,
              "--val-tokens", 2000, "--shard-tokens", 5000)
    cfg = json.loads(run_bytes("config", "--preset", "tiny"))
    cfg["vocab_size"] = 400
    cfg_path = os.path.join(d, "tiny400.json")
    json.dump(cfg, open(cfg_path, "w"))
    run_bytes("train", "--device", "cpu", "--threads", 1, "--config", cfg_path, "--data", shards,
              "--tokenizer", tok, "--batch", 4, "--seq", 32, "--steps", 3, "--out",
              os.path.join(d, "run"))
    ev = run_bytes("eval", "--device", "cpu", "--threads", 1, "--checkpoint", os.path.join(d, "run"),
                   "--data", text, "--batch", 2, "--seq", 32, "--batches", 2)
    assert json.loads(ev.decode().strip().splitlines()[-1])["loss"] > 0
    out = run_bytes("generate", "--device", "cpu", "--threads", 1, "--checkpoint",
                    os.path.join(d, "run"), "--prompt", "ROMEO: the king", "--max-new", 12,
                    "--seed", 3, "--json")
    j = json.loads(out)  # the whole of stdout is one JSON object
    ref = Tokenizer.from_file(tok)
    assert len(j["tokens"]) == 12 and max(j["tokens"]) < 400, j
    assert j["text"] == ref.decode(j["tokens"], skip_special_tokens=False), j
    streamed = run_bytes("generate", "--device", "cpu", "--threads", 1, "--checkpoint",
                         os.path.join(d, "run"), "--prompt", "ROMEO: the king", "--max-new", 12,
                         "--seed", 3)
    sample = ours_decode(d, tok, j["tokens"])  # exact bytes (the JSON text replaces bad UTF-8)
    assert streamed == b"ROMEO: the king" + sample + b"\n", (streamed, sample)
    print("generate:", repr(streamed))


def cut_stress_text():
    """Text with many line cuts, and newlines next to everything a cut must not split: white
    space runs, punctuation runs with their newline tails, '/' after a newline (o200k's
    [\r\n/]* tail), contractions, digits and special tokens at line starts and ends."""
    rng = random.Random(5)
    edges = ["word.\n/path", "a  \nb", "x\t\nY", ".\n\nX", "end!\n's", "1\n2\n3", "q\r\nR",
             "<|endoftext|>\nAfter", "Before\n<|endoftext|>", "e\u0301\nz", "\u4e2d\nA", "ok\n\u00e9",
             "done;\n'll", "done;\n9", "tab\t\n\tz", "b \nc", "!!\n\n\nQ", "x\n \ny"]
    lines = base_corpus().split("\n")[:3000]
    out = []
    for line in lines:
        out.append(line)
        if rng.random() < 0.3:
            out.append(rng.choice(edges) + fuzz_text(rng.randrange(10 ** 6), rng.randrange(40)))
    return "\n".join(out)


@test
def tokenize_in_parallel_pieces_matches_serial():
    """`tokenize` cuts a text file into pieces at line cuts (many here: 300-byte pieces) and
    encodes them on several threads; the shards are byte-identical to encoding the file whole
    on one thread, for every split pattern, and for tokenizers that must not be cut (prefix
    space, SentencePiece); a JSONL file cut between its lines too, whose bad line is still named.
    `tokenizer bench` hashes the same ids as the reference library."""
    import hashlib
    from tokenizers import Tokenizer
    d = work("tokenize_parallel")
    text = os.path.join(d, "corpus.txt")
    with open(text, "w", encoding="utf-8", newline="") as f:
        f.write(cut_stress_text())
    base = train_hf(d)
    specs = [base, "bytes"]
    specs += [hf_variant(d, base, n, split_sequence(r)) for n, r in SPLIT_REGEX.items()]

    def prefix(j):
        j["pre_tokenizer"]["add_prefix_space"] = True
    specs.append(hf_variant(d, base, "prefix_space", prefix))
    tk_path, _ = tiktoken_ranks(d)
    for name in ["cl100k", "o200k"]:
        specs.append((tk_path, name))
    import sentencepiece as spm
    spm.SentencePieceTrainer.train(input=text, model_prefix=os.path.join(d, "sp"), vocab_size=500,
                                   model_type="bpe", byte_fallback=True, minloglevel=2)
    specs.append(os.path.join(d, "sp.model"))
    for spec in specs:
        spec, pattern = spec if isinstance(spec, tuple) else (spec, None)
        extra = ["--tokenizer-pattern", pattern] if pattern else []
        shards = []
        for threads, piece in [(1, 10 ** 9), (3, 300)]:
            out = os.path.join(d, f"out_{os.path.basename(spec)}_{pattern}_{threads}")
            run_bytes("tokenize", "--tokenizer", spec, *extra, "--eot", 0, "--data", text,
                      "--out", out, "--threads", threads, "--piece-bytes", piece,
                      "--shard-tokens", 20000, "--quiet")
            shards.append({n: open(os.path.join(out, n), "rb").read()
                           for n in sorted(os.listdir(out))})
        assert shards[0] == shards[1], f"{spec} {pattern}: parallel pieces changed the shards"
    # JSONL: pieces of whole lines (documents), errors still name the file's line.
    jsonl = os.path.join(d, "docs.jsonl")
    lines = cut_stress_text().split("\n")
    with open(jsonl, "w", encoding="utf-8") as f:
        for i in range(0, len(lines), 7):
            f.write(json.dumps({"text": "\n".join(lines[i:i + 7])}) + "\n")
    shards = []
    for threads, piece in [(1, 10 ** 9), (3, 300)]:
        out = os.path.join(d, f"jsonl_{threads}")
        run_bytes("tokenize", "--tokenizer", base, "--data", jsonl, "--out", out, "--threads",
                  threads, "--piece-bytes", piece, "--quiet")
        shards.append({n: open(os.path.join(out, n), "rb").read() for n in os.listdir(out)})
    assert shards[0] == shards[1], "JSONL: parallel pieces changed the shards"
    with open(jsonl, "a") as f:
        f.write("not json\n")
    n_lines = len(open(jsonl).read().splitlines())
    expect_error(["tokenize", "--tokenizer", base, "--data", jsonl, "--out",
                  os.path.join(d, "jsonl_bad"), "--threads", 3, "--piece-bytes", 300],
                 f"docs.jsonl line {n_lines}: not a JSON object")
    ref = Tokenizer.from_file(base).encode(open(text, encoding="utf-8", newline="").read(),
                                           add_special_tokens=False).ids
    bench = json.loads(run_bytes("tokenizer", "bench", "--tokenizer", base, text, "--threads", 2,
                                 "--piece-bytes", 300))
    assert bench["pieces"] > 100, bench
    want = hashlib.sha256(b"".join(i.to_bytes(4, "little") for i in ref)).hexdigest()
    assert bench["ids_sha256"] == want and bench["tokens"] == len(ref), bench
    print(f"tokenize: {len(specs)} tokenizers, shards identical for 1 thread whole and "
          f"3 threads in {bench['pieces']} pieces; bench ids = HF ids")


@test
def tokenizer_train_loads_in_hf_and_is_deterministic():
    d = work("tokenizer_train")
    parts = []
    text = base_corpus()
    for i in range(3):  # several files: counted in parallel
        p = os.path.join(d, f"part{i}.txt")
        with open(p, "w", encoding="utf-8") as f:
            f.write(text[i * len(text) // 3:(i + 1) * len(text) // 3])
        parts.append(p)
    outs = []
    for threads in [1, 3]:
        out = os.path.join(d, f"trained{threads}.json")
        log = run_bytes("tokenizer", "train", "--data", os.path.join(d, "part*.txt"),
                        "--vocab-size", 1200, "--special", "<|endoftext|>", "--out", out,
                        "--threads", threads)
        assert b"counted" in log and b"wrote" in log, log
        outs.append(open(out, "rb").read())
    assert outs[0] == outs[1], "tokenizer train is not deterministic across thread counts"
    path = os.path.join(d, "trained1.json")
    check_hf(d, path)  # HF tokenizers loads it and encodes / decodes identically
    from tokenizers import Tokenizer
    assert Tokenizer.from_file(path).get_vocab_size() == 1200
    expect_error(["tokenizer", "train", "--data", os.path.join(d, "none*.txt"), "--vocab-size",
                  500, "--out", os.path.join(d, "x.json")], "matches no files")
    expect_error(["tokenizer", "train", "--data", parts[0], "--vocab-size", 100, "--out",
                  os.path.join(d, "x.json")], "below the 256 bytes")
    assert not os.path.exists(os.path.join(d, "x.json"))


@test
def tokenizer_bad_files():
    d = work("bad_files")
    base = train_hf(d)
    bad_json = os.path.join(d, "bad.json")
    open(bad_json, "w").write("{not json")
    expect_error(["tokenizer", "info", "--tokenizer", bad_json], ["bad.json", "not valid JSON"])
    expect_error(["tokenizer", "info", "--tokenizer", os.path.join(d, "missing.json")],
                 ["missing.json", "cannot open"])

    def unknown_regex(j):
        split_sequence(r"\w+|\s+")(j)
    expect_error(["tokenizer", "info", "--tokenizer", hf_variant(d, base, "regex", unknown_regex)],
                 "unsupported split regex")

    def lowercase(j):
        j["normalizer"] = {"type": "Sequence", "normalizers": [{"type": "NFC"},
                                                               {"type": "Lowercase"}]}
    expect_error(["tokenizer", "info", "--tokenizer", hf_variant(d, base, "lower", lowercase)],
                 "normalizer type \"Lowercase\" is not supported")

    def drop_byte(j):
        del j["model"]["vocab"]["A"]
    expect_error(["tokenizer", "info", "--tokenizer", hf_variant(d, base, "nobyte", drop_byte)],
                 "no token for byte 65")
    tk = os.path.join(d, "bad.tiktoken")
    open(tk, "w").write("QQ== 0\n!!!! 1\n")
    expect_error(["tokenizer", "info", "--tokenizer", tk, "--tokenizer-pattern", "gpt2"],
                 ["bad.tiktoken", "line 2", "base64"])
    expect_error(["tokenizer", "info", "--tokenizer", tk, "--tokenizer-pattern", "p50k"],
                 "unknown split pattern \"p50k\"")
    expect_error(["tokenizer", "info", "--tokenizer", tk], "--tokenizer-pattern")
    model = os.path.join(d, "bad.model")
    open(model, "wb").write(b"\x01\x02garbage")
    expect_error(["tokenizer", "info", "--tokenizer", model], ["bad.model", "sentencepiece"])
    expect_error(["tokenizer", "info", "--tokenizer", "gpt3"], "unknown tokenizer \"gpt3\"")


if __name__ == "__main__":
    cli.TESTS.clear()
    cli.TESTS.update(TESTS)
    sys.exit(cli.main())
