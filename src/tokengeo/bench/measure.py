"""Timing and peak-memory measurement shared by the benchmarks: wall-clock timers
(:func:`timed`, :func:`interleaved_medians`), CUDA-event timers (:func:`cuda_seconds`,
:func:`cuda_median_ms`, :func:`interleaved_cuda_medians`) and peaks (resident set, or the
CUDA allocator's)."""

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


# mallopt parameters (glibc's malloc.h) and the values of glibc's dynamic steady state on a
# 64-bit machine: the mmap threshold rises to the largest chunk freed, up to 32 MiB, and the
# trim threshold follows at twice it.
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
STEADY_MMAP_THRESHOLD = 32 * 2**20
STEADY_TRIM_THRESHOLD = 2 * STEADY_MMAP_THRESHOLD


def allocate_for_timing() -> bool:
    """Undo :func:`ensure_precise_rss` for the timings that follow (True if it was set).

    With the 64 KiB mmap threshold every tensor of 64 KiB or more is mapped and unmapped
    at each allocation, so each pays its page faults: a gpt-tiny train step on a CPU took
    1.5× its time in a plain process (223 vs 146 ms; 2026-12-05), which dilutes every
    ratio taken there. This sets the thresholds glibc reaches by itself in a loop of
    repeated allocations (:data:`STEADY_MMAP_THRESHOLD`), so tensors are reused from the
    heap as in a user's process. Resident memory then no longer tracks live tensors:
    measure memory before calling this, time after.
    """
    if os.environ.get(MMAP_ENV) is None or not sys.platform.startswith("linux"):
        return False
    import ctypes

    libc = ctypes.CDLL(None)
    ok = (libc.mallopt(M_MMAP_THRESHOLD, STEADY_MMAP_THRESHOLD) == 1
          and libc.mallopt(M_TRIM_THRESHOLD, STEADY_TRIM_THRESHOLD) == 1)
    if not ok:
        raise RuntimeError("mallopt refused glibc's steady-state thresholds; run the "
                           f"benchmark with {MMAP_ENV} unset to time it")
    return True


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
    timer: Callable[[Callable[[], object]], float] | None = None,
) -> dict[str, list[float]]:
    """Seconds of every call of each function, timed round-robin ``repeats`` times (so a
    drift in machine load hits all of them alike), after ``warmup`` untimed calls each.
    ``timer(fn)``: seconds of one call (default: the wall clock, synchronised on CUDA;
    :func:`cuda_seconds` times on the GPU's own clock)."""
    if timer is None:
        sync = (lambda: torch.cuda.synchronize(device)) if device and device.type == "cuda" \
            else (lambda: None)

        def timer(fn: Callable[[], object]) -> float:
            sync()
            t0 = time.perf_counter()
            fn()
            sync()
            return time.perf_counter() - t0

    for fn in fns.values():
        for _ in range(warmup):
            fn()
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            times[name].append(timer(fn))
    return times


def interleaved_medians(
    fns: dict[str, Callable[[], object]], *, repeats: int, warmup: int = 2,
    device: torch.device | None = None,
) -> dict[str, float]:
    """Median seconds per call of each function (see :func:`interleaved_times`)."""
    times = interleaved_times(fns, repeats=repeats, warmup=warmup, device=device)
    return {k: statistics.median(v) for k, v in times.items()}


def cuda_seconds(fn: Callable[[], object]) -> float:
    """Seconds of one call ``fn()`` on the GPU, between two CUDA events recorded on the
    current stream (the GPU's own clock: the host's time to issue the work is not counted
    unless the GPU waits for it)."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3


def cuda_median_ms(fn: Callable[[], object], repeats: int, warmup: int = 3) -> float:
    """Median milliseconds of ``fn()`` over ``repeats`` CUDA-event timings after warm-up."""
    for _ in range(warmup):
        fn()
    return 1e3 * statistics.median(cuda_seconds(fn) for _ in range(repeats))


def interleaved_cuda_medians(
    fns: dict[str, Callable[[], object]], *, repeats: int, warmup: int = 3,
) -> dict[str, float]:
    """Median CUDA-event milliseconds per call of each function, timed round-robin (see
    :func:`interleaved_times`)."""
    times = interleaved_times(fns, repeats=repeats, warmup=warmup, timer=cuda_seconds)
    return {k: 1e3 * statistics.median(v) for k, v in times.items()}


def cuda_peak_mb(fn: Callable[[], object]) -> float:
    """Peak MiB allocated on the GPU above what was allocated before ``fn()``."""
    return peak_bytes(fn, torch.device("cuda", torch.cuda.current_device())) / 2**20
