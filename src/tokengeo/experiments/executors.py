"""Where reproduce cells run: in this process, in local worker processes, or on Ray.

Every executor runs the same function, :func:`execute_cell`, on each cell and hands the
outcome back to the driver, which alone writes the cell cache and the report. So a result
never depends on the executor or on the number of workers: a cell's seed lives in its
arguments and its thread count in the cell (``Cell.threads``), never in the scheduler.

* ``serial``  — one cell after another in this process (``--jobs 1``);
* ``process`` — ``--jobs N`` spawned worker processes (``concurrent.futures``), each cell
  with its own fixed thread count; on CUDA worker i sees one GPU, the i-th of the visible
  ones round-robin (``CUDA_VISIBLE_DEVICES``), so several cells may share a GPU;
* ``ray``     — each cell a Ray task with ``num_cpus = Cell.threads`` and, on CUDA, its GPU
  share ``num_gpus`` (:func:`ray_resources`; ``--executor ray``,
  ``--ray-address ADDR``; without an address ``ray.init()`` starts a local cluster). Workers
  need no shared file system: files a cell writes into its ``figure_dir`` travel back with
  its result and the driver writes them.

No worker outlives its driver. Every local worker starts with :func:`_guard_worker`: it
ignores SIGINT (Ctrl-C reaches the whole terminal process group; the driver alone decides,
and stops its workers), asks Linux to SIGKILL it when the driver dies
(``prctl(PR_SET_PDEATHSIG)``), and runs a watchdog thread that ends it as soon as its parent
is no longer the driver (it was re-parented: the driver died, also by SIGKILL). The watchdog
is what holds on macOS, which has no parent-death signal. The multiprocessing resource
tracker exits when the last holder of its pipe (driver and workers) is gone. A Ray address
that answers no connection within ``connect_timeout`` seconds (``--connect-timeout``) is
refused with one line before ``ray.init``, whose own reconnect loop is bounded by the same
time; the driver's SIGTERM handler interrupts the wait.
"""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch

from tokengeo.errors import ConfigError, DataNotFoundError, MissingDependencyError
from tokengeo.experiments.cells import Cell
from tokengeo.lifetime import die_with_parent

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
    connect_timeout: float = 30.0  # seconds a Ray connect may take
    gpus: tuple[str, ...] = ()  # GPUs local workers share round-robin (placement.visible_gpus)
    gpu_share: float | None = None  # --gpus-per-cell: GPUs a CUDA cell asks Ray for

    def validate(self) -> None:
        if self.executor not in EXECUTORS:
            raise ConfigError(f"executor={self.executor!r}; choose one of {list(EXECUTORS)}")
        if isinstance(self.jobs, bool) or not isinstance(self.jobs, int) or self.jobs < 0:
            raise ConfigError(f"jobs={self.jobs!r} must be a whole number >= 1 "
                              "(or 0 for one worker per core)")
        if self.ray_address is not None and self.executor != "ray":
            raise ConfigError("--ray-address needs --executor ray")
        if self.ray_address is not None:
            split_address(self.ray_address, "--ray-address")
        t = self.connect_timeout
        if isinstance(t, bool) or not isinstance(t, int | float) or not 0 < t <= 86400:
            raise ConfigError(f"--connect-timeout {t!r} must be a number of seconds in "
                              "(0, 86400]")

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
    return _run_processes(cells, min(cfg.workers(), len(cells)), cfg.gpus)


WATCH_SECONDS = 0.5  # how often a worker's watchdog looks for its driver


def _run_processes(cells: Sequence[Cell], workers: int, gpus: Sequence[str] = ()) -> Outcomes:
    """Spawned workers (not forked: torch's thread pools do not survive a fork); with
    ``gpus``, worker i sees only GPU ``gpus[i % len(gpus)]`` (round-robin)."""
    ctx = multiprocessing.get_context("spawn")
    counter = ctx.Value("i", 0)  # the order in which workers start: their GPU
    pool = cf.ProcessPoolExecutor(max_workers=workers, mp_context=ctx,
                                  initializer=_start_worker,
                                  initargs=(os.getpid(), tuple(gpus), counter))
    try:
        futures = {pool.submit(execute_cell, cell): cell for cell in cells}
        for fut in cf.as_completed(futures):
            yield futures[fut], fut.result()
    except BaseException:
        _terminate(pool)
        raise
    pool.shutdown(wait=True)


