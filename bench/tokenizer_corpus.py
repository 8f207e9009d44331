#!/usr/bin/env python3
"""Writes a large generated text corpus for the tokenizer benchmark (not committed: about 1 MB
per second to generate). Deterministic for a seed.

    python3 bench/tokenizer_corpus.py --out /tmp/corpus.txt --mb 210 [--seed 0] [--source FILE]

The text is paragraphs of a word-bigram chain trained on --source (default: the shared
tinyshakespeare.txt), so word frequencies look like natural English, with the kinds of pieces
web text adds: 3% of words misspelt (pieces a word cache has not seen), numbers (years,
prices, decimals, 1,000s), and lines of accented Latin, Cyrillic, Greek, CJK, emoji, URLs and
code.
"""
import argparse
import os
import random
import re

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_SOURCE = os.path.join(os.path.dirname(os.path.dirname(HERE)), "shared", "data",
                              "tinyshakespeare.txt")

FOREIGN = [
    "Le café était fermé, mais la boulangerie à côté vendait des croissants frais.",
    "Über den Wolken muss die Freiheit wohl grenzenlos sein, sagte der Förster.",
    "Быстрая коричневая лиса перепрыгнула через ленивую собаку в понедельник.",
    "Η γρήγορη καφέ αλεπού πηδάει πάνω από τον τεμπέλη σκύλο.",
    "東京の天気は晴れです。明日は雨が降るかもしれません。",
    "我们今天去公园散步，然后在河边吃了午饭。",
    "오늘은 날씨가 정말 좋네요. 같이 산책할까요?",
    "Great news 🎉🎉 — the release is out! 👍🏽 Thanks everyone ❤️",
    "See https://example.com/docs/v2/index.html?lang=en&page=3 for details.",
    "    for (int i = 0; i < n; ++i) { total += values[i] * 2; }",
    "def parse(line):\n        return [int(x) for x in line.split(',') if x.strip()]",
    "ERROR 2024-03-15T12:34:56Z worker-7 timeout after 30000ms (retry 3/5)",
]


def bigram_model(text):
    words = re.findall(r"[A-Za-z']+|[.,;:!?]|\n\n", text)
    follow = {}
    for a, b in zip(words, words[1:]):
        follow.setdefault(a, []).append(b)
    return words, follow


def misspell(rng, w):
    i = rng.randrange(len(w))
    return w[:i] + rng.choice("abcdefghijklmnopqrstuvwxyz") + w[i + (rng.random() < 0.5):]


def number(rng):
    k = rng.random()
    if k < 0.3:
        return str(rng.randint(1800, 2030))
    if k < 0.5:
        return f"${rng.randint(1, 999)}.{rng.randint(0, 99):02d}"
    if k < 0.7:
        return f"{rng.randint(1, 999)},{rng.randint(0, 999):03d}"
    if k < 0.85:
        return f"{rng.random() * 100:.{rng.randint(1, 4)}f}"
    return str(rng.randint(0, 10 ** rng.randint(1, 12)))


def paragraph(rng, words, follow):
    w = rng.choice(words)
    out, line = [], 0
    for _ in range(rng.randint(20, 160)):
        w = rng.choice(follow.get(w) or words)
        if w == "\n\n":
            continue
        r = rng.random()
        piece = w
        if r < 0.03 and len(w) > 2:
            piece = misspell(rng, w)
        elif r < 0.05:
            piece = number(rng)
        if piece in ".,;:!?" and out:
            out[-1] = out[-1][:-1] + piece + "\n" if out[-1].endswith("\n") else out[-1] + piece
        else:
            out.append(piece)
        line += len(piece) + 1
        if line > 80 and rng.random() < 0.2:
            out[-1] += "\n"
            line = 0
    text = " ".join(out).replace("\n ", "\n")
    return text[:1].upper() + text[1:]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--mb", type=float, default=210)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--source", default=DEFAULT_SOURCE)
    a = ap.parse_args()
    with open(a.source, encoding="utf-8") as f:
        words, follow = bigram_model(f.read())
    rng = random.Random(a.seed)
    want = int(a.mb * 1e6)
    tmp = a.out + ".tmp"
    written = 0
    with open(tmp, "w", encoding="utf-8") as f:
        while written < want:
            parts = []
            for _ in range(200):
                parts.append(rng.choice(FOREIGN) if rng.random() < 0.03 else
                             paragraph(rng, words, follow))
            block = "\n\n".join(parts) + "\n\n"
            f.write(block)
            written += len(block.encode("utf-8"))
    os.replace(tmp, a.out)
    print(f"wrote {a.out}: {written / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
