#!/usr/bin/env python3
"""Encoding throughput of moetrain's byte-level BPE against tiktoken and HF tokenizers: the
same ranks, the same text, one thread and more (docs/BENCHMARKS.md, "Tokenizer and loader").

    python bench/tokenizer_throughput.py --moetrain build/moetrain \\
        --tokenizer ~/.cache/moetrain/gpt2/tokenizer.json \\
        --text ../shared/data/tinyshakespeare.txt /tmp/tokbench/corpus.txt --threads 1 2

Run it with the venv of tools/install-deps.sh (tiktoken, tokenizers, numpy). --tokenizer is a
byte-level BPE tokenizer.json whose ids are in merge order (GPT-2's, or one written by
`moetrain tokenizer train`): tiktoken gets its vocabulary as ranks (id = rank) with the GPT-2
split regex (tiktoken's r50k_base pattern), HF tokenizers loads the file itself (truncation
off), moetrain loads the file. Each text is cut into pieces of --piece-bytes at the same line
boundaries `moetrain tokenize` uses (after a '\\n' between a visible ASCII character and an
ASCII letter or digit, where every split pattern gives the same pieces), and every library
encodes the same pieces: tiktoken with encode_ordinary_batch(num_threads=N), HF with
encode_batch on a rayon pool of N threads (RAYON_RS_NUM_CPUS), moetrain with
`moetrain tokenizer bench --threads N`. Every run is a fresh process; the best of --repeat runs
counts. Wall-clock MB/s and MB per CPU-second (all threads of the
process) are both reported: on a loaded machine the second is the steadier measure of the work
done, the first the only measure of scaling with threads. The ids of all three are hashed (SHA-256 of uint32 little-endian) and must be equal.
The last row per text and thread count is `moetrain tokenize` end to end (reading the file,
encoding, writing uint16 shards, wall clock of the process), whose shard tokens must be the
same ids after the leading end-of-text id.
"""
import argparse
import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

CUT = re.compile(rb"(?<=[!-~])\n(?=[A-Za-z0-9])")
GPT2_SPLIT = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""


def pieces_of(data, piece_bytes):
    """The pieces `moetrain tokenize` / `tokenizer bench` cut `data` into (text_pieces.cpp)."""
    out, begin = [], 0
    while begin < len(data):
        end = len(data)
        if len(data) - begin > piece_bytes:
            m = CUT.search(data, begin + piece_bytes - 1)
            end = m.end() if m else len(data)
        out.append(data[begin:end].decode("utf-8"))
        begin = end
    return out


def byte_decoder():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


def tiktoken_encoding(tokenizer_json):
    import tiktoken
    j = json.load(open(tokenizer_json, encoding="utf-8"))
    dec = byte_decoder()
    ranks = {bytes(dec[ch] for ch in tok): i for tok, i in j["model"]["vocab"].items()}
    specials = {a["content"]: a["id"] for a in j.get("added_tokens") or []}
    for s in specials:
        ranks.pop(s.encode(), None)
    return tiktoken.Encoding("bench", pat_str=GPT2_SPLIT, mergeable_ranks=ranks,
                             special_tokens=specials)


def worker(a):
    """One library, one text, one thread count, in its own process; prints a JSON line."""
    import numpy as np
    data = open(a.text[0], "rb").read()
    texts = pieces_of(data, a.piece_bytes)
    n = a.threads[0]
    batch = 4 * n
    if a.worker == "tiktoken":
        enc = tiktoken_encoding(a.tokenizer)
        if n == 1:
            encode = lambda ts: [enc.encode_ordinary(t) for t in ts]
        else:
            encode = lambda ts: enc.encode_ordinary_batch(ts, num_threads=n)
    else:
        from tokenizers import Tokenizer
        tk = Tokenizer.from_file(a.tokenizer)
        tk.no_truncation()
        tk.no_padding()
        encode = lambda ts: [e.ids for e in tk.encode_batch(ts, add_special_tokens=False)]
    best, best_cpu, digest, tokens = 1e300, 0.0, None, 0
    for _ in range(a.repeat):
        h, tokens, spent, cpu = hashlib.sha256(), 0, 0.0, 0.0
        for k in range(0, len(texts), batch):
            t0, c0 = time.perf_counter(), time.process_time()
            ids = encode(texts[k:k + batch])
            spent += time.perf_counter() - t0
            cpu += time.process_time() - c0
            for v in ids:
                h.update(np.asarray(v, dtype="<u4").tobytes())
                tokens += len(v)
        if spent < best:
            best, best_cpu = spent, cpu
        digest = h.hexdigest()
    print(json.dumps({"tokenizer": a.worker, "threads": n, "pieces": len(texts),
                      "bytes": len(data), "tokens": tokens, "seconds": best,
                      "mb_per_s": len(data) / 1e6 / best, "cpu_seconds": best_cpu,
                      "ids_sha256": digest}))


