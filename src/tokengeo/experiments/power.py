"""Power of the verdict rule: the smallest effect it detects, and the seeds it needs.

A claim is *reproduced* when a one-sided t test at 2.5% (the 95% interval's side) rejects
"not beyond the boundary". With ``n`` units of spread ``σ`` its power against an effect
``δ`` beyond the boundary is the noncentral-t tail

    power(δ, σ, n) = P(T'_{ν, λ} > t_{0.975, ν}),   λ = δ / (σ √(1/n)),  ν = n − 1

(paired, one sample of per-seed differences; Cohen 1988, ch. 2; ``scipy.stats.nct``), and
for two independent groups of ``n`` each ``λ = δ / (σ √(2/n))``, ``ν = 2n − 2``. The minimum
detectable effect at 80% power solves ``power(δ) = 0.8``; the seeds for 80% are the
smallest ``n`` whose power reaches 0.8. ``σ`` is the observed spread, so both are
estimates: from n values its 95% confidence bounds are ``σ √((n − 1) / χ²_{0.975 / 0.025,
n − 1})`` (×0.6 to ×3.7 at n = 3–4), and :func:`sd_upper` gives the upper one, from which
the report states a second, conservative seed count. A member of a family of m is judged
after Holm's adjustment, whose first step tests at 2.5% / m: pass ``alpha`` for it.
"""

from __future__ import annotations

import math

TARGET = 0.8
MAX_UNITS = 100_000


def _nct():
    from tokengeo._deps import require

    return require("scipy.stats")


ALPHA = 0.025  # one side of the 95% interval


def sd_upper(sd: float, n: int, level: float = 0.95) -> float:
    """The upper end of the ``level`` confidence interval of σ from ``n`` values with
    sample standard deviation ``sd``: ``sd √((n − 1) / χ²_{(1 − level)/2, n − 1})``."""
    if n < 2:
        raise ValueError("a spread's bound needs n >= 2")
    chi2 = float(_nct().chi2.ppf((1 - level) / 2, n - 1))
    return sd * math.sqrt((n - 1) / chi2)


def power(effect: float, sd: float, n: int, groups: int = 1, alpha: float = ALPHA) -> float:
    """Probability that the one-sided test at ``alpha`` (2.5%: the 95% interval's side)
    rejects when the true effect beyond the boundary is ``effect`` (``groups``: 1 paired,
    2 independent groups of ``n``)."""
    if n < 2 or sd <= 0:
        raise ValueError("power needs n >= 2 and a positive spread")
    st = _nct()
    df = n - 1 if groups == 1 else 2 * n - 2
    ncp = abs(effect) / (sd * math.sqrt(groups / n))
    crit = float(st.t.ppf(1 - alpha, df))
    return float(st.nct.sf(crit, df, ncp))


def mde(sd: float, n: int, groups: int = 1, target: float = TARGET,
        alpha: float = ALPHA) -> float | None:
    """The effect detected with probability ``target`` by a one-sided test at ``alpha``
    (a member of a family of m is judged at 2.5% / m: pass that); None without spread or
    n < 2."""
    if n < 2 or not sd > 0:
        return None
    from scipy.optimize import brentq

    hi = sd
    while power(hi, sd, n, groups, alpha) < target:
        hi *= 2
    return float(brentq(lambda d: power(d, sd, n, groups, alpha) - target, 0.0, hi,
                        xtol=1e-12 * hi))


def units_for(effect: float, sd: float, groups: int = 1, target: float = TARGET,
              alpha: float = ALPHA) -> int | None:
    """The fewest units (seeds) per group detecting ``effect`` with probability ``target``
    at one-sided level ``alpha`` (None without a spread, a zero effect, or beyond
    ``MAX_UNITS``)."""
    if not sd > 0 or effect == 0 or not math.isfinite(effect):
        return None
    lo, hi = 2, 2
    while power(effect, sd, hi, groups, alpha) < target:
        lo, hi = hi, hi * 2
        if hi > MAX_UNITS:
            return None
    while lo < hi:  # power rises with n
        mid = (lo + hi) // 2
        low_power = power(effect, sd, mid, groups, alpha) < target
        lo, hi = (mid + 1, hi) if low_power else (lo, mid)
    return lo
