"""cell_times: a run's cell seconds per suite, read back from the stored cells, into
report.json and the ``cells`` doc block."""

import json
import os

import pytest

from tokengeo.experiments.cell_times import cell_times
from tokengeo.experiments.cells import Cell, CellStore
from tokengeo.reporting.blocks import render


def _work(x: int) -> dict:
    return {"x": x}


def _stored(store: CellStore, suite: str, key: str, seconds: float | None, finished: float,
            threads: int = 1) -> Cell:
    cell = Cell(suite, key, _work, {"x": key}, threads=threads)
    store.save(cell, {"x": key}, seconds)
    os.utime(store.path(cell), (finished, finished))
    return cell


def test_core_hours_longest_cell_and_span_per_suite_and_in_all(tmp_path):
    store = CellStore(tmp_path)
    t0 = 1_800_000_000.0  # 2027-01-15T08:00:00Z
    a = [_stored(store, "a", "one", 3600.0, t0 + 3600), _stored(store, "a", "two", 1800.0,
                                                                 t0 + 5400, threads=2)]
    b = [_stored(store, "b", "one", 60.0, t0 + 7200), Cell("b", "absent", _work, {"x": 0})]
    times = cell_times({"a": a, "b": b}, store)
    assert times["a"] == {"cells": 2, "timed": 2, "core_hours": 2.0, "longest_seconds": 3600.0,
                          "first_start": "2027-01-15T08:00:00Z",
                          "last_finish": "2027-01-15T09:30:00Z"}
    assert times["b"]["cells"] == 2 and times["b"]["timed"] == 1
    assert times["b"]["core_hours"] == pytest.approx(60 / 3600, abs=1e-4)
    assert times["all"]["timed"] == 3 and times["all"]["last_finish"] == "2027-01-15T10:00:00Z"


def test_a_cell_stored_without_seconds_is_not_timed(tmp_path):
    store = CellStore(tmp_path)
    cell = _stored(store, "a", "one", None, 1_800_000_000.0)
    times = cell_times({"a": [cell]}, store)
    assert times["a"] == {"cells": 1, "timed": 0, "core_hours": 0.0, "longest_seconds": None,
                          "first_start": None, "last_finish": None}


def test_the_cells_block_renders_each_suite_and_the_total(tmp_path):
    store = CellStore(tmp_path)
    cell = _stored(store, "a", "one", 7200.0, 1_800_000_000.0 + 7200)
    data = {"cells": cell_times({"a": [cell], "b": [Cell("b", "x", _work, {"x": 1})]}, store)}
    body = render(data, "cells")
    assert "| a | 1 | 2.00 | 7200 | 2027-01-15 08:00:00Z – 2027-01-15 10:00:00Z |" in body
    assert "| b | 0 of 1 | 0.00 | — | — |" in body
    assert body.splitlines()[-1].startswith("| **all** | 2 | 2.00 |")
    assert "predates the cell times" in render({"claims": []}, "cells")


def test_report_json_keeps_the_cell_times_and_the_schema_accepts_them(tmp_path):
    jsonschema = pytest.importorskip("jsonschema")
    from importlib.resources import files

    from tokengeo.experiments.summary import report_json

    store = CellStore(tmp_path)
    cell = _stored(store, "a", "one", 10.0, 1_800_000_000.0)
    data = report_json([], "quick", "0", None, cells=cell_times({"a": [cell]}, store))
    schema = json.loads(files("tokengeo.experiments").joinpath("report.schema.json")
                        .read_text())
    jsonschema.validate(data, schema)
    assert data["cells"]["a"]["core_hours"] == pytest.approx(10 / 3600, abs=1e-4)
    bad = {**data, "cells": {"a": {**data["cells"]["a"], "core_hours": -1}}}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)
