"""``curves.png``: the training loss and every validation metric of a run against step.

Drawn from ``metrics.jsonl`` at the end of every run. The training loss is shown raw
(thin) and as a trailing moving average over ``window`` logged steps (thick); the figure
says so. Validation metrics are single evaluations (no bands: one run, one seed).
matplotlib is optional: without it the figure is skipped and the reason returned.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tokengeo._deps import require
from tokengeo.errors import MissingDependencyError

# fields of evaluation records that are counts, not metrics
COUNT_FIELDS = ("step", "examples", "tokens")


@dataclass
class CurvesResult:
    path: str | None  # the PNG, or None when skipped
    skipped: str | None = None  # why it was skipped


def moving_average(values: Sequence[float], window: int) -> np.ndarray:
    """Trailing mean ``m_i = mean(v_max(0, i-w+1) .. v_i)`` (shorter at the start)."""
    v = np.asarray(values, dtype=float)
    c = np.concatenate([[0.0], np.cumsum(v)])
    i = np.arange(1, len(v) + 1)
    lo = np.maximum(0, i - window)
    return (c[i] - c[lo]) / (i - lo)


def eval_series(records: list[dict[str, Any]], split: str = "val") -> dict[str, tuple]:
    """``{metric: (steps, values)}`` of the ``split`` evaluations (periodic and final)."""
    series: dict[str, tuple[list, list]] = {}
    for r in records:
        if r.get("split") != split:
            continue
        for k, v in r.items():
            if k in COUNT_FIELDS or isinstance(v, bool) or not isinstance(v, int | float):
                continue
            steps, values = series.setdefault(k, ([], []))
            steps.append(r["step"])
            values.append(float(v))
    return series


def plot_curves(records: list[dict[str, Any]], path: Path, *, title: str = "",
                window: int = 20) -> CurvesResult:
    """Write the figure to ``path`` (or return why it was skipped)."""
    try:
        mpl = require("matplotlib")
        mpl.use("Agg")
        plt = require("matplotlib.pyplot")
    except MissingDependencyError:
        return CurvesResult(None, "matplotlib is not installed; install it with: "
                                  "pip install 'tokengeo[plot]'")
    train = [r for r in records if r.get("split") == "train" and "loss" in r]
    val = eval_series(records, "val")
    panels = 1 + len(val)
    fig, axes = plt.subplots(1, panels, figsize=(4.2 * panels, 3.4), squeeze=False)
    ax = axes[0, 0]
    steps = [r["step"] for r in train]
    losses = [r["loss"] for r in train]
    w = max(1, min(window, len(losses) // 5 or 1))
    ax.plot(steps, losses, lw=0.6, alpha=0.45, color="C0", label="raw (per logged step)")
    if w > 1:
        ax.plot(steps, moving_average(losses, w), lw=1.6, color="C0",
                label=f"trailing mean of {w} logged steps")
    ax.set(xlabel="step", ylabel="training loss", title="training loss")
    ax.legend(fontsize=7)
    for ax, (name, (s, v)) in zip(axes[0, 1:], val.items(), strict=True):
        ax.plot(s, v, "o-", ms=3, color="C1")
        ax.set(xlabel="step", ylabel=name, title=f"validation {name}")
    fig.suptitle(f"{title}\nlines: single run, no error bands; "
                 "validation points: one evaluation each", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return CurvesResult(str(path))
