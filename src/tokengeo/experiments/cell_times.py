"""Where a run's time went: per suite, its cells' recorded wall seconds, for the report.

Every computed cell is stored with the wall seconds it took (:meth:`CellStore.save`); its
file is written once, when it finishes. :func:`cell_times` reads them back after a run, so a
report written from a resumed or fully cached output folder still says what its cells cost
when they were computed: per suite the cells, their core-hours (seconds × the cell's torch
threads), the longest cell, and the span from the first cell's start to the last one's
finish (UTC). ``report.json`` keeps it as ``cells``; the ``cells`` doc block renders it.
"""

from __future__ import annotations

from datetime import UTC, datetime

from tokengeo.experiments.cells import Cell, CellStore


def _utc(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def summarise_timings(cells: list[Cell], timings: list[tuple[float, float] | None]) -> dict:
    """``{"cells", "timed", "core_hours", "longest_seconds", "first_start", "last_finish"}``
    of the cells whose timing is known (``timed`` of ``cells``); times as UTC ISO strings."""
    known = [(c, t) for c, t in zip(cells, timings, strict=True) if t is not None]
    if not known:
        return {"cells": len(cells), "timed": 0, "core_hours": 0.0, "longest_seconds": None,
                "first_start": None, "last_finish": None}
    return {
        "cells": len(cells), "timed": len(known),
        "core_hours": round(sum(s * max(1, c.threads) for c, (s, _) in known) / 3600, 4),
        "longest_seconds": round(max(s for _, (s, _) in known), 1),
        "first_start": _utc(min(end - s for _, (s, end) in known)),
        "last_finish": _utc(max(end for _, (_, end) in known)),
    }


def cell_times(cells_by_suite: dict[str, list[Cell]], store: CellStore) -> dict:
    """Per suite and in all (``"all"``), :func:`summarise_timings` of its stored cells (each
    cell's file is read once)."""
    timings = {suite: [store.timing(c) for c in cells]
               for suite, cells in cells_by_suite.items()}
    out = {suite: summarise_timings(cells, timings[suite])
           for suite, cells in cells_by_suite.items()}
    out["all"] = summarise_timings([c for cells in cells_by_suite.values() for c in cells],
                                   [t for suite in cells_by_suite for t in timings[suite]])
    return out
