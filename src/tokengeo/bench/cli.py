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
        if isinstance(default, bool):
            parser.add_argument(flag, dest=f.name, default=default,
                                action=argparse.BooleanOptionalAction)
        elif isinstance(default, tuple):
            kind = type(default[0]) if default else str
            parser.add_argument(flag, dest=f.name, type=kind, nargs="+", default=default)
        else:
            parser.add_argument(flag, dest=f.name, type=type(default), default=default,
                                choices=f.metadata.get("choices"))
    return parser


def parse_config(cls: type[C], doc: str | None = None, argv: Sequence[str] | None = None) -> C:
    """The config ``cls`` with the command line's values (``sys.argv`` by default)."""
    args = config_parser(cls, doc).parse_args(argv)
    return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in vars(args).items()})
