"""Where reproduce cells run: in this process, in local worker processes, or on Ray.

Every executor runs the same function, :func:`execute_cell`, on each cell and hands the
outcome back to the driver, which alone writes the cell cache and the report. So a result
never depends on the executor or on the number of workers: a cell's seed lives in its
arguments and its thread count in the cell (``Cell.threads``), never in the scheduler.

* ``serial``  — one cell after another in this process (``--jobs 1``);
* ``process`` — ``--jobs N`` spawned worker processes (``concurrent.futures``), each cell
  with its own fixed thread count;
* ``ray``     — each cell a Ray task with ``num_cpus = Cell.threads`` (``--executor ray``,
  ``--ray-address ADDR``; without an address ``ray.init()`` starts a local cluster). Workers
  need no shared file system: files a cell writes into its ``figure_dir`` travel back with
  its result and the driver writes them.
"""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch

from tokengeo.errors import ConfigError, DataNotFoundError, MissingDependencyError
from tokengeo.experiments.cells import Cell

EXECUTORS = ("serial", "process", "ray")


@dataclass
class CellOutcome:
    """What running one cell produced: its value, or why it could not run."""

    value: dict | None
    not_run: str | None = None
    seconds: float = 0.0
    files: dict[str, bytes] = field(default_factory=dict)  # figure path -> bytes (Ray only)


def execute_cell(cell: Cell, collect_files: bool = False) -> CellOutcome:
    """Run ``cell`` with its own thread count; a missing source or package is ``not_run``.

    The caller's torch thread count is restored afterwards. With ``collect_files`` the files
    the cell wrote into its ``figure_dir`` argument are returned as bytes.
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(cell.threads)
    t0 = time.perf_counter()
    try:
        value = cell.fn(**cell.kwargs)
    except (DataNotFoundError, MissingDependencyError) as exc:
        return CellOutcome(None, not_run=str(exc), seconds=time.perf_counter() - t0)
    finally:
        torch.set_num_threads(threads)
    outcome = CellOutcome(value, seconds=time.perf_counter() - t0)
    if collect_files and cell.kwargs.get("figure_dir"):
        outcome.files = _files_under(Path(cell.kwargs["figure_dir"]), since=t0)
    return outcome


def _files_under(folder: Path, since: float) -> dict[str, bytes]:
    """Files under ``folder`` modified since the cell started (wall clock), by path."""
    start = time.time() - (time.perf_counter() - since)
    if not folder.is_dir():
        return {}
    return {str(p): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and p.stat().st_mtime >= start - 1.0}


Outcomes = Iterator[tuple[Cell, CellOutcome]]


@dataclass
class ExecutorConfig:
    """How to run cells: ``executor`` in EXECUTORS, ``jobs`` workers (0: one per core)."""

    executor: str = "process"
    jobs: int = 0
    ray_address: str | None = None

    def validate(self) -> None:
        if self.executor not in EXECUTORS:
            raise ConfigError(f"executor={self.executor!r}; choose one of {list(EXECUTORS)}")
        if isinstance(self.jobs, bool) or not isinstance(self.jobs, int) or self.jobs < 0:
            raise ConfigError(f"jobs={self.jobs!r} must be a whole number >= 1 "
                              "(or 0 for one worker per core)")
        if self.ray_address is not None and self.executor != "ray":
            raise ConfigError("--ray-address needs --executor ray")

    def workers(self) -> int:
        return self.jobs or os.cpu_count() or 1


def run_cells(cells: Sequence[Cell], cfg: ExecutorConfig) -> Outcomes:
    """Yield ``(cell, outcome)`` for every cell, in completion order.

    Workers take the most costly cells first (``Cell.cost``), which shortens the wall time
    of a sweep whose cells differ in size; the serial executor keeps the given order.
    """
    cfg.validate()
    if not cells:
        return iter(())
    if cfg.executor != "serial":
        cells = sorted(cells, key=lambda c: -c.cost)
    if cfg.executor == "ray":
        return _run_ray(cells, cfg)
    if cfg.executor == "serial" or cfg.workers() == 1 or len(cells) == 1:
        return ((cell, execute_cell(cell)) for cell in cells)
    return _run_processes(cells, min(cfg.workers(), len(cells)))


def _run_processes(cells: Sequence[Cell], workers: int) -> Outcomes:
    """Spawned workers (not forked: torch's thread pools do not survive a fork)."""
    ctx = multiprocessing.get_context("spawn")
    with cf.ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
        futures = {pool.submit(execute_cell, cell): cell for cell in cells}
        try:
            for fut in cf.as_completed(futures):
                yield futures[fut], fut.result()
        except BaseException:
            for fut in futures:
                fut.cancel()
            _terminate(pool)
            raise


def _terminate(pool: cf.ProcessPoolExecutor) -> None:
    """Stop running workers at once (Ctrl-C, a failing cell): their cells are not cached."""
    for proc in list(getattr(pool, "_processes", {}).values()):
        proc.terminate()
    pool.shutdown(wait=False, cancel_futures=True)


def _run_ray(cells: Sequence[Cell], cfg: ExecutorConfig) -> Outcomes:
    from tokengeo._deps import require

    ray = require("ray")
    started = not ray.is_initialized()
    if started:
        if cfg.ray_address:
            ray.init(address=cfg.ray_address, log_to_driver=False)
        else:
            # a local cluster sees the driver's modules (its sys.path), as spawned workers do
            path = os.pathsep.join(p for p in sys.path if p and os.path.isdir(p))
            ray.init(num_cpus=cfg.workers(), include_dashboard=False, log_to_driver=False,
                     runtime_env={"env_vars": {"PYTHONPATH": path}})
    remote = ray.remote(_ray_execute)
    refs = {remote.options(num_cpus=cell.threads).remote(cell): cell for cell in cells}
    try:
        pending = list(refs)
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            yield refs[done[0]], ray.get(done[0])
    except BaseException:
        for ref in refs:
            ray.cancel(ref, force=True)
        raise
    finally:
        if started:
            ray.shutdown()


def _ray_execute(cell: Cell) -> CellOutcome:
    return execute_cell(cell, collect_files=True)


def write_files(files: dict[str, bytes], writer: Callable[[Path, bytes], None]) -> None:
    """Write the files a remote cell produced, with the driver's atomic writer."""
    for path, data in files.items():
        p = Path(path)
        if p.exists() and p.read_bytes() == data:
            continue
        p.parent.mkdir(parents=True, exist_ok=True)
        writer(p, data)