def _terminate(pool: cf.ProcessPoolExecutor) -> None:
    """Stop running workers at once (Ctrl-C, a failing cell): their cells are not cached.

    The workers are killed first; the pool's own thread then finds them gone and fails the
    remaining futures itself (cancelling them here as well races with it:
    ``InvalidStateError``), and is joined so that nothing prints after the driver's line."""
    procs = list((getattr(pool, "_processes", None) or {}).values())
    for proc in procs:
        if proc.is_alive():
            proc.kill()
    for proc in procs:
        proc.join(timeout=5)
    try:
        pool.shutdown(wait=True)
    except Exception:  # a broken pool: its futures already carry the error
        pass


def _start_worker(driver: int, gpus: tuple[str, ...], counter) -> None:
    """Guard the worker (:func:`_guard_worker`) and give it its GPU before CUDA starts."""
    _guard_worker(driver)
    if gpus:
        with counter.get_lock():
            index = counter.value
            counter.value += 1
        os.environ.update(worker_gpu_env(index, gpus))


def worker_gpu_env(index: int, gpus: Sequence[str]) -> dict[str, str]:
    """The environment of local worker ``index``: one GPU of ``gpus``, round-robin, and the
    node's list for a DDP cell's torchrun (:mod:`tokengeo.experiments.training`)."""
    from tokengeo.experiments.training import NODE_GPUS

    return {"CUDA_VISIBLE_DEVICES": gpus[index % len(gpus)], NODE_GPUS: ",".join(gpus)}


