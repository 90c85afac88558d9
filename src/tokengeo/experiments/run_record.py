"""What a ``reproduce`` run cost, measured by the run itself: wall time and peak memory.

Each call of ``reproduce`` on an output folder is one *segment*: a run stopped (Ctrl-C, a
lost session) and resumed with the same command is several. Every segment that had cells
to compute is written to ``OUT/run.json`` after each cell it stores and when it ends,
interrupted or not (killed outright: up to its last stored cell), so the report's
top-level ``run`` object holds the sum of the segments' wall seconds and the largest of
their peaks (:func:`run_object`). A ``--rejudge`` computes nothing and adds no segment.

Peak memory is the largest sum of the resident sets of the driver and every process under
it (the workers), sampled every :data:`SAMPLE_SECONDS` from ``/proc``; where there is no
``/proc`` it is the largest single process's ``ru_maxrss`` (a lower bound), and the segment's
``memory_method`` says which.
"""

from __future__ import annotations

import os
import platform
import resource
import sys
import threading
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from tokengeo.errors import ConfigError

RUN_FILE = "run.json"
SAMPLE_SECONDS = 0.5
MAX_SEGMENTS = 1000  # run.json is read back: bounded
TREE = "sum of the resident sets of the driver and its workers, sampled every 0.5 s"
LARGEST = "the largest single process's ru_maxrss (no /proc here: a lower bound)"


@dataclass
class Segment:
    """One call of ``reproduce`` on the folder: when, how long, its peak, what it ran on."""

    mode: str
    seed: int  # --seed: the shift of every seed (0: the published seeds)
    started: str  # UTC, ISO 8601 to the second
    wall_seconds: float
    peak_memory_bytes: int
    memory_method: str
    cells_to_compute: int  # not stored when it began
    cells_computed: int
    finished: bool  # false: interrupted (Ctrl-C, a failing cell); its time still counts
    commit: str | None
    cpu: str
    cores: int
    load_1min_at_start: float | None


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else what :mod:`platform` says."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()[:200]
    except OSError:
        pass
    return (platform.processor() or platform.machine() or "unknown")[:200]


def _rss_by_pid() -> dict[int, tuple[int, int]]:
    """pid -> (parent pid, resident bytes) of every process readable in ``/proc``."""
    page = os.sysconf("SC_PAGE_SIZE")
    out = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read().decode("ascii", "replace")
        except OSError:  # the process ended between listing and reading
            continue
        fields = stat[stat.rfind(")") + 2:].split()  # after "pid (comm) "
        if len(fields) > 21:
            out[int(name)] = (int(fields[1]), int(fields[21]) * page)  # ppid, rss pages
    return out


def tree_rss(root: int) -> int:
    """Resident bytes of process ``root`` and every process under it (Linux ``/proc``)."""
    table = _rss_by_pid()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    total, stack = 0, [root]
    while stack:
        pid = stack.pop()
        total += table.get(pid, (0, 0))[1]
        stack.extend(children.get(pid, []))
    return total


def _max_rss_bytes() -> int:
    """The largest ``ru_maxrss`` of this process and its waited-for children, in bytes."""
    scale = 1 if sys.platform == "darwin" else 1024  # macOS reports bytes, Linux KiB
    return scale * max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                       resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)


class PeakMemory:
    """A daemon thread that keeps the largest :func:`tree_rss` of this process seen."""

    def __init__(self, interval: float = SAMPLE_SECONDS):
        self.interval = interval
        self.tree = os.path.isdir("/proc/self")
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="tokengeo-peak-memory",
                                        daemon=True)

    def _sample(self) -> None:
        while not self._stop.is_set():
            try:
                self.peak = max(self.peak, tree_rss(os.getpid()))
            except (OSError, ValueError):  # /proc went away: the lower bound remains
                self.tree = False
                return
            self._stop.wait(self.interval)

    def __enter__(self) -> PeakMemory:
        if self.tree:
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def result(self) -> tuple[int, str]:
        """(peak bytes, how it was measured): never below the largest process's own peak."""
        floor = _max_rss_bytes()
        if self.tree:
            return max(self.peak, floor), TREE
        return floor, LARGEST


