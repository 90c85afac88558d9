"""Validation helpers shared by every dataclass config: one clear message per problem.

Every check names the field and the value it got, and refuses wrong types (a string where a
number belongs, a bool where an int belongs) and non-finite numbers with a
:class:`~tokengeo.errors.ConfigError` instead of a ``TypeError`` later on.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import os
import secrets
import typing
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from tokengeo.errors import ConfigError

T = TypeVar("T")
MAX_SEED = 2**32 - 1  # every generator (torch, numpy, random) accepts it


def check_number(field: str, value: Any, *, positive: bool = False,
                 allow_zero: bool = False) -> float:
    """``value`` as a finite real number (int or float, not a bool, not a string); ``> 0``
    when ``positive`` (``>= 0`` with ``allow_zero``)."""
    number = isinstance(value, numbers.Real) and not isinstance(value, bool)
    bound = (">= 0" if allow_zero else "> 0") if positive else ""
    what = f"a finite number {bound}".rstrip()
    if not number or not math.isfinite(value):
        raise ConfigError(f"{field}={value!r} must be {what}")
    if positive and not (value >= 0 if allow_zero else value > 0):
        raise ConfigError(f"{field}={value!r} must be {what}")
    return value


def is_whole(value: Any) -> bool:
    """An integer that is not a bool (``True`` is an int in Python, never a count here)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def check_int(field: str, value: Any, lo: int | None = None, hi: int | None = None) -> int:
    """``value`` as an int (not a bool, not a float) in ``[lo, hi]`` (an unset bound is open)."""
    if not is_whole(value):
        raise ConfigError(f"{field}={value!r} must be a whole number")
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        bounds = " and ".join(b for b in ((f">= {lo}" if lo is not None else ""),
                                          (f"<= {hi}" if hi is not None else "")) if b)
        raise ConfigError(f"{field}={value!r} must be a whole number {bounds}")
    return int(value)


def check_choice(field: str, value: Any, allowed: Iterable[Any]) -> None:
    allowed = list(allowed)
    if value not in allowed:
        raise ConfigError(f"{field}={value!r} is not valid; choose one of {allowed}")


def check_positive(field: str, value: float, *, allow_zero: bool = False) -> None:
    check_number(field, value)
    ok = value >= 0 if allow_zero else value > 0
    if not ok:
        bound = ">= 0" if allow_zero else "> 0"
        raise ConfigError(f"{field}={value!r} must be {bound}")


def check_range(field: str, value: float, lo: float, hi: float) -> None:
    check_number(field, value)
    if not lo <= value <= hi:
        raise ConfigError(f"{field}={value!r} must lie in [{lo}, {hi}]")


def check_types(cfg: Any) -> None:
    """Check every field of a dataclass ``cfg`` against its annotation (``int``, ``float``,
    ``bool``, ``str``, ``dict[...]``, ``list[...]``, optionally ``| None``), naming the
    field and value; floats must be finite. Other annotations are left to ``validate``."""
    hints = typing.get_type_hints(type(cfg))
    for f in dataclasses.fields(cfg):
        _check_type(f.name, getattr(cfg, f.name), hints.get(f.name, Any))


def _check_type(name: str, value: Any, hint: Any) -> None:
    args = typing.get_args(hint)
    if type(None) in args:  # Optional[X]
        if value is None:
            return
        rest = [a for a in args if a is not type(None)]
        hint = rest[0] if len(rest) == 1 else Any
    origin = typing.get_origin(hint) or hint
    if hint is float:
        check_number(name, value)
    elif hint is int:
        check_int(name, value)
    elif hint is bool and not isinstance(value, bool):
        raise ConfigError(f"{name}={value!r} must be true or false")
    elif hint is str and not isinstance(value, str):
        raise ConfigError(f"{name}={value!r} must be a string")
    elif origin is dict and not isinstance(value, Mapping):
        raise ConfigError(f"{name}={value!r} must be a table of key = value")
    elif origin in (list, tuple) and not isinstance(value, list | tuple):
        raise ConfigError(f"{name}={value!r} must be a list")
    elif origin in (list, tuple) and typing.get_args(hint)[:1] == (str,):
        if not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{name}={value!r} must be a list of strings")


def available_memory() -> int | None:
    """Bytes of memory this machine has (physical RAM), or None where it cannot be read."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


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

def check_seed(field: str, value: Any) -> None:
    """A seed is a whole number in ``[0, 2**32 - 1]`` (what every generator accepts)."""
    check_int(field, value, lo=0, hi=MAX_SEED)


def check_memory(what: str, need_bytes: float, fix: str) -> None:
    """Refuse work whose estimated memory ``need_bytes`` exceeds this machine's memory.

    The message states the estimate: ``"<what> needs about X GiB of memory; this machine has
    Y GiB; <fix>"``.
    """
    limit = available_memory()
    if limit is not None and need_bytes > limit:
        raise ConfigError(f"{what} needs about {_gib(need_bytes)} of memory; this machine has "
                          f"{_gib(limit)}; {fix}")


# Work is refused when even an optimistic machine (RATE elementary operations a second, a
# fast GPU) would take longer than MAX_WORK_SECONDS: an absurd size fails at once, with the
# estimate, instead of running for weeks.
RATE = 1e10
MAX_WORK_SECONDS = 7 * 24 * 3600.0


def check_time(what: str, operations: float, fix: str) -> None:
    """Refuse work of about ``operations`` elementary steps that would take more than a week
    at :data:`RATE` a second: ``"<what> is about N operations, X days even at ...; <fix>"``."""
    seconds = operations / RATE
    if not math.isfinite(seconds) or seconds > MAX_WORK_SECONDS:
        raise ConfigError(f"{what} is about {operations:.2g} operations, {seconds / 86400:.3g} "
                          f"days even at {RATE:.0e} a second (more than the "
                          f"{MAX_WORK_SECONDS / 86400:.0f}-day limit); {fix}")


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
