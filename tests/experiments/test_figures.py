"""Figures fit for a paper, checked on the Figure objects the plot
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


# --- head-output similarity -----------------------------------------------------------------


def _similarity_plots():
    from tokengeo.probes.similarity import plots

    return plots


def _fake_similarity(L=3, H=12, T=16):
    from types import SimpleNamespace

    g = torch.Generator().manual_seed(0)
    scale = torch.logspace(-2, 0, L * H).reshape(L, H, 1, 1)  # heads differ 100x in size
    return SimpleNamespace(
        n_layers=L, n_heads=H, n_samples=5, seq_len=T,
        mean_similarity=scale * torch.randn(L, H, T, T, generator=g),
        distance_profile=torch.randn(L, H, T - 1, generator=g),
        within_sentence_share=torch.rand(L, H, generator=g),
        within_sentence_chance_distance_matched=torch.rand(L, H, generator=g),
        within_sentence_chance=0.3)


def test_similarity_heat_maps_use_one_sequential_scale_per_layer():
    r = _fake_similarity()
    r.mean_similarity = r.mean_similarity.abs() * torch.tensor([1.0, 10.0, 100.0]).view(
        3, 1, 1, 1)  # positive, growing with depth: one diverging scale would hide layer 0
    fig = _similarity_plots().mean_similarity_figure(r)
    images = [im for ax in fig.axes for im in ax.get_images()]
    assert len(images) == 3 * 12
    rows = [images[12 * l: 12 * (l + 1)] for l in range(3)]
    for l, row in enumerate(rows):
        limits = {(im.norm.vmin, im.norm.vmax) for im in row}
        assert len(limits) == 1, f"layer {l}: {len(limits)} colour scales"
        (vmin, vmax), = limits
        off = r.mean_similarity[l][:, ~torch.eye(16, dtype=torch.bool)]
        assert float(off.min()) <= vmin < vmax <= float(off.max())  # fits the layer's data
        assert row[0].get_cmap().name.startswith("viridis")  # sequential
    assert rows[0][0].norm.vmax < rows[2][0].norm.vmax / 10  # layers scaled separately
    bars = [ax for ax in fig.axes if ax.get_label() == "<colorbar>"]
    assert len(bars) == 3
    assert "per layer" in fig._suptitle.get_text()
    assert_paper_ready(fig)


def test_similarity_profiles_of_many_heads_use_a_colormap_and_a_key():
    fig = _similarity_plots().distance_profiles_figure(_fake_similarity(H=12))
    lines = fig.axes[0].get_lines()
    assert len(lines) == 12
    assert len({tuple(matplotlib.colors.to_rgba(ln.get_color())) for ln in lines}) == 12
    assert any(ax.get_label() == "<colorbar>" for ax in fig.axes), "no key to the head colours"
    assert_paper_ready(fig)


def test_similarity_profiles_of_few_heads_have_a_legend():
    fig = _similarity_plots().distance_profiles_figure(_fake_similarity(L=2, H=4))
    legend = fig.axes[0].get_legend()
    assert legend is not None and [t.get_text() for t in legend.get_texts()] == [
        "h0", "h1", "h2", "h3"]
    assert_paper_ready(fig)


def test_within_sentence_has_integer_layer_ticks():
    fig = _similarity_plots().within_sentence_figure(_fake_similarity(L=6))
    fig.canvas.draw()
    assert_integer_ticks(fig.axes[0].xaxis)
    assert_paper_ready(fig)


def test_similarity_save_figures_writes_three_pngs(tmp_path):
    paths = _similarity_plots().save_figures(_fake_similarity(L=2, H=3, T=8), tmp_path)
    assert [p.name for p in paths] == ["mean_similarity.png", "distance_profiles.png",
                                       "within_sentence.png"]
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in paths)


# --- suites and DINO -----------------------------------------------------------------------


def test_suite_line_plot_has_integer_k_ticks_and_names_its_bars():
    from tokengeo.experiments.sweep import line_plot

    series = {"k-NN": [[0.5, 0.52, 0.55], [0.6, 0.61, 0.58], [0.62, 0.6, 0.64]],
              "linear": [[0.4, 0.41, 0.45], [0.5, 0.49, 0.52], [0.55, 0.53, 0.56]]}
    fig = line_plot([0, 1, 3], series, "Laplacian heads per layer (k)", "test accuracy",
                    "frozen-feature accuracy")
    fig.canvas.draw()
    assert_integer_ticks(fig.axes[0].xaxis)
    text = assert_paper_ready(fig)
    assert "± std over 3 seeds" in text


def test_dino_pca_figure_is_paper_ready():
    from tokengeo.dino.segmentation import pca_figure

    images = torch.randint(0, 255, (8, 1, 28, 28), dtype=torch.uint8)
    rows = {f"k={k}": torch.randn(8, 16, 12) for k in (0, 2, 4)}
    fig = pca_figure(images, rows, 4, "first 3 principal components of patch tokens (RGB)")
    assert len([ax for ax in fig.axes if ax.get_images()]) == 8 * 4
    assert_paper_ready(fig)
