"""What the bench scripts share: the arguments naming the moetrain binary and the benchmarked
shape, and reading the JSON line `moetrain bench` / `plan` print last."""
import argparse
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))


def shape_parser(runs, steps):
    """--moetrain, --preset, --batch, --seq, --runs, --steps, --threads."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--moetrain", default=os.path.join(HERE, "..", "build", "moetrain"))
    ap.add_argument("--preset", required=True)
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--seq", type=int, required=True)
    ap.add_argument("--runs", type=int, default=runs)
    ap.add_argument("--steps", type=int, default=steps)
    ap.add_argument("--threads", type=int, default=2)
    return ap


def last_json(out):
    """The last line of a command's standard output, parsed as JSON."""
    return json.loads(out.strip().splitlines()[-1])
