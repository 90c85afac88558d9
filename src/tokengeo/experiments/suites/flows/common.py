"""What every part of the flows suite shares: the paper, the drifts, the thresholds, and the
readers of finished cells."""

from __future__ import annotations

from tokengeo.experiments.cells import CellResult
from tokengeo.experiments.stats import Interval, mean_interval

TITLE = "Transformer PDE: multi-head attention as a time-dependent Wasserstein gradient flow"
PAPER = ("Massucco, Del Grande, Carioni, Brune, Schönlieb, \"Multi-Headed Transformer "
         "Architectures as Time-dependent Wasserstein Gradient Flows\", arXiv 2605.18870")
PAPER_KEY = "Massucco et al. (Transformer PDE)"
SOURCE = "Massucco et al. 2026, Sec. 6 (S² experiment)"
THEORY_SOURCE = "Massucco et al. 2026, Sec. 3–5 (energy identity, stability, Γ-convergence)"
DRIFTS = {"ou": "s2-ou", "inphase": "s2-oscillating-inphase", "oscillating": "s2-oscillating"}
DRIFT_LABEL = {"ou": "OU weights", "inphase": "in-phase oscillating weights (496b2f6)",
               "oscillating": "per-head oscillating weights (693474c)"}
CONTROLS = {  # cell prefix -> (preset, preset field changes)
    "attractive": ("s2-attractive", {}),  # static, attractive: the tokens cluster
    "ou-quiet": ("s2-ou", {"noise_var": 0.0}),  # OU without noise: D_h -> I, integrable
}
CONTROL_LABEL = {"attractive": "static attractive control (frozen D_h = -(I + Z Z^T/d))",
                 "ou-quiet": "OU weights without noise (integrable: D_h → I)"}
LONG_PRESET = "s2-oscillating"  # the per-head drift whose settling the long run decides
FIELDS = ("summary", "t", "G2", "E_mean", "figures")  # what flow_cell returns

# Thresholds of the claims, each with the margin a measurement must clear it by (applied by
# the verdict through Region's margin).
CLUSTERED_COSINE = 0.9  # mean <x_i, x_j> at T above this: the tokens clustered
SPREAD_COSINE = 0.5  # below this: they did not
COSINE_MARGIN = 0.05
STATIONARY_RELATIVE = 0.1  # tangential share of grad E below this: near a stationary point
STATIONARY_MARGIN = 0.02
# W_2(mu_{T/2}, mu_T) (radians, geodesic): above this the cloud still moves (never settles),
# below it the cloud has settled; one threshold for both, so the two are disjoint
MOVING_W2 = 0.1  # 5.7 degrees over the whole second half
MOVING_MARGIN = 0.02


def deterministic(p) -> bool:
    """Every path of the preset ``p`` is the same run: no weight noise and one shared
    initial state."""
    return p.noise_var == 0 and not p.per_path_weights


def finished(results: dict[str, CellResult], key: str, needs: str = "stationarity_T"
             ) -> tuple[dict | None, str | None]:
    """(summary, None) of a finished flow cell, or (None, why it is missing)."""
    r = results.get(key)
    if r is None or r.value is None:
        return None, "cell missing" if r is None else r.not_run
    if needs not in r.value["summary"]:
        return None, f"cell {key} has no {needs!r} (computed by an older tokengeo): rerun it"
    return r.value["summary"], None


def per_path(values: list[float]) -> Interval:
    """Exact for one deterministic run, else the mean over Monte Carlo paths."""
    return Interval.exact_value(float(values[0]), "deterministic") if len(values) == 1 \
        else mean_interval(values)


def mean(xs: list[float]) -> float:
    return sum(xs) / len(xs)


def per_heads(results: dict[str, CellResult], name: str, heads: list[int], key: str) -> str:
    """``H=1: 0.123, H=16: 0.0456``: the path mean of ``summary[key]`` (a list, or a dict's
    ``relative``) of the cells ``{name}-H{H}`` that ran."""
    shown = []
    for H in heads:
        s, _ = finished(results, f"{name}-H{H}")
        if s is not None:
            v = s[key]["relative"] if isinstance(s[key], dict) else s[key]
            shown.append(f"H={H}: {mean(v):.3g}")
    return ", ".join(shown) or "none ran"
