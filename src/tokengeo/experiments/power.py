"""Power of the verdict rule: the smallest effect it detects, and the seeds it needs.

A claim is *reproduced* when a one-sided t test at 2.5% (the 95% interval's side) rejects
"not beyond the boundary". With ``n`` units of spread ``σ`` its power against an effect
``δ`` beyond the boundary is the noncentral-t tail

    power(δ, σ, n) = P(T'_{ν, λ} > t_{0.975, ν}),   λ = δ / (σ √(1/n)),  ν = n − 1

(paired, one sample of per-seed differences; Cohen 1988, ch. 2; ``scipy.stats.nct``), and
for two independent groups of ``n`` each ``λ = δ / (σ √(2/n))``, ``ν = 2n − 2``. The minimum
detectable effect at 80% power solves ``power(δ) = 0.8``; the seeds for 80% are the
smallest ``n`` whose power reaches 0.8. ``σ`` is the observed spread, so both are
estimates.
"""

from __future__ import annotations

import math

TARGET = 0.8
MAX_UNITS = 100_000


def _nct():
    from tokengeo._deps import require

    return require("scipy.stats")


def power(effect: float, sd: float, n: int, groups: int = 1) -> float:
    """Probability that the 95% interval excludes the boundary when the true effect
    beyond it is ``effect`` (``groups``: 1 paired, 2 independent groups of ``n``)."""
    if n < 2 or sd <= 0:
        raise ValueError("power needs n >= 2 and a positive spread")
    st = _nct()
    df = n - 1 if groups == 1 else 2 * n - 2
    ncp = abs(effect) / (sd * math.sqrt(groups / n))
    crit = float(st.t.ppf(0.975, df))
    return float(st.nct.sf(crit, df, ncp))


def mde(sd: float, n: int, groups: int = 1, target: float = TARGET) -> float | None:
    """The effect detected with probability ``target`` (None without spread or n < 2)."""
    if n < 2 or not sd > 0:
        return None
    from scipy.optimize import brentq

    hi = sd
    while power(hi, sd, n, groups) < target:
        hi *= 2
    return float(brentq(lambda d: power(d, sd, n, groups) - target, 0.0, hi, xtol=1e-12 * hi))


def units_for(effect: float, sd: float, groups: int = 1, target: float = TARGET) -> int | None:
    """The fewest units (seeds) per group detecting ``effect`` with probability ``target``
    (None without a spread, a zero effect, or beyond ``MAX_UNITS``)."""
    if not sd > 0 or effect == 0 or not math.isfinite(effect):
        return None
    lo, hi = 2, 2
    while power(effect, sd, hi, groups) < target:
        lo, hi = hi, hi * 2
        if hi > MAX_UNITS:
            return None
    while lo < hi:  # power rises with n
        mid = (lo + hi) // 2
        lo, hi = (mid + 1, hi) if power(effect, sd, mid, groups) < target else (lo, mid)
    return lo
