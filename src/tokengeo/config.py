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
import typing
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

from tokengeo.errors import ConfigError

T = TypeVar("T")
MAX_SEED = 2**63 - 1  # torch.manual_seed takes a signed 64-bit seed


def check_number(field: str, value: Any) -> float:
    """``value`` as a finite real number (bools and strings are refused)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ConfigError(f"{field}={value!r} must be a number")
    if not math.isfinite(value):
        raise ConfigError(f"{field}={value!r} must be a finite number")
    return value


def check_int(field: str, value: Any, lo: int | None = None, hi: int | None = None) -> int:
    """``value`` as an int (not a bool, not a float), optionally within ``[lo, hi]``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ConfigError(f"{field}={value!r} must be an integer")
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        raise ConfigError(f"{field}={value!r} must lie in [{lo}, {hi}]")
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


def check_fits_in_memory(what: str, n_bytes: float, detail: str) -> None:
    """Refuse ``n_bytes`` (an estimate) above the machine's memory, saying the estimate."""
    limit = available_memory()
    if limit is not None and n_bytes > limit:
        raise ConfigError(f"{detail} needs about {n_bytes / 1e9:.3g} GB for {what}, more than "
                          f"the {limit / 1e9:.3g} GB of memory of this machine; choose smaller "
                          "sizes")


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
