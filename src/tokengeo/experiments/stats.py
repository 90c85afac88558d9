"""Intervals over seeds / Monte Carlo paths, and the verdict rule every claim uses.

A claim names a *region of agreement* for a measured quantity (e.g. "difference > 0",
"exponent within −1 ± 0.25"). With the 95% interval ``[lo, hi]`` of the measurement:

* **reproduced**      the interval lies inside the region;
* **not reproduced**  the interval lies entirely outside it;
* **inconclusive**    it straddles the region's boundary, or there is one noisy value and
  so no interval (deterministic quantities are marked ``exact`` and judged on their value).

Intervals are Student-t intervals of the mean, ``m ± t_{0.975, n−1} s / √n``; paired
differences (same seed, two settings) use the per-seed differences; unpaired ones Welch's
interval. The t quantiles come from ``scipy.stats`` (``pip install 'tokengeo[data]'``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE = "reproduced", "not reproduced", "inconclusive"


def _scipy_stats():
    from tokengeo._deps import require

    return require("scipy.stats")


def t975(df: float) -> float:
    """Two-sided 95% quantile of Student's t, ``t_{0.975, df}`` (``scipy.stats.t.ppf``);
    ``df`` may be fractional (Welch–Satterthwaite)."""
    if not df >= 1:
        raise ValueError("a t interval needs at least 2 values")
    return float(_scipy_stats().t.ppf(0.975, df))


@dataclass(frozen=True)
class Interval:
    """Mean and 95% interval of ``n`` values (``lo = hi = mean`` when n = 1).

    ``exact`` marks a deterministic quantity (a parameter count, a closed-form ratio):
    its single value is decisive on its own.
    """

    mean: float
    lo: float
    hi: float
    n: int
    std: float
    exact: bool = False

    @classmethod
    def exact_value(cls, x: float) -> Interval:
        return cls(float(x), float(x), float(x), 1, 0.0, True)

    @property
    def has_spread(self) -> bool:
        return self.n >= 2 or self.exact

    def to_dict(self) -> dict:
        return asdict(self)

    def fmt(self, digits: int = 3) -> str:
        if self.exact:
            return f"{self.mean:.{digits}g}"
        if not self.has_spread:
            return f"{self.mean:.{digits}g} (n=1)"
        return f"{self.mean:.{digits}g} [{self.lo:.{digits}g}, {self.hi:.{digits}g}] (n={self.n})"


def mean_interval(values: Sequence[float]) -> Interval:
    """``m ± t_{0.975,n−1} · s/√n`` with the sample standard deviation ``s``."""
    xs = [float(v) for v in values]
    if not xs:
        raise ValueError("mean_interval needs at least one value")
    n, m = len(xs), sum(xs) / len(xs)
    if n == 1:
        return Interval(m, m, m, 1, 0.0)
    s = math.sqrt(sum((x - m) ** 2 for x in xs) / (n - 1))
    half = t975(n - 1) * s / math.sqrt(n)
    return Interval(m, m - half, m + half, n, s)


def paired_difference(treated: Sequence[float], baseline: Sequence[float]) -> Interval:
    """Interval of the mean per-seed difference ``treated − baseline``."""
    if len(treated) != len(baseline):
        raise ValueError("paired difference needs the same seeds on both sides")
    return mean_interval([t - b for t, b in zip(treated, baseline, strict=True)])


def welch_difference(a: Sequence[float], b: Sequence[float]) -> Interval:
    """Welch interval of ``mean(a) − mean(b)`` for unpaired samples:
    ``d ± t_{0.975, ν} √(s_a²/n_a + s_b²/n_b)`` with the Welch–Satterthwaite ``ν``
    (``scipy.stats.ttest_ind(a, b, equal_var=False).confidence_interval(0.95)``)."""
    ia, ib = mean_interval(a), mean_interval(b)
    if ia.n < 2 or ib.n < 2:
        raise ValueError("welch_difference needs at least 2 values on each side")
    diff, se = ia.mean - ib.mean, math.sqrt(ia.std**2 / ia.n + ib.std**2 / ib.n)
    if se == 0:
        return Interval(diff, diff, diff, ia.n + ib.n, 0.0)
    ci = _scipy_stats().ttest_ind(list(a), list(b), equal_var=False).confidence_interval(0.95)
    return Interval(diff, float(ci.low), float(ci.high), ia.n + ib.n, se)


@dataclass(frozen=True)
class Region:
    """Where the measurement must lie for the claim to hold: ``low < x < high``."""

    low: float = -math.inf
    high: float = math.inf
    text: str = ""

    @classmethod
    def above(cls, x: float) -> Region:
        return cls(low=x, text=f"> {x:g}")

    @classmethod
    def below(cls, x: float) -> Region:
        return cls(high=x, text=f"< {x:g}")

    @classmethod
    def around(cls, target: float, tol: float) -> Region:
        return cls(target - tol, target + tol, f"within {target:g} ± {tol:g}")


def verdict(measured: Interval, region: Region) -> str:
    """reproduced / not reproduced / inconclusive (see the module docstring)."""
    if not measured.has_spread:
        return INCONCLUSIVE  # one noisy value: no interval, no verdict
    if region.low < measured.lo and measured.hi < region.high:
        return REPRODUCED
    if measured.hi <= region.low or measured.lo >= region.high:
        return NOT_REPRODUCED
    return INCONCLUSIVE
