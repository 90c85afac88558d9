"""Resumable cells: each unit of work (one training run, one simulation) is computed once.

A cell's result is a JSON object stored atomically at ``OUT/cells/<suite>/<key>.json``;
re-running ``tokengeo reproduce`` reads finished cells instead of recomputing them. The file
name carries a hash of the cell's arguments, so editing a suite's settings recomputes
exactly the cells whose work changed. A cell
whose source is missing (data, optional dependency) is recorded as not run, *not* cached,
so installing the source and re-running computes it. A cell whose numbers were computed
but whose figures failed (:func:`draw_figures`) keeps its numbers in the report; it is
stored, and recomputed on the next run so that the figures get drawn.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokengeo.io import write_json


@dataclass(frozen=True)
class Cell:
    suite: str
    key: str  # file-name safe, unique within the suite
    fn: Callable[..., dict]
    kwargs: dict[str, Any]
    label: str = ""
    threads: int = 1  # torch threads while it runs: fixed by the cell, not the scheduler
    cost: float = 1.0  # relative run time, a scheduling hint only (long cells start first)


FIGURE_ERROR = "figure_error"  # key of a cell value whose figures were not drawn


@dataclass
class CellResult:
    key: str
    value: dict | None
    not_run: str | None = None
    cached: bool = False

    @property
    def figure_error(self) -> str | None:
        return None if self.value is None else self.value.get(FIGURE_ERROR)


def draw_figures(value: dict, make: Callable[[], list]) -> dict:
    """``value["figures"]`` = the paths ``make()`` wrote. If drawing fails (matplotlib
    missing, a plotting error) the computed numbers are kept: ``figures`` is empty and
    ``value["figure_error"]`` says why. Returns ``value``."""
    from tokengeo.experiments.report import figure_error

    try:
        value["figures"] = [str(p) for p in make()]
    except Exception as exc:  # a figure never costs a cell its numbers
        value["figures"], value[FIGURE_ERROR] = [], figure_error(exc)
    return value


def figure_notes(results: dict[str, CellResult]) -> list[str]:
    """One report note per cell whose figures were not drawn."""
    return [f"Figures of {key} not drawn: {r.figure_error}"
            for key, r in results.items() if r.figure_error]


def arguments_hash(cell: Cell) -> str:
    """Short digest of what the cell computes: its function and arguments."""
    text = json.dumps({"fn": f"{cell.fn.__module__}.{cell.fn.__qualname__}",
                       "kwargs": cell.kwargs}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:10]


class CellStore:
    def __init__(self, out: Path) -> None:
        self.root = Path(out) / "cells"

    def path(self, cell: Cell) -> Path:
        return self.root / cell.suite / f"{cell.key}-{arguments_hash(cell)}.json"

    def load(self, cell: Cell) -> dict | None:
        p = self.path(cell)
        if not p.exists():
            return None
        try:
            value = json.loads(p.read_text())
        except json.JSONDecodeError:
            return None  # a torn file from a crash is recomputed
        return None if FIGURE_ERROR in value else value  # recompute to draw its figures

    def save(self, cell: Cell, value: dict) -> None:
        write_json(self.path(cell), value, indent=1, allow_nan=True)