def _guard_worker(driver: int) -> None:
    """Make this worker die with ``driver`` (see the module docstring)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with_parent()
    if os.getppid() != driver:  # the driver died before the guard was set
        os._exit(1)
    threading.Thread(target=_watch_driver, args=(driver,), daemon=True,
                     name="tokengeo-driver-watchdog").start()


def _watch_driver(driver: int) -> None:
    """End this process once its parent is no longer ``driver`` (re-parented on its death)."""
    while os.getppid() == driver:
        time.sleep(WATCH_SECONDS)
    os._exit(1)


def _run_ray(cells: Sequence[Cell], cfg: ExecutorConfig) -> Outcomes:
    from tokengeo._deps import require

    ray = require("ray")
    started = not ray.is_initialized()
    if started:
        if cfg.ray_address:
            kwargs = {"address": cfg.ray_address, "log_to_driver": False}
        else:
            # a local cluster sees the driver's modules (its sys.path), as spawned workers do
            path = os.pathsep.join(p for p in sys.path if p and os.path.isdir(p))
            kwargs = {"num_cpus": cfg.workers(), "include_dashboard": False,
                      "log_to_driver": False, "runtime_env": {"env_vars": {"PYTHONPATH": path}}}
        if cfg.ray_address:
            probe_address(cfg.ray_address, cfg.connect_timeout, "--ray-address")
            # Ray's own reconnect loop gives up after this long (default: a minute, or more)
            os.environ.setdefault("RAY_gcs_rpc_server_reconnect_timeout_s",
                                  str(max(1, round(cfg.connect_timeout))))
        try:
            ray.init(**kwargs)
        except (ConnectionError, TimeoutError, RuntimeError, ValueError) as exc:
            lines = [ln for ln in str(exc).splitlines() if ln.strip()]
            raise ConfigError(f"Ray did not start ({type(exc).__name__}: "
                              f"{(lines or [''])[0][:160]}); check --ray-address") from None
    if any(c.placement.startswith("cuda") for c in cells):  # else it would wait forever
        from tokengeo.experiments.placement import check_cluster_gpus

        check_cluster_gpus(cells, [float(n.get("Resources", {}).get("GPU", 0.0))
                                   for n in ray.nodes() if n.get("Alive")])
    remote = ray.remote(_ray_execute)
    refs = {remote.options(**ray_resources(cell, cfg.gpu_share)).remote(cell): cell
            for cell in cells}
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


def ray_resources(cell: Cell, gpu_share: float | None = None) -> dict[str, float]:
    """What one cell asks Ray for: its threads as CPUs and, placed on CUDA, its share of a
    GPU: ``gpu_share`` (``--gpus-per-cell``) when given, else the cell's own (its suite's
    ``gpus_per_cell``), else 1; a DDP cell asks for its ``processes`` whole GPUs (and a CPU
    per process)."""
    from tokengeo.experiments.placement import cell_gpus

    if not cell.placement.startswith("cuda"):
        return {"num_cpus": cell.threads}
    n = cell_gpus(cell)
    if n > 1:
        return {"num_cpus": max(cell.threads, n), "num_gpus": n}
    share = gpu_share if gpu_share is not None else cell.gpu_share
    return {"num_cpus": cell.threads, "num_gpus": 1.0 if share is None else share}


def split_address(address: str, flag: str) -> tuple[str, int]:
    """``(host, port)`` of ``host:port`` or ``ray://host:port`` (IPv6 hosts in brackets),
    or of the cluster ``auto`` finds (:func:`local_cluster`); anything else (no port, a
    port outside 1..65535) is a ConfigError."""
    if address == "auto":
        return split_address(local_cluster(flag), flag)
    rest = address.split("://", 1)[1] if address.startswith("ray://") else address
    host, sep, port = rest.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or "://" in rest or "/" in rest:
        raise ConfigError(f"{flag} {address!r} must be the head node's host:port (or "
                          "ray://host:port), e.g. 10.0.0.5:6379; `ray status` on the head "
                          "shows it (without the flag a local cluster starts)")
    if not 1 <= int(port) <= 65535:
        raise ConfigError(f"{flag} {address!r}: port {int(port)} is outside 1..65535")
    return host, int(port)


def local_cluster(flag: str) -> str:
    """The address ``--ray-address auto`` means, found as Ray finds it: ``$RAY_ADDRESS``,
    else the cluster ``ray start --head`` recorded on this machine
    (``ray_current_cluster`` in ``$RAY_TMPDIR/ray``, ``$TMPDIR/ray`` or ``/tmp/ray``); none
    is a ConfigError."""
    env = os.environ.get("RAY_ADDRESS", "")
    if env and env != "auto":
        return env
    tmp = os.environ.get("RAY_TMPDIR") or os.environ.get("TMPDIR") or "/tmp"
    record = Path(tmp) / "ray" / "ray_current_cluster"
    try:
        from tokengeo.io import read_small

        found = read_small(record, 1 << 12).decode("utf-8").strip()
    except (OSError, ConfigError, UnicodeDecodeError):
        found = ""
    if not found:
        raise ConfigError(f"{flag} auto: no Ray cluster runs on this machine ({record} is "
                          "missing); start one with `ray start --head`, or give the head "
                          "node's host:port")
    return found


# the HTTP/2 client preface and an empty SETTINGS frame: a Ray head (gRPC, HTTP/2) answers
# with a SETTINGS frame of its own; an HTTP/1 server, or anything else, does not
_H2_HELLO = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
_H2_SETTINGS = 0x04


def probe_address(address: str, seconds: float, flag: str) -> None:
    """Refuse, within ``seconds``, an address (:func:`split_address`) that accepts no TCP
    connection, or that answers but not as a gRPC (HTTP/2) server such as a Ray head: an HTTP
    server there would make ``ray.init`` wait past ``--connect-timeout``."""
    import socket

    host, port = split_address(address, flag)
    fix = "check the address, or raise --connect-timeout"
    try:
        with socket.create_connection((host, port), timeout=seconds) as conn:
            conn.settimeout(seconds)
            conn.sendall(_H2_HELLO)
            head = b""
            while len(head) < 9:
                more = conn.recv(9 - len(head))
                if not more:
                    break
                head += more
    except OSError as exc:
        why = "timed out" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc))
        raise ConfigError(f"{flag} {address!r}: no Ray cluster answers there ({why} after at "
                          f"most {seconds:g} s); {fix}") from None
    if len(head) < 9 or head[3] != _H2_SETTINGS:
        shown = head[:12].decode("latin-1").splitlines()[0] if head.strip() else "nothing"
        raise ConfigError(f"{flag} {address!r} answers, but not as a Ray cluster (it said "
                          f"{shown!r}, not gRPC); give the head node's GCS port (6379 by "
                          "default)")


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
