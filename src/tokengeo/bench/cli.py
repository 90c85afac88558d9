"""Command lines of the benchmark scripts: one ``--flag`` per field of a config dataclass."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Sequence
from typing import TypeVar

C = TypeVar("C")


def config_parser(cls: type, doc: str | None = None) -> argparse.ArgumentParser:
    """``--field-name VALUE`` per field, typed by its default (a tuple takes several values,
    a bool becomes ``--field`` / ``--no-field``; ``metadata={"choices": ...}`` limits it)."""
    parser = argparse.ArgumentParser(description=(doc or "").split("\n")[0])
    for f in dataclasses.fields(cls):
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        flag = "--" + f.name.replace("_", "-")
        many, kind = _kind(f, default)
        if kind is bool:
            parser.add_argument(flag, dest=f.name, default=default,
                                action=argparse.BooleanOptionalAction)
        elif many:
            parser.add_argument(flag, dest=f.name, type=kind, nargs="+", default=default)
        else:
            parser.add_argument(flag, dest=f.name, type=kind, default=default,
                                choices=f.metadata.get("choices"))
    return parser


def _kind(f: dataclasses.Field, default) -> tuple[bool, type]:
    """(several values?, the type of one) of a field: from its default, or, for a default
    of None (a value the device chooses), from its annotation."""
    if isinstance(default, tuple):
        return True, type(default[0]) if default else str
    if default is not None:
        return False, type(default)
    text = str(f.type)
    kind = next((k for k in (int, float, str, bool) if k.__name__ in text), str)
    return text.startswith("tuple"), kind


def parse_config(cls: type[C], doc: str | None = None, argv: Sequence[str] | None = None) -> C:
    """The config ``cls`` with the command line's values (``sys.argv`` by default)."""
    args = config_parser(cls, doc).parse_args(argv)
    return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in vars(args).items()})
