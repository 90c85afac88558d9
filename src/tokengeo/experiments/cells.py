"""Resumable cells: each unit of work (one training run, one simulation) is computed once.

A cell's result is a JSON object stored atomically at ``OUT/cells/<suite>/<key>.json``;
re-running ``tokengeo reproduce`` reads finished cells instead of recomputing them. The file
name carries a hash of the cell's arguments, so editing a suite's settings recomputes
exactly the cells whose work changed. A cell
whose source is missing (data, optional dependency) is recorded as not run, *not* cached,
so installing the source and re-running computes it. A cell whose numbers were computed
but whose figures failed (:func:`draw_figures`) keeps its numbers in the report; it is
stored, and recomputed on the next run so that the figures get drawn.

Nothing on disk is trusted: a cell file that cannot be read, is not UTF-8 JSON, is not the
envelope ``{"format": CELL_FORMAT, "cell": "<suite>/<key>", "value": {...}}`` or whose value
lacks a field the suite reads (``Cell.fields``) is recomputed, with one log line saying why.
Paths under the output folder are hashed and stored relative to it (``$OUT/...``), so a
moved or copied output folder still finds its cells and their figures.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokengeo.errors import ConfigError
from tokengeo.io import parse_json, read_small, write_json

CELL_LIMIT = 256 << 20  # bytes; the largest cell (a flow's G² series) is far below


@dataclass(frozen=True)
class Cell:
    suite: str
    key: str  # file-name safe, unique within the suite
    fn: Callable[..., dict]
    kwargs: dict[str, Any]
    label: str = ""
    threads: int = 1  # torch threads while it runs: fixed by the cell, not the scheduler
    cost: float = 1.0  # relative run time, a scheduling hint only (long cells start first)
    fields: tuple[str, ...] = ()  # value fields the suite reads ("a.b": nested); checked on load
    on_device: bool = False  # honours kwargs["config"]["device"]: may run on a GPU
    placement: str = ""  # device kind and precision ("cuda-bf16"); "" on the CPU (placement.py)
    gpu_share: float | None = None  # of a GPU it asks Ray for on CUDA (a hint, like cost)


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


OUT_PREFIX = "$OUT"  # stands for the output folder in cache keys and stored figure paths
CELL_FORMAT = "tokengeo-cell/1"  # marker of a cell file's envelope


def relative_to_out(obj: Any, out: Path | None) -> Any:
    """``obj`` with every absolute path string under ``out`` written ``$OUT/<relative>``
    (recursively through dicts, lists and tuples); other values unchanged."""
    if isinstance(obj, dict):
        return {k: relative_to_out(v, out) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [relative_to_out(v, out) for v in obj]
    if out is None or not isinstance(obj, str) or not os.path.isabs(obj):
        return obj
    rel = os.path.relpath(os.path.normpath(obj), out)
    if rel == os.curdir:
        return OUT_PREFIX
    if rel == os.pardir or rel.startswith(os.pardir + os.sep):
        return obj
    return f"{OUT_PREFIX}/{Path(rel).as_posix()}"


def under_out(path: str, out: Path) -> str:
    """Inverse of :func:`relative_to_out` for one path string."""
    if path == OUT_PREFIX or path.startswith(OUT_PREFIX + "/"):
        return str(out.joinpath(*path[len(OUT_PREFIX):].split("/")[1:]))
    return path


def arguments_hash(cell: Cell, out: Path | None = None) -> str:
    """Short digest of what the cell computes: its function and arguments, paths under the
    output folder ``out`` taken relative to it (a moved folder keeps its hashes), and its
    placement (device kind and precision) where it has one."""
    what = {"fn": f"{cell.fn.__module__}.{cell.fn.__qualname__}",
            "kwargs": relative_to_out(cell.kwargs, out)}
    if cell.placement:  # a GPU cell never shares a key with a CPU one (none on the CPU)
        what["placement"] = cell.placement
    text = json.dumps(what, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:10]


def _missing_field(value: dict, fields: tuple[str, ...]) -> str | None:
    """The first dotted field of ``fields`` absent from ``value``, or None."""
    for name in fields:
        node: Any = value
        for part in name.split("."):
            if not isinstance(node, dict) or part not in node:
                return name
            node = node[part]
    return None


def check_envelope(data: Any, cell: Cell) -> str | None:
    """Why ``data`` (a parsed cell file) is not a usable result of ``cell``, or None."""
    if not isinstance(data, dict) or data.get("format") != CELL_FORMAT:
        return f"is not a tokengeo cell (no \"format\": \"{CELL_FORMAT}\" object)"
    if data.get("cell") != f"{cell.suite}/{cell.key}":
        return f"belongs to cell {data.get('cell')!r}"
    value = data.get("value")
    if not isinstance(value, dict):
        return "holds no result object"
    figures = value.get("figures", [])
    if not isinstance(figures, list) or not all(isinstance(f, str) for f in figures):
        return "has a 'figures' entry that is not a list of paths"
    missing = _missing_field(value, cell.fields)
    if missing is not None:
        return f"lacks the field {missing!r}"
    return None


def recorded_seconds(envelope: dict) -> float | None:
    """The wall seconds a stored cell file records (``seconds``), or None when absent or not a
    finite number >= 0."""
    seconds = envelope.get("seconds")
    ok = isinstance(seconds, int | float) and not isinstance(seconds, bool)
    return float(seconds) if ok and 0 <= seconds < float("inf") else None


class CellStore:
    def __init__(self, out: Path) -> None:
        self.out = Path(out).resolve()
        self.root = self.out / "cells"

    def path(self, cell: Cell) -> Path:
        where = f"@{cell.placement}" if cell.placement else ""
        return self.root / cell.suite / f"{cell.key}{where}-{arguments_hash(cell, self.out)}.json"

    def load(self, cell: Cell, log: Callable[[str], None] | None = None) -> dict | None:
        """The cached value of ``cell``, or None (recompute it); ``log`` gets one line saying
        why a cell file that exists was not used."""
        p = self.path(cell)
        if not p.exists() and not p.is_symlink():
            return None
        value, why = self._read(p, cell)
        if why is not None and log is not None:
            log(f"[{cell.suite}] {cell.label or cell.key}: cached cell {p.name} {why}; "
                "recomputing")
        return value

    def _read(self, p: Path, cell: Cell) -> tuple[dict | None, str | None]:
        if p.is_dir():
            return None, "is a folder, not a file (remove it to cache this cell)"
        try:  # never blocks on a FIFO, never reads more than a cell can hold
            data = parse_json(read_small(p, CELL_LIMIT), "it", limit=CELL_LIMIT,
                              allow_nan=True)
        except ConfigError as exc:
            return None, f"cannot be read ({exc})"
        except OSError as exc:
            return None, f"cannot be read ({exc.strerror or type(exc).__name__})"
        except UnicodeDecodeError:
            return None, "is not UTF-8 text"
        except ValueError:  # torn by a crash, or edited
            return None, "is not valid JSON"
        why = check_envelope(data, cell)
        if why is not None:
            return None, why
        value = data["value"]
        if FIGURE_ERROR in value:
            return None, "has no figures (they failed to draw)"
        if "figures" in value:
            value["figures"] = [under_out(f, self.out) for f in value["figures"]]
        return value, None

    def save(self, cell: Cell, value: dict, seconds: float | None = None) -> None:
        """Store ``value`` in its envelope (figure paths under the output folder relative to
        it), with the wall ``seconds`` it took if known (``reproduce --dry-run`` reads them);
        a folder in the cell file's place is left alone and the cell is not cached."""
        if self.path(cell).is_dir():
            return
        if "figures" in value:
            value = {**value, "figures": relative_to_out(list(value["figures"]), self.out)}
        envelope = {"format": CELL_FORMAT, "cell": f"{cell.suite}/{cell.key}", "value": value}
        if seconds is not None:
            envelope["seconds"] = round(float(seconds), 3)
        write_json(self.path(cell), envelope, indent=1, allow_nan=True)

    def _envelope(self, cell: Cell) -> dict | None:
        p = self.path(cell)
        if not p.is_file():
            return None
        try:
            data = parse_json(read_small(p, CELL_LIMIT), "it", limit=CELL_LIMIT,
                              allow_nan=True)
        except (ConfigError, OSError, ValueError):  # UnicodeDecodeError is a ValueError
            return None
        return data if check_envelope(data, cell) is None else None

    def measured_seconds(self, cell: Cell) -> float | None:
        """The wall seconds recorded with the cell's cached result, or None (no usable cached
        result, or none recorded)."""
        data = self._envelope(cell)
        return recorded_seconds(data) if data is not None else None

    def timing(self, cell: Cell) -> tuple[float, float] | None:
        """(wall seconds, finish time as a POSIX timestamp) of a cached cell: the seconds
        recorded with it and its file's modification time (it is written once, when the cell
        finishes); None when either is missing."""
        seconds = self.measured_seconds(cell)
        if seconds is None:
            return None
        return seconds, self.path(cell).stat().st_mtime
