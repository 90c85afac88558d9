"""Validation helpers shared by every dataclass config: one clear message per problem."""

from __future__ import annotations

import dataclasses
import math
import os
import secrets
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from tokengeo.errors import ConfigError

T = TypeVar("T")


def check_choice(field: str, value: Any, allowed: Iterable[Any]) -> None:
    allowed = list(allowed)
    if value not in allowed:
        raise ConfigError(f"{field}={value!r} is not valid; choose one of {allowed}")


def check_positive(field: str, value: float, *, allow_zero: bool = False) -> None:
    ok = value >= 0 if allow_zero else value > 0
    if not ok:
        bound = ">= 0" if allow_zero else "> 0"
        raise ConfigError(f"{field}={value!r} must be {bound}")


def check_range(field: str, value: float, lo: float, hi: float) -> None:
    if not lo <= value <= hi:
        raise ConfigError(f"{field}={value!r} must lie in [{lo}, {hi}]")


def replace_checked(cfg: T, overrides: Mapping[str, Any], *, what: str = "config") -> T:
    """``dataclasses.replace`` that rejects unknown keys with the list of valid ones."""
    names = {f.name for f in dataclasses.fields(cfg)}  # type: ignore[arg-type]
    unknown = sorted(set(overrides) - names)
    if unknown:
        raise ConfigError(
            f"unknown {what} option(s) {unknown}; valid options are {sorted(names)}"
        )
    return dataclasses.replace(cfg, **overrides)  # type: ignore[type-var]


def to_dict(cfg: Any) -> dict[str, Any]:
    """A JSON-able dict of a (possibly nested) dataclass config."""
    return dataclasses.asdict(cfg)


# ---- typed checks (numbers, counts, seeds), memory estimates and output paths --------------

MAX_SEED = 2**32 - 1


def check_int(field: str, value: Any, *, lo: int | None = 1, hi: int | None = None) -> None:
    """``value`` is an int (not a bool) in ``[lo, hi]`` (an unset bound is open)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{field}={value!r} must be a whole number")
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        bounds = " and ".join(b for b in ((f">= {lo}" if lo is not None else ""),
                                          (f"<= {hi}" if hi is not None else "")) if b)
        raise ConfigError(f"{field}={value!r} must be a whole number {bounds}")


def check_number(field: str, value: Any, *, positive: bool = True,
                 allow_zero: bool = False) -> None:
    """``value`` is a finite real number (int or float, not a bool); ``> 0`` when
    ``positive`` (``>= 0`` with ``allow_zero``)."""
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    bound = (">= 0" if allow_zero else "> 0") if positive else ""
    what = f"a finite number {bound}".rstrip()
    if not number or not math.isfinite(value):
        raise ConfigError(f"{field}={value!r} must be {what}")
    if positive and not (value >= 0 if allow_zero else value > 0):
        raise ConfigError(f"{field}={value!r} must be {what}")


def check_seed(field: str, value: Any) -> None:
    """A seed is a whole number in ``[0, 2**32 - 1]`` (what every generator accepts)."""
    check_int(field, value, lo=0, hi=MAX_SEED)


def available_memory() -> int | None:
    """Bytes of memory a new allocation can get now (Linux ``MemAvailable``), or None."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, OSError, ValueError):
        return None


def check_memory(what: str, need_bytes: float, fix: str) -> None:
    """Refuse work whose estimated memory ``need_bytes`` exceeds the available memory.

    The message states the estimate: ``"<what> needs about X GiB of memory; Y GiB are
    available; <fix>"``.
    """
    avail = available_memory()
    if avail is not None and need_bytes > avail:
        raise ConfigError(f"{what} needs about {_gib(need_bytes)} of memory; "
                          f"{_gib(avail)} are available; {fix}")


def _gib(n: float) -> str:
    return f"{n / 2**30:.3g} GiB" if n < 2**60 else f"{n / 2**30:.3g} GiB (absurd)"


def check_output_folder(flag: str, path: str | Path) -> Path:
    """An output folder that can be created or written: not a file, not under a file, on a
    writable file system. Creates nothing (a probe folder is made and removed at once)."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise ConfigError(f"{flag} {path} is a file, not a folder; choose a folder path")
    _check_writable_ancestor(flag, path, path)
    return path


def check_output_file(flag: str, path: str | Path) -> Path:
    """An output file path whose folder exists and is writable, and which is not a folder."""
    path = Path(path)
    if path.is_dir():
        raise ConfigError(f"{flag} {path} is a folder; name a file, e.g. {path / 'result.json'}")
    if not path.parent.is_dir():
        raise ConfigError(f"{flag} {path}: folder {path.parent} does not exist; create it or "
                          "choose another path")
    _check_writable_ancestor(flag, path, path.parent)
    return path


def _check_writable_ancestor(flag: str, path: Path, start: Path) -> None:
    folder = start
    while not folder.exists():
        folder = folder.parent
    if not folder.is_dir():
        raise ConfigError(f"{flag} {path}: {folder} is a file, not a folder; choose another "
                          "path")
    probe = folder / f".tmp-probe-{secrets.token_hex(4)}"
    try:
        os.mkdir(probe)
        os.rmdir(probe)
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise ConfigError(f"{flag} {path}: cannot write in {folder} ({reason}); choose a "
                          "writable folder") from None
