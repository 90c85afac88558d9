"""``tokengeo report REPORT.json``: the tally of a run's report, and the docs generated from
it (``--write-docs`` renders every ``<!-- tokengeo:begin NAME -->`` block of README.md and
docs/ from the report; ``--check-docs`` exits 1, one line per differing block, when one
disagrees). Both act on the docs under the current folder, or ``--root DIR``; the report
is read by :func:`tokengeo.reporting.reader.read_report` and the docs by
:mod:`tokengeo.reporting.docfiles`, so a bad report or a bad marker is one line, exit 2,
before any file is written."""

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


def run(args: argparse.Namespace) -> int:
    from tokengeo.errors import ConfigError
    from tokengeo.reporting.blocks import render
    from tokengeo.reporting.docfiles import check_docs, write_docs
    from tokengeo.reporting.reader import read_report

    data = read_report(Path(args.report))
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
