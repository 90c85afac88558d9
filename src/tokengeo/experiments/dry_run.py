"""``tokengeo reproduce --dry-run``: a mode's cells and what they would cost, run nothing.

A cell's cost is in core-seconds of this machine: the wall seconds recorded with its cached
result times its threads where the output folder's cache has one (measured), else its
``cost`` hint (each suite's ``cell_cost`` settings: estimated 1-thread CPU seconds, sized on
a 2-core laptop). Cached cells cost nothing to run again; the table gives both what the
whole mode costs and what is left to run.

``--gpu``: the ``[gpu]`` tables' hints are GPU-seconds instead, the seconds a cell holds one
H100 when four cells share it (``--jobs 4``); they are estimates from model sizes, not
timings, until a cached cell records its own. The table is then in GPU-minutes, and the wall
time is at least the GPU-minutes over the GPUs visible here (one when there is none).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from tokengeo.experiments.cells import Cell, CellStore
from tokengeo.experiments.report import text_table
from tokengeo.experiments.user_data import Unresolved


@dataclass
class SuiteCost:
    """One suite's cells and their estimated core-seconds."""

    suite: str
    cells: int = 0
    cached: int = 0
    measured: int = 0  # cells whose cost is a recorded time, not a hint
    total_s: float = 0.0  # core-seconds of every cell
    to_run_s: float = 0.0  # core-seconds of the cells not cached
    skipped: str | None = None  # the settings' skip reason
    unresolved: list[Unresolved] = field(default_factory=list)

    def add(self, cell: Cell, store: CellStore) -> None:
        seconds = store.measured_seconds(cell)
        cost = cell.cost if seconds is None else seconds * cell.threads
        cached = store.load(cell) is not None
        self.cells += 1
        self.cached += cached
        self.measured += seconds is not None
        self.total_s += cost
        self.to_run_s += 0.0 if cached else cost


def estimate(plans: Sequence, store: CellStore) -> list[SuiteCost]:
    """One :class:`SuiteCost` per planned suite (``SuitePlan``: name, cells, ctx)."""
    costs = []
    for plan in plans:
        cost = SuiteCost(plan.name, skipped=plan.ctx.skipped,
                         unresolved=list(getattr(plan, "unresolved", [])))
        for cell in plan.cells:
            cost.add(cell, store)
        costs.append(cost)
    return costs


def _widths(header: list[str], rows: list[list[str]]) -> list[int]:
    """Each column as wide as its longest entry: no suite name or note is cut."""
    return [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]


def _hours(seconds: float, per: float = 3600) -> str:
    return f"{seconds / per:,.2f}"


def render(mode: str, costs: list[SuiteCost], jobs: int, gpus: int = 0) -> str:
    """The dry run's table and notes, as printed (``gpus``: GPUs visible here)."""
    per = 60 if mode == "gpu" else 3600  # GPU-minutes, core-hours
    rows = []
    for c in costs:
        basis = "skipped: " + c.skipped if c.skipped else (
            "hints" if c.measured == 0 else f"{c.measured} measured, "
            f"{c.cells - c.measured} hints" if c.measured < c.cells else "measured")
        rows.append([c.suite, str(c.cells), str(c.cached), _hours(c.total_s, per),
                     _hours(c.to_run_s, per), basis])
    total = sum(c.total_s for c in costs)
    left = sum(c.to_run_s for c in costs)
    n = sum(c.cells for c in costs)
    rows.append(["total", str(n), str(sum(c.cached for c in costs)), _hours(total, per),
                 _hours(left, per), ""])
    unit = "GPU-min" if mode == "gpu" else "core-h"
    header = ["suite", "cells", "cached", f"{unit} (all)", f"{unit} (to run)", "cost from"]
    lines = [f"Dry run of `tokengeo reproduce --{mode}`: nothing is run or written.",
             "\n".join(line.rstrip() for line in
                       text_table(header, rows, _widths(header, rows)).splitlines())]
    if mode == "gpu":
        g = max(gpus, 1)
        lines.append(
            f"On {g} GPU(s): at least {left / 60 / g:,.1f} min of wall time (GPU-minutes / "
            "GPUs, with --jobs 4 per GPU; cells on the CPU, uneven "
            "lengths and start-up add to it). GPU costs are ESTIMATES from each [gpu] "
            "table's cell_cost hints (seconds of one H100 shared by four cells, reckoned "
            "from model sizes, not measured), replaced by the measured time where the cache "
            "holds a cell.")
    else:
        lines.append(
            f"With --jobs {jobs}: at least {left / 3600 / jobs:,.2f} h of wall time here "
            "(core-hours / jobs; cells of more than one thread and uneven lengths add to "
            "it). Costs are this machine's core-hours, estimated from each suite's cell_cost "
            "hints (1-thread CPU seconds on a 2-core laptop) or measured where the cache "
            "holds a cell.")
    for c in costs:
        for u in c.unresolved:
            lines.append(f"needs a path: suite {u.suite!r} {u.key} = {u.value!r}: give "
                         f"{u.fix()}")
    return "\n".join(lines)


def dry_run_report(mode: str, plans: Sequence, store: CellStore, jobs: int,
                   out: Callable[[str], None] = print, gpus: int = 0) -> list[SuiteCost]:
    costs = estimate(plans, store)
    out(render(mode, costs, jobs, gpus))
    return costs
