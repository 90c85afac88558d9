"""argparse errors of a sub-command as one line (``tokengeo CMD: error: ...``), exit 2.

argparse prints its usage block before an error (``--steps 1e30``: invalid int value);
the CLI's promise is one line naming the problem, so a sub-command's parser prints only
that line and points to ``--help``.
"""

from __future__ import annotations

import argparse
import sys


def one_line_errors(parser: argparse.ArgumentParser, command: str) -> None:
    """Make ``parser`` report bad arguments in one line and exit with status 2."""

    def error(message: str):
        print(f"tokengeo {command}: error: {message} (see tokengeo {command} --help)",
              file=sys.stderr)
        sys.exit(2)

    parser.error = error  # type: ignore[method-assign]
