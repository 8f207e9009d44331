"""The `moetrain` command of an installed package: runs the CLI binary shipped inside it."""
from __future__ import annotations

import os
import sys


def cli_path() -> str:
    """Path of the moetrain CLI binary that sits next to the extension."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "moetrain")


def main() -> None:
    exe = cli_path()
    if not os.access(exe, os.X_OK):
        sys.stderr.write(f"moetrain: error: the CLI binary is missing from the package ({exe})\n")
        sys.exit(1)
    os.execv(exe, [exe, *sys.argv[1:]])


if __name__ == "__main__":
    main()
