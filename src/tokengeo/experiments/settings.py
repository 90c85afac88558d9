"""Settings schemas of the reproduce suites: every suite declares its settings in one place.

A suite module holds ``SETTINGS = {name: Setting(kind, ...)}`` near its top. The ``[common]``
table merged with the ``[quick]`` or ``[full]`` table of ``suites/<name>.toml`` is checked
against it before anything runs or is written: an unknown key is refused with the valid ones,
a missing required key or a value of the wrong type gives one line naming the key and file.

Kinds: ``int`` (>= ``lo``), ``number`` (finite, >= 0), ``str``, ``int_list`` / ``str_list``
(non-empty), ``table`` (a TOML table; ``check(table, where)`` validates its contents).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokengeo.checks import is_whole
from tokengeo.errors import ConfigError

KINDS = ("int", "number", "str", "int_list", "str_list", "table")


@dataclass(frozen=True)
class Setting:
    kind: str
    required: bool = True
    lo: int = 0  # smallest allowed int (int and int_list)
    check: Callable[[dict, str], None] | None = None  # contents of a table


def _type_ok(s: Setting, v: Any) -> str | None:
    """None when ``v`` fits ``s``, else what it must be."""
    if s.kind == "int":
        return None if is_whole(v) and v >= s.lo else f"a whole number >= {s.lo}"
    if s.kind == "number":
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
        return None if ok and v >= 0 else "a finite number >= 0"
    if s.kind == "str":
        return None if isinstance(v, str) and v else "a non-empty string"
    if s.kind in ("int_list", "str_list"):
        item = (lambda x: is_whole(x) and x >= s.lo) if s.kind == "int_list" else \
            (lambda x: isinstance(x, str) and x)
        what = f"whole numbers >= {s.lo}" if s.kind == "int_list" else "strings"
        ok = isinstance(v, list) and v and all(item(x) for x in v)
        return None if ok else f"a non-empty list of {what}"
    return None if isinstance(v, dict) else "a table ({ key = value, ... })"


def check_settings(suite: str, path: Path, settings: dict, schema: dict[str, Setting]) -> None:
    """Refuse unknown, missing or mistyped settings of ``suite`` (read from ``path``)."""
    unknown = sorted(k for k in settings if k not in schema)
    if unknown:
        raise ConfigError(f"{path}: unknown setting(s) {unknown} for suite {suite!r}; valid "
                          f"settings are {sorted(schema)}")
    for name, s in schema.items():
        if name not in settings:
            if s.required:
                raise ConfigError(f"{path}: suite {suite!r} needs the setting {name!r} "
                                  f"({s.kind}); add it to [common] or the mode's table")
            continue
        value = settings[name]
        must = _type_ok(s, value)
        if must is not None:
            raise ConfigError(f"{path}: {name} = {value!r} must be {must}")
        if s.check is not None:
            s.check(value, f"{path}: {name}")


def fields_of(cls) -> Callable[[dict, str], None]:
    """A table ``check``: its keys are fields of the dataclass ``cls``."""
    import dataclasses

    def check(table: dict, where: str) -> None:
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(table) - names)
        if unknown:
            raise ConfigError(f"{where}: unknown key(s) {unknown}; valid keys are "
                              f"{sorted(names)}")
    return check


def keys(**kinds: str) -> Callable[[dict, str], None]:
    """A table ``check``: exactly these keys, each an int >= 1 (``"int"``)."""
    def check(table: dict, where: str) -> None:
        unknown = sorted(set(table) - set(kinds))
        if unknown:
            raise ConfigError(f"{where}: unknown key(s) {unknown}; valid keys are "
                              f"{sorted(kinds)}")
        for k in kinds:
            if k not in table:
                raise ConfigError(f"{where}: needs the key {k!r}")
            if not (is_whole(table[k]) and table[k] >= 1):
                raise ConfigError(f"{where}.{k} = {table[k]!r} must be a whole number >= 1")
    return check


def train_table_with(**fixed: Any) -> Callable[[dict, str], None]:
    """A ``train`` table check: TrainConfig fields, validated as TrainConfig does, with the
    fields the suite itself sets (``fixed``, e.g. ``task="dino"``)."""
    def check(table: dict, where: str) -> None:
        from tokengeo.train import TrainConfig

        fields_of(TrainConfig)(table, where)
        try:
            TrainConfig(**{**table, **fixed, "out": "unused", "device": "cpu"}).validate()
        except ConfigError as exc:
            raise ConfigError(f"{where}: {exc}") from None
    return check


train_table = train_table_with()
