"""``tokengeo report REPORT.json``: the tally of a run's report, and the docs generated from
it (``--write-docs`` renders every ``<!-- tokengeo:begin NAME -->`` block of README.md and
docs/ from the report; ``--check-docs`` exits 1, one line per differing block, when one
disagrees). Both act on the docs under the current folder, or ``--root DIR``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("report", help="a run's report.json (e.g. docs/results/report.json)")
    act = parser.add_mutually_exclusive_group()
    act.add_argument("--write-docs", action="store_true",
                     help="re-render every generated block of README.md and docs/ from it")
    act.add_argument("--check-docs", action="store_true",
                     help="exit 1 naming each generated block that differs from it")
    parser.add_argument("--root", default=".",
                        help="the folder holding README.md and docs/ (default: here)")


REPORT_LIMIT = 64 << 20  # report.json is a few MB at most (as tokengeo.view.runs reads it)


def _load(path: Path) -> dict:
    from tokengeo.errors import ConfigError
    from tokengeo.io import read_json

    if not path.exists() and not path.is_symlink():
        raise ConfigError(f"{path}: no such report; pass a run's report.json")
    try:  # bounded: a FIFO is refused, deep nesting or NaN is one line, never a traceback
        data = read_json(path, None, limit=REPORT_LIMIT, allow_nan=True)
    except ConfigError as exc:
        raise ConfigError(f"{path}: not a readable report.json ({exc})") from None
    except OSError as exc:
        raise ConfigError(f"{path}: not a readable report.json ({exc.strerror})") from None
    if not (isinstance(data, dict) and str(data.get("format", "")).startswith(
            "tokengeo-report/") and isinstance(data.get("claims"), list)):
        raise ConfigError(f"{path}: not a tokengeo report.json (no tokengeo-report format); "
                          "pass the report.json that `tokengeo reproduce` wrote")
    return data


def run(args: argparse.Namespace) -> int:
    from tokengeo.errors import ConfigError
    from tokengeo.experiments.docblocks import check_docs, render, write_docs

    data = _load(Path(args.report))
    root = Path(args.root)
    if (args.write_docs or args.check_docs) and not root.is_dir():
        raise ConfigError(f"--root {root}: not a folder; pass the folder holding README.md")
    if args.write_docs:
        for path in write_docs(data, root):
            print(f"wrote {path}")
        return 0
    if args.check_docs:
        lines = check_docs(data, root)
        for line in lines:
            print(f"{line} (run: tokengeo report {args.report} --write-docs)",
                  file=sys.stderr)
        return 1 if lines else 0
    print(render(data, "run"))
    print()
    print(render(data, "tally"))
    return 0
