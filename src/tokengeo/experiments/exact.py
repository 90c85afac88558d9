"""The exact sign-flip (permutation) test of a mean, for integer or tied measures.

Under H0 "the per-unit values ``d_i − b`` are symmetric about 0" every sign vector
``s ∈ {±1}^n`` is equally likely, so the one-sided p-value of "mean above b" is

    p_above(b) = #{s : mean(s ⊙ (d − b)) ≥ mean(d − b)} / 2^n

(Fisher 1935, Sec. 21; Good, *Permutation Tests*, 2000, Sec. 3.1). It is exact for any n, needs
no spread (a tied sample is fine) and its smallest value is ``2^-n``: with 5 seeds no
one-sided test at 2.5% can succeed (1/32 > 0.025), which is the honest answer. The 95%
interval inverts the test: the shifts ``b`` that neither one-sided test rejects at 2.5%.
Above 16 units the 2^n sign vectors are sampled (65,536 draws, a fixed generator).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache

ALPHA_SIDE = 0.025  # each side of a two-sided 95% interval
ENUMERATE_UP_TO = 16
DRAWS = 1 << 16


@lru_cache(maxsize=16)
def _signs(n: int):  # read-only: shared between calls
    import numpy as np

    if n <= ENUMERATE_UP_TO:
        codes = np.arange(1 << n)[:, None] >> np.arange(n)[None, :]
        return 1.0 - 2.0 * (codes & 1)  # (2^n, n), the identity among them
    rng = np.random.default_rng(0)
    s = rng.choice([-1.0, 1.0], size=(DRAWS, n))
    s[0] = 1.0
    return s


def p_above(values: Sequence[float], b: float = 0.0) -> float:
    """Exact one-sided p-value of "the values are centred above ``b``"."""
    import numpy as np

    d = np.asarray(values, dtype=float) - b
    if d.size == 0:
        raise ValueError("a sign-flip test needs at least one value")
    stats = _signs(d.size) @ d  # (2^n,) sums under each sign vector
    observed = d.sum()
    tol = 1e-12 * max(1.0, float(np.abs(d).sum()))
    return float(np.mean(stats >= observed - tol))


def p_below(values: Sequence[float], b: float = 0.0) -> float:
    """Exact one-sided p-value of "the values are centred below ``b``"."""
    return p_above([-v for v in values], -b)


def _bisect(f, lo: float, hi: float) -> float:
    for _ in range(80):  # f(lo) is False, f(hi) is True
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if f(mid) else (mid, hi)
    return 0.5 * (lo + hi)


def sign_flip_interval(values: Sequence[float]) -> tuple[float, float]:
    """The 95% interval of the centre: ``{b : p_above(b) > 2.5% and p_below(b) > 2.5%}``.

    Unbounded (±inf) when ``2^-n ≥ 2.5%`` (n ≤ 5): no shift is ever rejected."""
    xs = [float(v) for v in values]
    if 0.5 ** len(xs) >= ALPHA_SIDE:
        return -math.inf, math.inf
    span = max(xs) - min(xs)
    left, right = min(xs) - span - 1.0, max(xs) + span + 1.0
    # p_above(b) rises with b: the interval's low end is where it passes 2.5%
    lo = _bisect(lambda b: p_above(xs, b) > ALPHA_SIDE, left, max(xs) + 1e-12)
    hi = _bisect(lambda b: p_below(xs, b) <= ALPHA_SIDE, min(xs) - 1e-12, right)
    return lo, hi
