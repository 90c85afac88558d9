"""A figure that cannot be drawn (matplotlib missing, a plotting error) never costs a
reproduce cell or a report its numbers."""

from __future__ import annotations

import json
import sys

import pytest

from tokengeo.errors import MissingDependencyError
from tokengeo.experiments.cells import (
    FIGURE_ERROR,
    Cell,
    CellStore,
    draw_figures,
    figure_notes,
)
from tokengeo.experiments.claims import Claim
from tokengeo.experiments.report import SuiteOutput, render_html, render_markdown
from tokengeo.experiments.stats import Region, mean_interval

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture
def no_matplotlib(monkeypatch):
    """matplotlib looks uninstalled: importing it raises ImportError."""
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)


def _failing_plot():
    raise MissingDependencyError("optional dependency 'matplotlib' is not installed; "
                                 "install it with: pip install 'tokengeo[plot]'")


def _cell_with_failing_figure(x: float) -> dict:
    return draw_figures({"number": x * 2}, _failing_plot)


def _run(store: CellStore, cell: Cell):
    """Run one cell the way ``tokengeo reproduce`` does (serially) and return its result."""
    from tokengeo.experiments.executors import ExecutorConfig
    from tokengeo.experiments.reproduce import compute_cells

    results = compute_cells([cell], store, ExecutorConfig("serial"), log=lambda m: None)
    return results[cell.suite, cell.key]


def test_draw_figures_keeps_the_numbers():
    value = draw_figures({"number": 1.0}, _failing_plot)
    assert value["number"] == 1.0 and value["figures"] == []
    assert "tokengeo[plot]" in value[FIGURE_ERROR]
    ok = draw_figures({"number": 1.0}, lambda: ["a.png"])
    assert ok == {"number": 1.0, "figures": ["a.png"]}


def test_cell_with_failing_figure_keeps_its_numbers_and_is_redrawn_later(tmp_path):
    store = CellStore(tmp_path)
    cell = Cell("demo", "c", _cell_with_failing_figure, {"x": 3.0})
    res = _run(store, cell)
    assert res.not_run is None and res.value["number"] == 6.0
    assert "tokengeo[plot]" in res.figure_error
    assert json.loads(store.path(cell).read_text())["value"]["number"] == 6.0  # stored
    assert store.load(cell) is None  # recomputed on the next run, to draw the figures
    assert figure_notes({"c": res}) == [f"Figures of c not drawn: {res.figure_error}"]


def test_flow_cell_without_matplotlib_keeps_its_numbers(tmp_path, no_matplotlib):
    from tokengeo.experiments.suites.flows import flow_cell

    cell = Cell("flows", "ou-H2", flow_cell,
                {"preset": "s2-ou", "n_heads": 2, "figure_dir": str(tmp_path / "figs"),
                 "overrides": {"T": 0.1, "n_paths": 2, "record_every": 2}})
    res = _run(CellStore(tmp_path), cell)
    assert res.not_run is None, res.not_run
    assert len(res.value["summary"]["g2_avg"]) == 2
    assert res.value["figures"] == [] and "tokengeo[plot]" in res.figure_error


def test_suite_figure_failure_becomes_a_note(tmp_path, no_matplotlib):
    from tokengeo.experiments.sweep import line_figure

    claim = Claim("demo", "x rises", "src", "yes", "x", Region.above(0),
                  measured=mean_interval([1.0, 1.2]))
    out = SuiteOutput("demo", "Demo", "paper", [claim])
    out.add_figure(line_figure, tmp_path / "x.png", [0, 1], {"x": [[1.0, 1.1], [1.2, 1.3]]},
                   "k", "x", "title")
    assert out.figures == []
    assert len(out.notes) == 1 and "tokengeo[plot]" in out.notes[0]
    html = render_html([out], "t", [], tmp_path)
    assert "reproduced" in html and "tokengeo[plot]" in html


def test_report_names_a_missing_figure_file(tmp_path):
    out = SuiteOutput("demo", "Demo", "paper", [], figures=[tmp_path / "figures" / "gone.png"])
    assert "gone.png not found" in render_html([out], "t", [], tmp_path)
    assert "gone.png" in render_markdown([out], "t", [], tmp_path)
