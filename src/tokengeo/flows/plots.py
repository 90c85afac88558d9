"""Figures of a flow run: sphere snapshots, E(t), G^2(t), the energy balance, the H-scaling fit.

matplotlib is imported inside each function (``tokengeo._deps.require``), with the Agg backend.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tokengeo._deps import require
from tokengeo.errors import ConfigError
from tokengeo.flows.diagnostics import PowerLawFit
from tokengeo.flows.simulate import FlowResult


def _pyplot():
    mpl = require("matplotlib")
    mpl.use("Agg")
    return require("matplotlib.pyplot")


def _snapshot_indices(n_records: int, k: int) -> list[int]:
    return sorted({round(i) for i in np.linspace(0, n_records - 1, k)})


def plot_snapshots(result: FlowResult, path: str | Path, *, n_snapshots: int = 6, run: int = 0):
    """Tokens of one path at evenly spaced recorded times (first 3 coordinates if d > 3)."""
    if result.x is None:
        raise ConfigError("snapshots need a trajectory: simulate(..., record_trajectory=True)")
    plt = _pyplot()
    x = result.x[run].numpy()  # (R, n, d)
    idx = _snapshot_indices(x.shape[0], n_snapshots)
    three_d = x.shape[-1] >= 3
    fig = plt.figure(figsize=(3.2 * len(idx), 3.4))
    for k, r in enumerate(idx):
        ax = fig.add_subplot(1, len(idx), k + 1, projection="3d" if three_d else None)
        if three_d:
            u, v = np.mgrid[0 : 2 * np.pi : 30j, 0 : np.pi : 15j]
            ax.plot_wireframe(np.cos(u) * np.sin(v), np.sin(u) * np.sin(v), np.cos(v),
                              color="0.85", linewidth=0.3)
            ax.scatter(x[r, :, 0], x[r, :, 1], x[r, :, 2], s=4, c="C0", depthshade=False)
            ax.set_box_aspect((1, 1, 1))
            ax.set_axis_off()
        else:
            theta = np.linspace(0, 2 * np.pi, 200)
            ax.plot(np.cos(theta), np.sin(theta), color="0.8", linewidth=0.5)
            ax.scatter(x[r, :, 0], x[r, :, 1], s=4, c="C0")
            ax.set_aspect("equal")
            ax.set_axis_off()
        ax.set_title(f"t = {float(result.t[r]):.2f}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _band(ax, t, series, label, color):
    mean, std = series.mean(0), series.std(0) if series.shape[0] > 1 else 0 * series[0]
    ax.plot(t, mean, color=color, label=label)
    ax.fill_between(t, mean - std, mean + std, color=color, alpha=0.2, linewidth=0)


def plot_series(result: FlowResult, name: str, path: str | Path, *, log: bool = False):
    """One recorded series (``"E"``, ``"G2"``, ...): mean over paths +- one std."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(5.5, 3.5))
    _band(ax, result.t.numpy(), getattr(result, name).numpy(), name, "C0")
    ax.set_xlabel("t (depth)")
    ax.set_ylabel(name)
    if log:
        ax.set_yscale("log")
    ax.set_title(f"{name}(t), {result.config.get('n_heads')} heads, "
                 f"{result.config.get('n_paths')} paths", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_balance(result: FlowResult, path: str | Path):
    """Every term of the discrete energy balance over time (means over paths +- std)."""
    if not result.energy_defined:
        raise ConfigError("the energy balance is undefined for general (non-symmetric) heads")
    plt = _pyplot()
    t = result.t.numpy()
    terms = {
        "E(t) - E(0)": (result.E - result.E[:, :1]),
        "int dE/dt|x": result.dE_int,
        "Ito correction": result.ito_int,
        "- int G^2": -result.G2_int,
        "martingale": result.mart_int,
        "residual": result.residual,
    }
    fig, ax = plt.subplots(figsize=(6, 3.8))
    for k, (label, series) in enumerate(terms.items()):
        _band(ax, t, series.numpy(), label, f"C{k}")
    ax.axhline(0, color="0.5", linewidth=0.5)
    ax.set_xlabel("t (depth)")
    ax.legend(fontsize=7, ncol=2)
    ax.set_title("energy balance: E_T - E_0 = dE + Ito - G^2 + M + residual", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_scaling(fit: PowerLawFit, path: str | Path, *, title: str = ""):
    """Path means of the time-averaged G^2 against H (log-log), with the fitted power law."""
    plt = _pyplot()
    h = np.asarray(fit.heads, dtype=float)
    mean, std, n = (np.asarray(v, dtype=float) for v in (fit.mean, fit.std, fit.n_paths))
    fig, ax = plt.subplots(figsize=(4.8, 3.6))
    ax.errorbar(h, mean, yerr=std / np.sqrt(n), fmt="o", capsize=3,
                label="mean over paths (± s.e.)")
    hh = np.geomspace(h.min(), h.max(), 50)
    ax.plot(hh, fit.prefactor * hh**fit.exponent, "--",
            label=f"b = {fit.exponent:.2f} [{fit.ci_low:.2f}, {fit.ci_high:.2f}]")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("heads H")
    ax.set_ylabel("avg G^2 over [T/2, T]")
    ax.legend(fontsize=8)
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def save_gif(result: FlowResult, path: str | Path, *, run: int = 0, frames: int = 60):
    """Animated sphere of one path (3D; first 3 coordinates), written with Pillow."""
    if result.x is None or result.x.shape[-1] < 3:
        raise ConfigError("a GIF needs a recorded trajectory with d >= 3")
    plt = _pyplot()
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
