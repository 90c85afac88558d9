"""Verdicts beyond direction: Holm's adjustment for families, and the verdict against the
paper's own effect size.

Holm (1979): with m p-values sorted ``p_(1) ≤ … ≤ p_(m)``, the adjusted
``p̃_(i) = max_{j ≤ i} min(1, (m − j + 1) p_(j))``; rejecting where ``p̃ < α`` controls the
family-wise error at α. A family's members are judged on adjusted p-values of both tests
("inside the region", "outside it") at 2.5%, as the raw verdict is.

``vs_paper`` compares the 95% interval with the paper's effect ``e`` (same unit):
``opposite`` if the interval lies on the other side of 0 from ``e``; ``consistent`` if it
contains ``e``; ``smaller`` if it lies between 0's side and ``e`` (a smaller effect, or
none); ``larger`` if it lies beyond ``e``. A paper value "≈ 0" (``e = 0``) is an
equivalence claim with a stated ``margin`` m: ``consistent`` if the interval lies within
±m, ``larger`` if it lies entirely beyond it, ``undecided`` if it straddles ±m.
"""

from __future__ import annotations

from collections.abc import Sequence

from tokengeo.experiments.stats import (
    NO_CHANGE,
    Interval,
    Region,
    p_inside,
    p_outside,
    verdict,
    verdict_from_p,
)

VS_PAPER = ("consistent", "smaller", "larger", "opposite", "undecided")


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm-adjusted p-values, in the input order."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    adjusted, running = [0.0] * m, 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted


def holm_verdicts(members: Sequence[tuple[Interval, Region]]) -> list[str]:
    """Each member's verdict with both tests Holm-adjusted across a flat family (members
    that are single intervals). :meth:`tokengeo.experiments.claims.Claim.member_holm` is the
    same rule on the members' p-value pairs, so it also takes families as members."""
    p_in = holm([p_inside(iv, r) for iv, r in members])
    p_out = holm([p_outside(iv, r) for iv, r in members])
    out = []
    for (iv, r), pi, po in zip(members, p_in, p_out, strict=True):
        raw = verdict(iv, r)
        out.append(raw if raw == NO_CHANGE or not iv.has_spread
                   else verdict_from_p(pi, po))
    return out


def vs_paper(iv: Interval, effect: float, margin: float | None = None) -> str | None:
    """consistent / smaller / larger / opposite / undecided (see the module docstring);
    None when the interval is missing or not a real interval (one noisy value)."""
    if iv is None or not iv.has_spread:
        return None
    lo, hi = (iv.lo, iv.hi) if not iv.exact else (iv.mean, iv.mean)
    if effect == 0:
        if margin is None or not margin > 0:
            raise ValueError("a paper effect of 0 needs an equivalence margin > 0")
        if -margin < lo and hi < margin:
            return "consistent"
        return "larger" if (lo >= margin or hi <= -margin) else "undecided"
    sign = 1.0 if effect > 0 else -1.0
    lo, hi = sorted((sign * lo, sign * hi))  # the paper's direction is now positive
    e = abs(effect)
    if hi < 0:
        return "opposite"
    if lo <= e <= hi:
        return "consistent"
    return "smaller" if hi < e else "larger"