class RunMeter:
    """Times one segment and samples its memory; :meth:`segment` once it ends."""

    def __init__(self, mode: str, seed: int, commit: str | None):
        self.mode, self.seed, self.commit = mode, seed, commit
        self.cells_to_compute = self.cells_computed = 0
        self.finished = False
        self.recorded = False  # its final state written to run.json
        self.out: Path | None = None  # the folder whose run.json records it
        self._prior: list[Segment] = []
        self._memory = PeakMemory()

    def __enter__(self) -> RunMeter:
        self._wall = None
        self._t0 = time.perf_counter()
        self._started = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        try:
            self._load = round(os.getloadavg()[0], 2)
        except OSError:
            self._load = None
        self._memory.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.end()

    def end(self) -> None:
        """Stop the clock and the sampler (the first call only: the segment may end before
        the ``with`` block does)."""
        if getattr(self, "_wall", None) is None:
            self._memory.__exit__(None, None, None)
            self._wall = time.perf_counter() - self._t0

    def attach(self, out: Path) -> None:
        """Record into ``OUT/run.json`` (read now: the earlier segments are kept)."""
        self.out, self._prior = Path(out), read_segments(out)

    def checkpoint(self) -> None:
        """Write run.json with this segment as it stands (after each stored cell), so a
        segment killed outright (SIGKILL, a lost machine) still counts up to its last cell."""
        if self.out is not None and self.cells_to_compute:
            write_segments(self.out, [*self._prior, self.segment()])

    def segment(self) -> Segment:
        peak, method = self._memory.result()
        wall = time.perf_counter() - self._t0 if self._wall is None else self._wall
        return Segment(self.mode, self.seed, self._started, round(wall, 1), int(peak),
                       method, self.cells_to_compute, self.cells_computed, self.finished,
                       self.commit, cpu_model(), os.cpu_count() or 1, self._load)


def _check_segment(raw, where: str) -> Segment:
    fields = Segment.__dataclass_fields__
    if not isinstance(raw, dict) or set(raw) != set(fields):
        raise ConfigError(f"{where}: not a run segment (keys {sorted(fields)})")
    seg = Segment(**raw)
    numbers_ok = (
        isinstance(seg.seed, int) and not isinstance(seg.seed, bool) and
        isinstance(seg.wall_seconds, (int, float)) and 0 <= seg.wall_seconds < 1e8
        and isinstance(seg.peak_memory_bytes, int) and 0 <= seg.peak_memory_bytes < 2**50
        and all(isinstance(n, int) and not isinstance(n, bool) and 0 <= n < 10**6
                for n in (seg.cells_to_compute, seg.cells_computed, abs(seg.seed)))
        and isinstance(seg.cores, int) and 0 < seg.cores < 10**5
        and isinstance(seg.finished, bool)
        and (seg.load_1min_at_start is None
             or isinstance(seg.load_1min_at_start, (int, float))
             and 0 <= seg.load_1min_at_start < 1e6))
    texts_ok = all(isinstance(v, str) and len(v) <= 300 for v in
                   (seg.mode, seg.started, seg.memory_method, seg.cpu)) and (
        seg.commit is None or isinstance(seg.commit, str) and len(seg.commit) <= 64)
    if not (numbers_ok and texts_ok):
        raise ConfigError(f"{where}: a field is out of range or of the wrong type")
    return seg


def read_segments(out: Path) -> list[Segment]:
    """The segments recorded under ``out`` (none when there is no run.json); ConfigError
    naming the file and the fix when it is damaged."""
    from tokengeo.io import parse_json, read_small

    path = Path(out) / RUN_FILE
    if not path.exists() and not path.is_symlink():
        return []
    fix = "restore it, or delete it (the report then counts only the segments run after)"
    try:
        raw = parse_json(read_small(path, 2**22), repr(str(path)), list)
        if len(raw) > MAX_SEGMENTS:
            raise ConfigError(f"more than {MAX_SEGMENTS} segments")
        return [_check_segment(r, f"segment {i}") for i, r in enumerate(raw)]
    except ConfigError as e:
        raise ConfigError(f"{str(path)!r}: {e}; {fix}") from None


def write_segments(out: Path, segments: list[Segment]) -> None:
    """``OUT/run.json`` := ``segments`` (the last :data:`MAX_SEGMENTS`; written atomically)."""
    from tokengeo.io import write_json

    write_json(Path(out) / RUN_FILE, [asdict(s) for s in segments[-MAX_SEGMENTS:]], indent=1)


def run_object(segments: list[Segment], mode: str, seed: int) -> dict | None:
    """report.json's ``run``: the wall seconds summed and the peak maxed over the segments
    of ``mode`` and ``seed`` that had cells to compute (a call that found every cell stored
    only re-wrote the report); None when there is none."""
    mine = [s for s in segments
            if s.mode == mode and s.seed == seed and s.cells_to_compute > 0]
    if not mine:
        return None
    return {"wall_seconds": round(sum(s.wall_seconds for s in mine), 1),
            "peak_memory_bytes": max(s.peak_memory_bytes for s in mine),
            "segments": [asdict(s) for s in mine]}
