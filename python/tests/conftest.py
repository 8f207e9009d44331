"""Fixtures of the Python package tests: the CLI binary to compare against (--moetrain or
$MOETRAIN_CLI), a small deterministic English-like corpus, and helpers to run the CLI."""
import json
import os
import random
import subprocess

import pytest


def pytest_addoption(parser):
    parser.addoption("--moetrain", default=os.environ.get("MOETRAIN_CLI", ""),
                     help="path of the moetrain CLI binary the package is compared with")


@pytest.fixture(scope="session")
def cli(pytestconfig):
    path = pytestconfig.getoption("--moetrain")
    if not path:
        import moetrain.__main__ as entry  # an installed package carries the binary
        path = entry.cli_path()
    assert os.access(path, os.X_OK), f"no moetrain CLI at {path}"

    def run(*argv, ok=True):
        p = subprocess.run([path, *map(str, argv)], capture_output=True, text=True,
                           encoding="utf-8", errors="replace", timeout=600)
        if ok and p.returncode != 0:
            raise AssertionError(f"moetrain {' '.join(map(str, argv))} failed:\n{p.stderr}")
        return p

    run.path = path
    return run


@pytest.fixture(scope="session")
def corpus(tmp_path_factory):
    rng = random.Random(0)
    words = ("the king and queen of a far land spoke to their people about bread wine and war "
             "while the young prince rode north to find his brother in the old castle").split()
    text = ""
    while len(text) < 40000:
        s = " ".join(rng.choice(words) for _ in range(rng.randint(4, 12)))
        text += s[0].upper() + s[1:] + ".\n"
    path = tmp_path_factory.mktemp("data") / "corpus.txt"
    path.write_text(text[:40000])
    return str(path)


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]
