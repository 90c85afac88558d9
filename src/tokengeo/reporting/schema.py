"""The subset of JSON Schema that ``report.schema.json`` uses, checked without a dependency:
``type``, ``enum``, ``pattern``, ``minimum``, ``minItems``, ``required``, ``properties``,
``additionalProperties``, ``items``, ``oneOf`` and local ``$ref``. A violation is one line
naming the field (``claims[3].interval.n``) and what it must be."""

from __future__ import annotations

import math
import re
from functools import cache
from importlib import resources

TYPES = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None)}


@cache
def report_schema() -> dict:
    import json

    text = resources.files("tokengeo.experiments").joinpath("report.schema.json").read_text(
        encoding="utf-8")
    return json.loads(text)


def _is(value, kind: str) -> bool:
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, TYPES[kind])


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _where(path: str) -> str:
    return path or "the top level"


def violation(value, schema: dict, path: str = "", root: dict | None = None) -> str | None:
    """The first violation of ``schema`` by ``value`` as ``FIELD: what it must be``, or None."""
    root = root if root is not None else schema
    if "$ref" in schema:
        name = schema["$ref"].removeprefix("#/$defs/")
        return violation(value, root["$defs"][name], path, root)
    if isinstance(value, float) and not math.isfinite(value):
        return f"{_where(path)}: {value!r} is not a JSON number; write null or a finite number"
    if "oneOf" in schema:
        if not any(violation(value, s, path, root) is None for s in schema["oneOf"]):
            return violation(value, schema["oneOf"][0], path, root)
    kinds = schema.get("type")
    if kinds is not None:
        kinds = [kinds] if isinstance(kinds, str) else kinds
        if not any(_is(value, k) for k in kinds):
            return f"{_where(path)}: must be {' or '.join(kinds)}, not {_short(value)}"
    if "enum" in schema and value not in schema["enum"]:
        return f"{_where(path)}: must be one of {schema['enum']}, not {_short(value)}"
    if isinstance(value, str) and "pattern" in schema and not re.search(schema["pattern"], value):
        return f"{_where(path)}: {_short(value)} does not match {schema['pattern']}"
    if _is(value, "number") and "minimum" in schema and value < schema["minimum"]:
        return f"{_where(path)}: must be at least {schema['minimum']}, not {value!r}"
    if isinstance(value, dict):
        return _object(value, schema, path, root)
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0):
            return f"{_where(path)}: must hold at least {schema['minItems']} item(s)"
        if "items" in schema:
            for i, item in enumerate(value):
                problem = violation(item, schema["items"], f"{path}[{i}]", root)
                if problem:
                    return problem
    return None


def _object(value: dict, schema: dict, path: str, root: dict) -> str | None:
    for key in schema.get("required", ()):
        if key not in value:
            return f"{_where(path)}: the field {key!r} is missing"
    props, extra = schema.get("properties", {}), schema.get("additionalProperties", True)
    for key, item in value.items():
        plain = key.replace("-", "_").replace(" ", "_").isidentifier()
        where = (f"{path}.{key}" if path else key) if plain else f"{path}[{_short(key)}]"
        if key in props:
            problem = violation(item, props[key], where, root)
        elif extra is False:
            problem = f"{where}: not a field of report.json (fields: {sorted(props)})"
        elif isinstance(extra, dict):
            problem = violation(item, extra, where, root)
        else:
            problem = violation(item, {}, where, root)  # still refuses NaN and infinities
        if problem:
            return problem
    return None
