"""Validation helpers shared by every dataclass config: one clear message per problem."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
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
