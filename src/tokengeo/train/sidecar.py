"""The JSON sidecar of a checkpoint: its digest and the types of its fields.

A sidecar is covered by a SHA-256 ``digest`` of its own canonical JSON (sorted keys, no
spaces, every field but ``digest``), as the tensor files are covered by theirs, so an edited
step, sampler position or optimizer setting no longer matches. Its fields are then
type-checked against a schema: a spec is a function ``spec(value, where)`` that raises
:class:`SidecarError` naming the field (``where``), what it must be and what it is::

    record({"step": integer, "sampler": map_of(int_or_bool)})(state, "")  # "" = the top
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from tokengeo.errors import CheckpointError

Spec = Callable[[Any, str], None]
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


class SidecarError(CheckpointError):
    """A sidecar field has the wrong type, or a field is missing or unknown."""


def digest(state: Mapping[str, Any]) -> str:
    """SHA-256 of the canonical JSON of ``state`` without its ``digest`` field."""
    body = {k: v for k, v in state.items() if k != "digest"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _fail(where: str, want: str, value: Any) -> None:
    shown = repr(value)
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    raise SidecarError(f"{where} must be {want}, not {shown}")


# ---- specs --------------------------------------------------------------------------


def integer(value: Any, where: str) -> None:
    if type(value) is not int or value < 0:
        _fail(where, "an integer >= 0", value)


def any_integer(value: Any, where: str) -> None:
    if type(value) is not int:
        _fail(where, "an integer", value)


def number(value: Any, where: str) -> None:
    if type(value) not in (int, float) or not math.isfinite(value):
        _fail(where, "a finite number", value)


def string(value: Any, where: str) -> None:
    if type(value) is not str:
        _fail(where, "a string", value)


def boolean(value: Any, where: str) -> None:
    if type(value) is not bool:
        _fail(where, "true or false", value)


def hex64(value: Any, where: str) -> None:
    if type(value) is not str or not _HEX64.match(value):
        _fail(where, "a SHA-256 hex digest", value)


def anything(value: Any, where: str) -> None:
    """Any JSON value (a field another check compares or parses)."""


def int_or_bool(value: Any, where: str) -> None:
    if type(value) not in (int, bool):
        _fail(where, "an integer or a boolean", value)


def scalar(value: Any, where: str) -> None:
    """None, a boolean, a string, a finite number or a list of finite numbers."""
    if value is None or type(value) in (bool, str):
        return
    if type(value) is list:
        for i, item in enumerate(value):
            number(item, f"{where}[{i}]")
        return
    number(value, where)


def maybe(spec: Spec) -> Spec:
    def check_maybe(value: Any, where: str) -> None:
        if value is not None:
            spec(value, where)
    return check_maybe


def list_of(spec: Spec) -> Spec:
    def check_list(value: Any, where: str) -> None:
        if type(value) is not list:
            _fail(where, "a list", value)
        for i, item in enumerate(value):
            spec(item, f"{where}[{i}]")
    return check_list


def map_of(spec: Spec) -> Spec:
    def check_map(value: Any, where: str) -> None:
        if type(value) is not dict:
            _fail(where, "an object", value)
        for key, item in value.items():
            spec(item, _join(where, key))
    return check_map


def record(fields: Mapping[str, Spec], *, rest: Spec | None = None) -> Spec:
    """An object with exactly ``fields``; other keys are refused unless ``rest`` checks
    them."""
    def check_record(value: Any, where: str) -> None:
        if type(value) is not dict:
            _fail(where, "an object", value)
        missing = [k for k in fields if k not in value]
        unknown = sorted(k for k in value if k not in fields) if rest is None else []
        if missing or unknown:
            raise SidecarError(f"{where or 'the sidecar'} has missing fields {missing} and "
                               f"unknown fields {unknown}; expected exactly {sorted(fields)}")
        for key, item in value.items():
            (fields.get(key) or rest or anything)(item, _join(where, key))
    return check_record


def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key
