"""The measured mean wall seconds of a run's stored cells, per suite and cell group: what the
suites' ``cell_cost`` hints should hold (``reproduce --dry-run`` estimates from them).

    python scripts/cell_means.py runs/full/cells [--json]

A cell's group is its label with the seed, shard and hash taken out (``k=4-s2-…`` → ``k=4``,
``minilm-prose-shard3-…`` → ``minilm-prose``), so one line gives the mean of the cells that
one hint prices. Cells are read through tokengeo's bounded JSON reader; a file that is not a
stored cell is named and skipped.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from pathlib import Path

SEED_OR_SHARD = re.compile(r"-(s\d+|shard\d+)(?=-|$)")
HASH = re.compile(r"-[0-9a-f]{10}$")


def group_of(stem: str) -> str:
    """``k=4-s2-89e207f164`` → ``k=4``; ``minilm-prose-shard3-…`` → ``minilm-prose``."""
    return SEED_OR_SHARD.sub("", HASH.sub("", stem)) or stem


def cell_seconds(path: Path) -> float | None:
    from tokengeo.errors import ConfigError
    from tokengeo.experiments.cells import CELL_LIMIT, recorded_seconds
    from tokengeo.io import parse_json, read_small

    try:
        data = parse_json(read_small(path, CELL_LIMIT), repr(str(path)), dict,
                          limit=CELL_LIMIT, allow_nan=True)
    except ConfigError as e:
        print(f"skipped: {e}", file=sys.stderr)
        return None
    return recorded_seconds(data)


def means(cells: Path) -> dict[str, dict[str, dict[str, float]]]:
    """suite -> group -> {"cells", "mean_s", "min_s", "max_s", "core_s"}."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for suite in sorted(p for p in cells.iterdir() if p.is_dir() and not p.is_symlink()):
        groups: dict[str, list[float]] = {}
        for path in sorted(suite.glob("*.json")):
            seconds = cell_seconds(path)
            if seconds is not None:
                groups.setdefault(group_of(path.stem), []).append(seconds)
        out[suite.name] = {g: {"cells": len(v), "mean_s": round(statistics.fmean(v), 1),
                               "min_s": round(min(v), 1), "max_s": round(max(v), 1),
                               "core_s": round(sum(v), 1)}
                           for g, v in groups.items()}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("cells", type=Path, help="a run's cells folder (OUT/cells)")
    parser.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args(argv)
    if not args.cells.is_dir():
        print(f"{args.cells}: not a folder; pass a run's OUT/cells", file=sys.stderr)
        return 2
    table = means(args.cells)
    if args.json:
        print(json.dumps(table, indent=1))
        return 0
    for suite, groups in table.items():
        total = sum(g["core_s"] for g in groups.values())
        print(f"{suite}: {sum(g['cells'] for g in groups.values())} cells, "
              f"{total / 3600:.2f} core-h")
        for name, g in groups.items():
            print(f"  {name:40s} {g['cells']:3d} cells  mean {g['mean_s']:8.1f} s  "
                  f"[{g['min_s']:.1f}, {g['max_s']:.1f}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
