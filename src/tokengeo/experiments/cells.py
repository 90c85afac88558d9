"""Resumable cells: each unit of work (one training run, one simulation) is computed once.

A cell's result is a JSON object stored atomically at ``OUT/cells/<suite>/<key>.json``;
re-running ``tokengeo reproduce`` reads finished cells instead of recomputing them. The file
name carries a hash of the cell's arguments, so editing a suite's settings recomputes
exactly the cells whose work changed. A cell
whose source is missing (data, optional dependency) is recorded as not run, *not* cached,
so installing the source and re-running computes it.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokengeo.errors import DataNotFoundError, MissingDependencyError


@dataclass(frozen=True)
class Cell:
    suite: str
    key: str  # file-name safe, unique within the suite
    fn: Callable[..., dict]
    kwargs: dict[str, Any]
    label: str = ""
    threads: int = 1  # torch threads while it runs: fixed by the cell, not the scheduler
    cost: float = 1.0  # relative run time, a scheduling hint only (long cells start first)


@dataclass
class CellResult:
    key: str
    value: dict | None
    not_run: str | None = None
    cached: bool = False


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
            return json.loads(p.read_text())
        except json.JSONDecodeError:
            return None  # a torn file from a crash is recomputed

    def save(self, cell: Cell, value: dict) -> None:
        p = self.path(cell)
        p.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=p.parent, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            json.dump(value, f, indent=1)
        os.replace(tmp, p)

    def run(self, cell: Cell) -> CellResult:
        cached = self.load(cell)
        if cached is not None:
            return CellResult(cell.key, cached, cached=True)
        try:
            value = cell.fn(**cell.kwargs)
        except (DataNotFoundError, MissingDependencyError) as exc:
            return CellResult(cell.key, None, not_run=str(exc))
        self.save(cell, value)
        return CellResult(cell.key, value)
