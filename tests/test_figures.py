"""Figures fit for a paper (issue #13, items 8 and 9), checked on the Figure objects the plot
functions return: no clipped text, fits the report's width with readable fonts, bands and
error bars named in the figure, integer ticks on integer axes, one colour scale per heat-map
figure with a colour bar, a colour map and a key for more than 10 per-head curves."""

from __future__ import annotations

import re

import pytest
import torch

pytest.importorskip("matplotlib", reason="figures need matplotlib (pip install 'tokengeo[plot]')")

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.text import Text  # noqa: E402

from tokengeo.plotting import MAX_WIDTH_IN, MIN_FONT_PT  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")

BAND = re.compile(r"±\s*(std|s\.e\.)|95\s*%|bootstrap")


def _texts(fig) -> list[Text]:
    fig.canvas.draw()
    out = []
    for t in fig.findobj(Text):
        if not (t.get_visible() and t.get_text().strip()):
            continue
        if t.axes is not None and not t.axes.get_visible():
            continue
        out.append(t)
    return out


def assert_paper_ready(fig) -> str:
    """No text outside the figure, width within the report column, fonts >= MIN_FONT_PT;
    returns all the figure's text (for further checks)."""
    try:
        w, h = fig.get_size_inches()
        assert w <= MAX_WIDTH_IN + 1e-6, f"figure {w:.1f} in wide, report column {MAX_WIDTH_IN:.1f}"
        texts = _texts(fig)  # draws the figure
        drawn = fig.get_tightbbox(fig.canvas.get_renderer())  # inches, every drawn artist
        assert drawn.x0 >= -0.01 and drawn.y0 >= -0.01, f"clipped at the left/bottom: {drawn}"
        assert drawn.x1 <= w + 0.01 and drawn.y1 <= h + 0.01, f"clipped at the right/top: {drawn}"
        for t in texts:
            assert t.get_fontsize() >= MIN_FONT_PT, f"{t.get_text()!r} at {t.get_fontsize()} pt"
        return "\n".join(t.get_text() for t in texts)
    finally:
        plt.close(fig)


def _tick_values(axis) -> list[float]:
    lo, hi = sorted(axis.get_view_interval())
    return [v for v in axis.get_majorticklocs() if lo - 1e-9 <= v <= hi + 1e-9]


def assert_integer_ticks(axis) -> None:
    ticks = _tick_values(axis)
    assert ticks, "no ticks in view"
    assert all(abs(v - round(v)) < 1e-9 for v in ticks), f"non-integer ticks {ticks}"


# --- flows --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def flow_run():
    from tokengeo.flows.presets import get_preset
    from tokengeo.flows.scaling import run_h_scaling

    preset = get_preset("s2-ou", T=0.1, n_paths=3, record_every=2, n_heads=2)
    return run_h_scaling(preset, (1, 2, 4), trajectory_for=2)


def test_flow_snapshots_fit_the_report_width(flow_run):
    from tokengeo.flows.plots import snapshots_figure

    fig = snapshots_figure(flow_run.results[2])
    titles = [ax.get_title() for ax in fig.axes if ax.get_visible()]
    assert len([t for t in titles if t.startswith("t = ")]) == 6
    assert_paper_ready(fig)


@pytest.mark.parametrize("name", ["E", "G2"])
def test_flow_series_names_its_band(flow_run, name):
    from tokengeo.flows.plots import series_figure

    text = assert_paper_ready(series_figure(flow_run.results[2], name, log=name == "G2"))
    assert "± std over 3 paths" in text


def test_flow_balance_names_its_band(flow_run):
    from tokengeo.flows.plots import balance_figure

    text = assert_paper_ready(balance_figure(flow_run.results[2]))
    assert "± std over 3 paths" in text


def test_flow_scaling_has_integer_head_ticks_and_names_its_bars(flow_run):
    from tokengeo.flows.plots import scaling_figure

    fig = scaling_figure(flow_run.fit, title="s2-ou")
    fig.canvas.draw()
    ax = fig.axes[0]
    assert_integer_ticks(ax.xaxis)
    assert set(_tick_values(ax.xaxis)) == {1, 2, 4}
    text = assert_paper_ready(fig)
    assert "± s.e." in text and "bootstrap" in text
