"""The reader's schema check (tokengeo.reporting.schema, no dependency) agrees with the
reference implementation (jsonschema) on report.schema.json, over mutations of the published
report.json and of a small one; it is only stricter where it must be: NaN and ±Infinity (a
JSON number to jsonschema) are refused, and an integer must be written as one (not 1.0)."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest
from helpers.report_dicts import report

from tokengeo.reporting.schema import report_schema, violation

jsonschema = pytest.importorskip("jsonschema", reason="pip install 'tokengeo[dev]'")
PUBLISHED = Path(__file__).parents[2] / "docs" / "results" / "report.json"
VALUES = [None, "x", 1.5, -1, 7, True, [], {}, ["x"], {"x": 1}, "not run: why", "reproduced"]


def _slots(node, out: list) -> list:
    """Every (container, key) of a JSON value."""
    items = node.items() if isinstance(node, dict) else enumerate(node) \
        if isinstance(node, list) else ()
    for key, child in items:
        out.append((node, key))
        _slots(child, out)
    return out


def _published_sample() -> dict:
    """The published report cut to a few claims (a family among them) and tables: every
    kind of field, small enough to validate hundreds of times."""
    data = json.loads(PUBLISHED.read_text())
    family = next(c for c in data["claims"] if c.get("members"))
    family["members"] = family["members"][:2]
    data["claims"] = [*data["claims"][:2], family]
    data["tables"], data["power"] = data["tables"][:2], data["power"][:2]
    return data


def _agree(data: dict, validator) -> None:
    ours = violation(data, report_schema())
    theirs = validator.is_valid(data)
    assert (ours is None) == theirs, (ours, next(iter(validator.iter_errors(data)), None))


@pytest.mark.parametrize("source", ["published", "small"])
def test_the_check_agrees_with_jsonschema_on_mutations(source):
    data = _published_sample() if source == "published" else report()
    validator = jsonschema.Draft202012Validator(report_schema())
    _agree(data, validator)
    slots, rng = _slots(data, []), random.Random(0)
    for container, key in rng.sample(slots, min(100, len(slots))):
        old = container[key]
        for value in rng.sample(VALUES, 3) + ["delete"]:
            if value == "delete":
                if not isinstance(container, dict):
                    continue
                del container[key]
            else:
                container[key] = value
            _agree(data, validator)
            container[key] = old
        if isinstance(container, dict):  # restore the key order too
            container.update({k: container.pop(k) for k in list(container)})


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_non_finite_numbers_are_refused_where_jsonschema_takes_them(value):
    data = report()
    data["claims"][0]["interval"]["mean"] = value
    assert jsonschema.Draft202012Validator(report_schema()).is_valid(data)
    problem = violation(data, report_schema())
    assert problem is not None and problem.startswith("claims[0].interval.mean: ")
