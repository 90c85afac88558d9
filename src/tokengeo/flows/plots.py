"""Figures of a flow run: sphere snapshots, E(t), G^2(t), the energy balance, the H-scaling fit.

``*_figure`` build a matplotlib Figure; ``plot_*`` write it as PNG (``tokengeo.plotting``,
which imports matplotlib when first used, with the Agg backend).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from tokengeo._deps import require
from tokengeo.errors import ConfigError
from tokengeo.flows.diagnostics import PowerLawFit
from tokengeo.flows.simulate import FlowResult
from tokengeo.plotting import MIN_FONT_PT, integer_ticks, new_figure, pyplot, save_figure

SNAPSHOT_COLUMNS = 3  # snapshots per row: six panels fit the report's width readably


def _snapshot_indices(n_records: int, k: int) -> list[int]:
    return sorted({round(i) for i in np.linspace(0, n_records - 1, k)})


def _paths_text(n: int) -> str:
    return f"mean ± std over {n} paths" if n > 1 else "1 path (no band)"


def snapshots_figure(result: FlowResult, *, n_snapshots: int = 6, run: int = 0):
    """Tokens of one path at evenly spaced recorded times (first 3 coordinates if d > 3),
    in rows of :data:`SNAPSHOT_COLUMNS` panels."""
    if result.x is None:
        raise ConfigError("snapshots need a trajectory: simulate(..., record_trajectory=True)")
    x = result.x[run].numpy()  # (R, n, d)
    idx = _snapshot_indices(x.shape[0], n_snapshots)
    three_d = x.shape[-1] >= 3
    cols = min(len(idx), SNAPSHOT_COLUMNS)
    rows = -(-len(idx) // cols)
    fig, axes = new_figure(3.0 * cols, 3.1 * rows, rows, cols,
                           **({"projection": "3d"} if three_d else {}))
    for k, ax in enumerate(axes.flat):
        if k >= len(idx):  # removed, not hidden: a hidden 3D axis breaks the layout's bbox
            ax.remove()
            continue
        r = idx[k]
        if three_d:
            u, v = np.mgrid[0 : 2 * np.pi : 30j, 0 : np.pi : 15j]
            ax.plot_wireframe(np.cos(u) * np.sin(v), np.sin(u) * np.sin(v), np.cos(v),
                              color="0.85", linewidth=0.3)
            ax.scatter(x[r, :, 0], x[r, :, 1], x[r, :, 2], s=6, c="C0", depthshade=False)
            ax.set_box_aspect((1, 1, 1), zoom=1.25)
        else:
            theta = np.linspace(0, 2 * np.pi, 200)
            ax.plot(np.cos(theta), np.sin(theta), color="0.8", linewidth=0.5)
            ax.scatter(x[r, :, 0], x[r, :, 1], s=6, c="C0")
            ax.set_aspect("equal")
        ax.set_axis_off()
        ax.set_title(f"t = {float(result.t[r]):.2f}", fontsize=11)
    fig.suptitle(f"{x.shape[1]} tokens on the sphere, path {run}", fontsize=11)
    return fig


def plot_snapshots(result: FlowResult, path: str | Path, *, n_snapshots: int = 6,
                   run: int = 0) -> Path:
    """Write :func:`snapshots_figure` as PNG."""
    return save_figure(snapshots_figure(result, n_snapshots=n_snapshots, run=run), path)


def _band(ax, t, series, label, color):
    mean, std = series.mean(0), series.std(0) if series.shape[0] > 1 else 0 * series[0]
    ax.plot(t, mean, color=color, label=label)
    ax.fill_between(t, mean - std, mean + std, color=color, alpha=0.2, linewidth=0)


def series_figure(result: FlowResult, name: str, *, log: bool = False):
    """One recorded series (``"E"``, ``"G2"``, ...): mean over paths, band ± one std."""
    fig, axes = new_figure(5.5, 3.6)
    ax = axes[0, 0]
    series = getattr(result, name).numpy()  # (P, R)
    _band(ax, result.t.numpy(), series, f"{name}: {_paths_text(series.shape[0])}", "C0")
    ax.set_xlabel("t (depth)")
    ax.set_ylabel(name)
    if log:
        ax.set_yscale("log")
    ax.legend(fontsize=MIN_FONT_PT)
    ax.set_title(f"{name}(t), {result.config.get('n_heads')} heads", fontsize=10)
    return fig


def plot_series(result: FlowResult, name: str, path: str | Path, *, log: bool = False) -> Path:
    """Write :func:`series_figure` as PNG."""
    return save_figure(series_figure(result, name, log=log), path)


def balance_figure(result: FlowResult):
    """Every term of the discrete energy balance over time (means over paths, bands ± std)."""
    if not result.energy_defined:
        raise ConfigError("the energy balance is undefined for general (non-symmetric) heads")
    t = result.t.numpy()
    terms = {
        "E(t) - E(0)": (result.E - result.E[:, :1]),
        "int dE/dt|x": result.dE_int,
        "Ito correction": result.ito_int,
        "- int G^2": -result.G2_int,
        "martingale": result.mart_int,
        "residual": result.residual,
    }
    fig, axes = new_figure(6.5, 4.2)
    ax = axes[0, 0]
    for k, (label, series) in enumerate(terms.items()):
        _band(ax, t, series.numpy(), label, f"C{k}")
    ax.axhline(0, color="0.5", linewidth=0.5)
    ax.set_xlabel("t (depth)")
    ax.legend(fontsize=MIN_FONT_PT, ncol=2, title=_paths_text(result.E.shape[0]),
              title_fontsize=MIN_FONT_PT)
    ax.set_title("energy balance: E_T - E_0 = dE + Ito - G^2 + M + residual", fontsize=10)
    return fig


def plot_balance(result: FlowResult, path: str | Path) -> Path:
    """Write :func:`balance_figure` as PNG."""
    return save_figure(balance_figure(result), path)


def scaling_figure(fit: PowerLawFit, *, title: str = ""):
    """Path means of the time-averaged G^2 against H (log-log, ticks at the H run), error
    bars ± one standard error, with the fitted power law and its bootstrap interval."""
    h = np.asarray(fit.heads, dtype=float)
    mean, std, n = (np.asarray(v, dtype=float) for v in (fit.mean, fit.std, fit.n_paths))
    fig, axes = new_figure(5.0, 3.8)
    ax = axes[0, 0]
    ax.errorbar(h, mean, yerr=std / np.sqrt(n), fmt="o", capsize=3,
                label="mean over paths, bars ± s.e.")
    hh = np.geomspace(h.min(), h.max(), 50)
    ax.plot(hh, fit.prefactor * hh**fit.exponent, "--",
            label=f"b = {fit.exponent:.2f} [{fit.ci_low:.2f}, {fit.ci_high:.2f}] "
                  f"({fit.level:.0%} bootstrap)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    integer_ticks(ax.xaxis, fit.heads)
    ax.set_xlabel("heads H")
    ax.set_ylabel("avg G^2 over [T/2, T]")
    ax.legend(fontsize=MIN_FONT_PT)
    if title:
        ax.set_title(title, fontsize=10)
    return fig


def plot_scaling(fit: PowerLawFit, path: str | Path, *, title: str = "") -> Path:
    """Write :func:`scaling_figure` as PNG."""
    return save_figure(scaling_figure(fit, title=title), path)


def save_gif(result: FlowResult, path: str | Path, *, run: int = 0, frames: int = 60):
    """Animated sphere of one path (3D; first 3 coordinates), written with Pillow."""
    if result.x is None or result.x.shape[-1] < 3:
        raise ConfigError("a GIF needs a recorded trajectory with d >= 3")
    plt = pyplot()
    animation = require("matplotlib.animation")
    x = result.x[run].numpy()
    idx = _snapshot_indices(x.shape[0], frames)
    fig = plt.figure(figsize=(4, 4))
    ax = fig.add_subplot(projection="3d")

    def draw(k):
        ax.clear()
        ax.scatter(x[idx[k], :, 0], x[idx[k], :, 1], x[idx[k], :, 2], s=4, depthshade=False)
        ax.set_xlim(-1, 1), ax.set_ylim(-1, 1), ax.set_zlim(-1, 1)
        ax.set_box_aspect((1, 1, 1))
        ax.set_axis_off()
        ax.set_title(f"t = {float(result.t[idx[k]]):.2f}", fontsize=9)

    anim = animation.FuncAnimation(fig, draw, frames=len(idx))
    anim.save(str(path), writer=animation.PillowWriter(fps=10))
    plt.close(fig)


def g2_by_heads_figure(t, g2_by_heads: dict[int, np.ndarray], *, title: str = ""):
    """G^2(t) for every H of a sweep (log scale): path means, bands ± one std over paths.
    ``g2_by_heads`` maps H to its (P, R) series on the record times ``t`` (R,)."""
    fig, axes = new_figure(6.0, 4.0)
    ax = axes[0, 0]
    for k, (H, series) in enumerate(sorted(g2_by_heads.items())):
        series = np.asarray(series, dtype=float)
        mean = series.mean(0)
        std = series.std(0) if series.shape[0] > 1 else 0 * mean
        color = pyplot().cm.viridis(k / max(1, len(g2_by_heads) - 1))
        ax.plot(t, mean, color=color, label=f"H={H}")
        ax.fill_between(t, np.maximum(mean - std, mean * 1e-3), mean + std, color=color,
                        alpha=0.2, linewidth=0)
    ax.set_yscale("log")
    ax.set_xlabel("t (depth)")
    ax.set_ylabel("G^2")
    ax.legend(fontsize=MIN_FONT_PT, ncol=2)
    ax.set_title(title or "G^2(t) by H", fontsize=10)
    return fig


def sweep_fits_figure(fits, *, title: str = ""):
    """Path means of avg G^2 against H (log-log) with the log-log OLS line, the authors'
    linear-space fit on their three H, and the local slopes between consecutive H."""
    h, mean = np.asarray(fits.heads, float), np.asarray(fits.means, float)
    fig, axes = new_figure(8.0, 3.6, 1, 2)
    ax, ax2 = axes[0, 0], axes[0, 1]
    ax.plot(h, mean, "o", label="mean over paths")
    hh = np.geomspace(h.min(), h.max(), 50)
    b = fits.loglog_b.value
    c = math.exp(np.mean(np.log(mean) - b * np.log(h)))
    ax.plot(hh, c * hh**b, "--", label=f"log-log OLS b = {b:.2f}")
    ph = np.asarray(fits.paper_heads, float)
    pm = np.asarray([fits.means[fits.heads.index(k)] for k in fits.paper_heads])
    bl = fits.paper_linear_b
    a = float((pm * ph**bl).sum() / (ph ** (2 * bl)).sum())  # least-squares a for that b
    ax.plot(hh, a * hh**bl, ":", label=f"linear fit on H={fits.paper_heads}: b = {bl:.2f}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    integer_ticks(ax.xaxis, fits.heads)
    ax.set_xlabel("heads H")
    ax.set_ylabel("avg G^2 over [T/2, T]")
    ax.legend(fontsize=MIN_FONT_PT)
    mid = [math.sqrt(s["h0"] * s["h1"]) for s in fits.local]
    slope = np.asarray([s["slope"] for s in fits.local])
    err = np.asarray([[s["slope"] - s["lo"] for s in fits.local],
                      [s["hi"] - s["slope"] for s in fits.local]])
    ax2.errorbar(mid, slope, yerr=err, fmt="o", capsize=3)
    ax2.axhline(0, color="0.5", linewidth=0.5)
    ax2.axhline(-1, color="0.5", linewidth=0.5, linestyle="--")
    ax2.set_xscale("log")
    ax2.set_xlabel("H (geometric midpoint)")
    ax2.set_ylabel("local slope d log G^2 / d log H")
    if title:
        fig.suptitle(title, fontsize=10)
    return fig


def plot_g2_by_heads(t, g2_by_heads, path: str | Path, *, title: str = "") -> Path:
    """Write :func:`g2_by_heads_figure` as PNG."""
    return save_figure(g2_by_heads_figure(t, g2_by_heads, title=title), path)


def plot_sweep_fits(fits, path: str | Path, *, title: str = "") -> Path:
    """Write :func:`sweep_fits_figure` as PNG."""
    return save_figure(sweep_fits_figure(fits, title=title), path)
