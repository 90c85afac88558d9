"""Timing and peak-memory measurement shared by the benchmarks."""

from __future__ import annotations

import os
import re
import statistics
import sys
import time
from collections.abc import Callable

import torch

MMAP_ENV = "MALLOC_MMAP_THRESHOLD_"


def ensure_precise_rss() -> None:
    """Re-exec the interpreter with glibc's mmap threshold fixed at 64 KiB.

    Large tensors are then mmapped and returned to the OS when freed, so the resident
    set's high-water mark measures live tensor memory (see :func:`peak_rss_bytes`).
    """
    if os.environ.get(MMAP_ENV) is None and sys.platform.startswith("linux"):
        os.environ[MMAP_ENV] = "65536"
        os.execv(sys.executable, [sys.executable, *sys.orig_argv[1:]])


def status_bytes(key: str) -> int:
    """A memory line of ``/proc/self/status`` in bytes (``VmRSS`` now, ``VmHWM`` peak)."""
    with open("/proc/self/status") as f:
        return int(re.search(rf"{key}:\s+(\d+) kB", f.read()).group(1)) * 1024


def reset_peak_rss() -> None:
    """Reset this process' peak-RSS mark (VmHWM) to the current RSS (Linux >= 4.0)."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def peak_rss_bytes(fn: Callable[[], object]) -> int:
    """Peak resident memory added while ``fn`` runs (Linux: reset VmHWM, read it back).

    On CUDA use ``torch.cuda.max_memory_allocated`` instead (see :func:`peak_bytes`).
    """
    reset_peak_rss()
    base = status_bytes("VmRSS")
    fn()
    return status_bytes("VmHWM") - base


def timed(fn: Callable[[], object]) -> tuple[float, float]:
    """(wall seconds, process CPU seconds) of one call ``fn()``."""
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def peak_bytes(fn: Callable[[], object], device: torch.device) -> int:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        base = torch.cuda.memory_allocated(device)
        fn()
        torch.cuda.synchronize(device)
        return torch.cuda.max_memory_allocated(device) - base
    fn()  # warm caches so one-off allocations do not count
    return peak_rss_bytes(fn)


def interleaved_times(
    fns: dict[str, Callable[[], object]], *, repeats: int, warmup: int = 2,
    device: torch.device | None = None,
) -> dict[str, list[float]]:
    """Seconds of every call of each function, timed round-robin ``repeats`` times (so a
    drift in machine load hits all of them alike), after ``warmup`` untimed calls each."""
    sync = (lambda: torch.cuda.synchronize(device)) if device and device.type == "cuda" else (
        lambda: None)
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            sync()
            t0 = time.perf_counter()
            fn()
            sync()
            times[name].append(time.perf_counter() - t0)
    return times


def interleaved_medians(
    fns: dict[str, Callable[[], object]], *, repeats: int, warmup: int = 2,
    device: torch.device | None = None,
) -> dict[str, float]:
    """Median seconds per call of each function (see :func:`interleaved_times`)."""
    times = interleaved_times(fns, repeats=repeats, warmup=warmup, device=device)
    return {k: statistics.median(v) for k, v in times.items()}
