"""Intervals over seeds / Monte Carlo paths, and the verdict rule every claim uses.

A claim names a *region of agreement* for a measured quantity (e.g. "difference > 0",
"exponent within −1 ± 0.25"). With the 95% interval ``[lo, hi]`` of the measurement:

* **reproduced**      the interval lies inside the region;
* **not reproduced**  the interval lies entirely outside it;
* **inconclusive**    it straddles the region's boundary, or there is one noisy value and
  so no interval (deterministic quantities are marked ``exact`` and judged on their value).

Intervals are Student-t intervals of the mean, ``m ± t_{0.975, n−1} s / √n``; paired
differences (same seed, two settings) use the per-seed differences.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE = "reproduced", "not reproduced", "inconclusive"

# two-sided 95% Student-t quantiles t_{0.975, df}, df = 1..30 (standard table values)
_T975 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
         2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
         2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042]


def t975(df: int) -> float:
    """Two-sided 95% quantile of Student's t with ``df`` degrees of freedom."""
    if df < 1:
        raise ValueError("a t interval needs at least 2 values")
    if df <= 30:
        return _T975[df - 1]
    z = 1.959964  # Cornish-Fisher expansion of t in 1/df (Abramowitz & Stegun 26.7.5)
    return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)


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
    """Interval of ``mean(a) − mean(b)`` for unpaired samples (Welch–Satterthwaite df)."""
    ia, ib = mean_interval(a), mean_interval(b)
    if ia.n < 2 or ib.n < 2:
        raise ValueError("welch_difference needs at least 2 values on each side")
    va, vb = ia.std**2 / ia.n, ib.std**2 / ib.n
    diff = ia.mean - ib.mean
    if va + vb == 0:
        return Interval(diff, diff, diff, ia.n + ib.n, 0.0)
    df = (va + vb) ** 2 / (va**2 / (ia.n - 1) + vb**2 / (ib.n - 1))
    half = t975(max(1, int(df))) * math.sqrt(va + vb)
    return Interval(diff, diff - half, diff + half, ia.n + ib.n, math.sqrt(va + vb))


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
