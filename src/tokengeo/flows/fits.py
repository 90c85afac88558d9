"""Fits of the H-scaling and convergence experiments: power laws in linear and log space, local
slopes, with intervals over Monte Carlo paths.

arXiv 2605.18870, Sec. 6 fits the time-averaged strong gradient against H as G^2 ~ a H^b with
``scipy.optimize.curve_fit`` on the linear values at H in {1, 10, 100} (the authors' script);
:func:`linear_power_fit` is that fit, :func:`loglog_ols` the least-squares line in log-log
space with its Student-t interval, :func:`local_slopes` the slopes d log G^2 / d log H
between consecutive H with percentile-bootstrap intervals over paths.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import asdict, dataclass

import numpy as np

from tokengeo.errors import ConfigError


@dataclass(frozen=True)
class Estimate:
    """A fitted number and its 95% interval over ``n`` paths or points; ``exact`` when it is
    deterministic (every path the same run), so lo = hi = value."""

    value: float
    lo: float
    hi: float
    n: int
    exact: bool = False

    @classmethod
    def exact_value(cls, value: float) -> Estimate:
        return cls(float(value), float(value), float(value), 1, True)


def _t975(df: int) -> float:
    from tokengeo._deps import require

    return float(require("scipy.stats").t.ppf(0.975, df))


def loglog_ols(x: list[float], y: list[float]) -> tuple[Estimate, float]:
    """Slope b and prefactor of log y = log c + b log x by least squares; the slope as an
    :class:`Estimate` b ± t_{0.975, m-2} se(b) over the m points (exact with 2 points)."""
    lx, ly = np.log(np.asarray(x, float)), np.log(np.asarray(y, float))
    m = lx.size
    if m < 2 or len(set(lx.tolist())) < 2 or not np.all(np.isfinite(ly)):
        raise ConfigError("a log-log fit needs 2 or more distinct positive x and positive y")
    b, a = np.polyfit(lx, ly, 1)
    if m == 2:
        return Estimate.exact_value(float(b)), float(math.exp(a))
    resid = ly - (a + b * lx)
    se = math.sqrt(float(resid @ resid) / (m - 2) / float(((lx - lx.mean()) ** 2).sum()))
    half = _t975(m - 2) * se
    return Estimate(float(b), float(b - half), float(b + half), m), float(math.exp(a))


def linear_power_fit(heads: list[int], means: list[float]) -> tuple[float, float]:
    """(a, b) of means ~ a H^b by nonlinear least squares on the linear values (the authors'
    ``curve_fit``), started from the log-log line."""
    from tokengeo._deps import require

    optimize = require("scipy.optimize")
    h, y = np.asarray(heads, float), np.asarray(means, float)
    b0, a0 = np.polyfit(np.log(h), np.log(y), 1)
    with warnings.catch_warnings():  # no covariance with 2 or 3 exact points: not used
        warnings.simplefilter("ignore", optimize.OptimizeWarning)
        (a, b), _ = optimize.curve_fit(lambda hh, a, b: a * hh**b, h, y,
                                       p0=(math.exp(a0), b0), maxfev=20_000)
    return float(a), float(b)


@dataclass
class ScalingFits:
    """Both fits of one drift's H sweep, the paper's three points and all points."""

    heads: list[int]
    means: list[float]  # mean over paths of the time-averaged G^2, per H
    paper_heads: list[int]
    paper_linear_b: float  # curve_fit on the linear values at paper_heads
    paper_linear_b_interval: Estimate  # bootstrap over paths (exact when paths coincide)
    loglog_b: Estimate  # OLS over all heads, bootstrap over paths
    loglog_b_paper_heads: Estimate  # OLS over paper_heads, t interval over the points
    local: list[dict]  # per consecutive pair: h0, h1, slope, lo, hi

    def to_dict(self) -> dict:
        return asdict(self)


def _bootstrap(samples: list[np.ndarray], stat, n_boot: int, seed: int) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    vals = [stat([s[rng.integers(0, s.size, s.size)].mean() for s in samples])
            for _ in range(n_boot)]
    lo, hi = np.quantile(vals, [0.025, 0.975])
    return float(lo), float(hi)


def _interval(value: float, samples: list[np.ndarray], stat, n_boot: int, seed: int) -> Estimate:
    """``value`` with a percentile-bootstrap interval over paths; exact when every H's paths
    coincide (a deterministic run)."""
    if all(np.ptp(s) == 0 for s in samples):
        return Estimate.exact_value(value)
    lo, hi = _bootstrap(samples, stat, n_boot, seed)
    return Estimate(value, lo, hi, min(s.size for s in samples))


def local_slopes(heads: list[int], samples: list[np.ndarray], *, n_boot: int = 2000,
                 seed: int = 0) -> list[dict]:
    """d log G^2 / d log H between consecutive H (log of path means), bootstrap intervals."""
    out = []
    for k in range(len(heads) - 1):
        h0, h1 = heads[k], heads[k + 1]
        pair = [samples[k], samples[k + 1]]

        def slope(m, h0=h0, h1=h1):
            return math.log(m[1] / m[0]) / math.log(h1 / h0)

        iv = _interval(slope([s.mean() for s in pair]), pair, slope, n_boot, seed + k)
        out.append({"h0": h0, "h1": h1, "slope": iv.value, "lo": iv.lo, "hi": iv.hi,
                    "exact": iv.exact})
    return out


def scaling_fits(heads: list[int], samples: list, paper_heads: list[int], *,
                 n_boot: int = 1000, seed: int = 0) -> ScalingFits:
    """Both power-law fits of per-path samples (one array per H, in the order of ``heads``)."""
    ys = [np.asarray(s, float) for s in samples]
    if len(ys) != len(heads) or any(y.size == 0 or not np.all(y > 0) for y in ys):
        raise ConfigError("scaling fits need positive per-path samples for every H")
    missing = [h for h in paper_heads if h not in heads]
    if missing:
        raise ConfigError(f"paper_heads {missing} are not among the heads run {heads}")
    means = [float(y.mean()) for y in ys]
    idx = [heads.index(h) for h in paper_heads]
    sub = [ys[i] for i in idx]

    def lin_b(m):
        return linear_power_fit(paper_heads, list(m))[1]

    def all_b(m):
        return float(np.polyfit(np.log(heads), np.log(m), 1)[0])

    b_lin = lin_b([means[i] for i in idx])
    b_all = all_b(means)
    return ScalingFits(
        heads=list(heads), means=means, paper_heads=list(paper_heads),
        paper_linear_b=b_lin,
        paper_linear_b_interval=_interval(b_lin, sub, lin_b, n_boot, seed),
        loglog_b=_interval(b_all, ys, all_b, n_boot, seed + 1),
        loglog_b_paper_heads=loglog_ols(paper_heads, [means[i] for i in idx])[0],
        local=local_slopes(list(heads), ys, n_boot=n_boot, seed=seed + 2),
    )