def run_json(argv, env=None):
    p = subprocess.run(argv, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        sys.exit(f"{' '.join(argv)} failed:\n{p.stdout}\n{p.stderr}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def tokenize_end_to_end(a, text, threads):
    """`moetrain tokenize` wall clock and the SHA-256 of its shard ids after the leading eot."""
    import numpy as np
    out = tempfile.mkdtemp(prefix="tokbench-shards-")
    try:
        best = 1e300
        for _ in range(a.repeat):
            shutil.rmtree(out)
            t0 = time.perf_counter()
            subprocess.run([a.moetrain, "tokenize", "--tokenizer", a.tokenizer, "--data", text,
                            "--out", out, "--threads", str(threads), "--quiet",
                            "--piece-bytes", str(a.piece_bytes)],
                           check=True, capture_output=True)
            best = min(best, time.perf_counter() - t0)
        h, tokens = hashlib.sha256(), 0
        for i, path in enumerate(sorted(glob.glob(os.path.join(out, "*_train_*.bin")))):
            raw = open(path, "rb").read()
            header = np.frombuffer(raw[:1024], dtype="<i4")
            ids = np.frombuffer(raw[1024:], dtype="<u2" if header[1] == 1 else "<u4")
            ids = ids[1:] if i == 0 else ids  # the end-of-text id before the document
            h.update(ids.astype("<u4").tobytes())
            tokens += len(ids)
        size = os.path.getsize(text)
        return {"tokenizer": "moetrain tokenize", "threads": threads, "bytes": size,
                "tokens": tokens, "seconds": best, "mb_per_s": size / 1e6 / best,
                "ids_sha256": h.hexdigest()}
    finally:
        shutil.rmtree(out, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--moetrain", default="build/moetrain")
    ap.add_argument("--tokenizer", required=True, help="byte-level BPE tokenizer.json")
    ap.add_argument("--text", nargs="+", required=True)
    ap.add_argument("--threads", nargs="+", type=int, default=[1, os.cpu_count() or 1])
    ap.add_argument("--piece-bytes", type=int, default=1 << 20)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--libs", nargs="+", default=["tiktoken", "hf"], choices=["tiktoken", "hf"],
                    help="the references to run (HF tokenizers is slow on 200 MB)")
    ap.add_argument("--worker", choices=["tiktoken", "hf"], help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        return worker(a)
    me = [sys.executable, os.path.abspath(__file__), "--tokenizer", a.tokenizer,
          "--piece-bytes", str(a.piece_bytes), "--repeat", str(a.repeat)]
    print(f"load average before: {os.getloadavg()[0]:.1f}; {os.cpu_count()} cores")
    print("| text | MB | threads | moetrain MB/s | tiktoken MB/s | HF tokenizers MB/s | "
          "moetrain / tiktoken | moetrain / HF | MB per CPU-second: moetrain, tiktoken, HF | "
          "`moetrain tokenize` end to end MB/s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for text in a.text:
        for n in a.threads:
            ours = run_json([a.moetrain, "tokenizer", "bench", "--tokenizer", a.tokenizer, text,
                             "--threads", str(n), "--piece-bytes", str(a.piece_bytes),
                             "--repeat", str(a.repeat)])
            print(json.dumps(ours), file=sys.stderr, flush=True)
            ref = {}
            for lib in a.libs:
                env = dict(os.environ, RAYON_RS_NUM_CPUS=str(n),
                           TOKENIZERS_PARALLELISM="true" if n > 1 else "false")
                ref[lib] = run_json(me + ["--worker", lib, "--text", text, "--threads", str(n)],
                                    env)
                print(json.dumps(ref[lib]), file=sys.stderr, flush=True)
            e2e = tokenize_end_to_end(a, text, n)
            print(json.dumps(e2e), file=sys.stderr, flush=True)
            for r in (*ref.values(), e2e):
                if r["ids_sha256"] != ours["ids_sha256"] or r["tokens"] != ours["tokens"]:
                    sys.exit(f"{r['tokenizer']} gave other ids than moetrain on {text} "
                             f"({r['tokens']} vs {ours['tokens']} tokens)")
            rows = [ours, ref.get("tiktoken"), ref.get("hf")]
            cell = lambda r, f: "-" if r is None else f(r)
            print(f"| {os.path.basename(text)} | {ours['bytes'] / 1e6:.1f} | {n} | "
                  + " | ".join(cell(r, lambda r: f"{r['mb_per_s']:.1f}") for r in rows) + " | "
                  + " | ".join(cell(r, lambda r: f"{ours['mb_per_s'] / r['mb_per_s']:.2f}")
                               for r in rows[1:]) + " | "
                  + ", ".join(cell(r, lambda r: f"{r['bytes'] / 1e6 / r['cpu_seconds']:.1f}")
                              for r in rows)
                  + f" | {e2e['mb_per_s']:.1f} |",
                  flush=True)
    print(f"load average after: {os.getloadavg()[0]:.1f}; all ids identical "
          f"(SHA-256 of the uint32 ids): moetrain, {', '.join(a.libs)}, moetrain tokenize")


if __name__ == "__main__":
    main()
