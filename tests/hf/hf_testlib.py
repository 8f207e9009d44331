"""Driver of the Hugging Face interoperability test scripts in this folder: the shared CLI test
driver (tests/cli_testlib.py) plus the --logits option naming build/moetrain_hf_logits."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import cli_testlib  # noqa: E402
from cli_testlib import ARGS, expect_error, run, test, work  # noqa: E402,F401 (re-exported)


def main(setup=None):
    """cli_testlib.main with --logits; setup() runs before the case (after --list)."""
    return cli_testlib.main(
        lambda ap: ap.add_argument("--logits", help="build/moetrain_hf_logits"), setup)
