"""Paths the user supplies to a suite's settings: ``${NAME}`` placeholders.

The papers' data sets (CIFAR-100, ImageNet, IMDB, ...) and models (BERT-base) are not
bundled; a suite's ``[paper]`` table names them with a placeholder, e.g.
``data = "cifar100:${CIFAR100}"``, which ``tokengeo reproduce --data-path
CIFAR100=/data/cifar-100-python.tar.gz`` (or the environment variable ``CIFAR100``) fills.
Every placeholder of the chosen suites is resolved, and its path checked to exist, before
any cell runs or any folder is created; a missing one is refused in one line naming the
suite, the setting and the flag that supplies it. ``--dry-run`` leaves unresolved ones in
place and lists them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokengeo.errors import ConfigError

PLACEHOLDER = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
FLAG = "--data-path"


@dataclass(frozen=True)
class Unresolved:
    """A placeholder with no path given: where it is and what would fill it."""

    suite: str
    key: str  # dotted setting name, e.g. "train.data"
    value: str  # the setting as written
    name: str  # the placeholder's name

    def fix(self) -> str:
        return f"{FLAG} {self.name}=PATH (or the environment variable {self.name})"

    def message(self, where: str | Path) -> str:
        return (f"suite {self.suite!r} ({where}): {self.key} = {self.value!r} needs the path "
                f"{self.name}{_hint(self.value)}; give {self.fix()}")


def _hint(value: str) -> str:
    """What the path should be, from the registered data set the value names, if any."""
    from tokengeo.data.registry import dataset_info, list_datasets

    head = value.partition(":")[0]
    if head not in list_datasets():
        return ""
    return f" ({head}: {dataset_info(head).install})"


def parse_data_paths(items: list[str]) -> dict[str, str]:
    """``["CIFAR100=/d/c.tar.gz", ...]`` -> ``{"CIFAR100": "/d/c.tar.gz"}``; one line on a
    malformed item or a name given twice."""
    paths: dict[str, str] = {}
    for item in items:
        name, sep, path = item.partition("=")
        if not sep or not PLACEHOLDER.fullmatch(f"${{{name}}}") or not path:
            raise ConfigError(f"{FLAG} {item!r} must be NAME=PATH (e.g. {FLAG} "
                              "CIFAR100=/data/cifar-100-python.tar.gz)")
        if name in paths:
            raise ConfigError(f"{FLAG} gives {name} twice; give each name once")
        paths[name] = path
    return paths


def walk_strings(value: Any, key: str = "") -> Iterator[tuple[str, str]]:
    """``(dotted key, string)`` for every string in nested tables and lists."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from walk_strings(v, f"{key}.{k}" if key else str(k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from walk_strings(v, f"{key}[{i}]")
    elif isinstance(value, str):
        yield key, value


def placeholder_names(settings: dict) -> set[str]:
    return {m for _, s in walk_strings(settings) for m in PLACEHOLDER.findall(s)}


def _substitute(value: Any, paths: Mapping[str, str]) -> Any:
    if isinstance(value, dict):
        return {k: _substitute(v, paths) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute(v, paths) for v in value]
    if isinstance(value, str):
        return PLACEHOLDER.sub(lambda m: paths.get(m.group(1), m.group(0)), value)
    return value


def fill_paths(suite: str, where: str | Path, settings: dict, given: Mapping[str, str],
               required: bool = True,
               environ: Mapping[str, str] | None = None) -> tuple[dict, list[Unresolved]]:
    """``settings`` with each placeholder replaced by its path (``given`` first, then the
    environment), and the placeholders left unresolved. ``required``: an unresolved one is
    refused (ConfigError); a resolved path that does not exist always is."""
    environ = os.environ if environ is None else environ
    paths: dict[str, str] = {}
    unresolved: list[Unresolved] = []
    for key, value in walk_strings(settings):
        for name in PLACEHOLDER.findall(value):
            path = given.get(name) or environ.get(name)
            if path is None:
                missing = Unresolved(suite, key, value, name)
                if required:
                    raise ConfigError(missing.message(where))
                unresolved.append(missing)
                continue
            resolved = Path(path).expanduser()
            source = FLAG if name in given else "the environment variable"
            if not resolved.exists():
                raise ConfigError(f"suite {suite!r} ({where}): {key} = {value!r}: {name}="
                                  f"{path} ({source}) does not exist; give the path of your "
                                  f"copy{_hint(value)}")
            if not (resolved.is_file() or resolved.is_dir()):  # /dev/null, a FIFO, a socket
                raise ConfigError(f"suite {suite!r} ({where}): {key} = {value!r}: {name}="
                                  f"{path} ({source}) is not a regular file or folder; give "
                                  f"the path of your copy{_hint(value)}")
            paths[name] = str(resolved)
    filled = _substitute(settings, paths)
    for key, value in walk_strings(filled):  # the data itself, read once at the door
        if key.endswith("data") and any(p in value for p in paths.values()):
            _check_data(suite, where, key, value)
    return filled, unresolved


def _check_data(suite: str, where: str | Path, key: str, value: str) -> None:
    """Read the supplied data set now (a truncated archive, a pickle that asks for code, a
    batch of the wrong shape) rather than when its first cell runs, after --out is
    claimed."""
    from tokengeo.data.registry import check_supplied
    from tokengeo.errors import TokengeoError

    try:
        check_supplied(value)
    except TokengeoError as exc:
        raise ConfigError(f"suite {suite!r} ({where}): {key} = {value!r}: {exc}") from None
