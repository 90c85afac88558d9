"""Intervals over seeds / inputs / Monte Carlo paths, and the verdict rule every claim uses.

A claim names a *region of agreement* for a measured quantity (e.g. "difference > 0",
"exponent within −1 ± 0.25"). With the 95% interval ``[lo, hi]`` of the measurement:

* **reproduced**      the interval lies inside the region;
* **not reproduced**  the interval lies entirely outside it;
* **inconclusive**    it straddles the region's boundary (or lies within the claim's stated
  ``margin`` of it: :attr:`Region.margin`), or there is one noisy value and so no
  interval (deterministic quantities are marked ``exact`` and judged on their value);
* **no change**       every unit (seed) measured exactly 0: "no change in n of n seeds".

The same rule as one-sided tests at 2.5% on each finite boundary of the region
(:func:`p_inside`, :func:`p_outside`), which is what families need for Holm's adjustment
(:mod:`tokengeo.experiments.verdicts`).

How an interval is made (``Interval.method``):

* ``t``: Student-t interval of the mean, ``m ± t_{0.975, n−1} s / √n`` (paired differences
  use the per-seed differences); ``welch``: Welch's interval of an unpaired difference;
* ``sign-flip``: the exact permutation test of :mod:`tokengeo.experiments.exact`, used for
  integer (``discrete``) measures and whenever the values are tied (zero spread), so no
  interval has zero width by accident;
* ``log-ratio``: a t interval of per-seed ``log(treated / baseline)``, shown back as a ratio
  (``scale = "log"``), so a ratio's interval never crosses −100%;
* ``worst run``: a claim about *every* run judged on the worst one (deterministic);
* ``exact``: a deterministic quantity (a parameter count);
* ``deterministic``: one exact number from a noiseless computation (a flows run whose paths
  share their initial state): no interval; judged on its value against the claim's region,
  whose tolerance is the claim's stated ``margin``;
* ``bootstrap`` / others built by a suite: p-values from the interval's width (normal).

t quantiles come from ``scipy.stats`` (``pip install 'tokengeo[data]'``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from tokengeo.experiments import exact as _exact

REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE = "reproduced", "not reproduced", "inconclusive"
NO_CHANGE = "no change"
NOT_TESTABLE = "not testable here"  # a failed precondition: the claim is not judged
# an "any" family that is inconclusive while its reading at the paper's own setting is
# significantly opposite after Holm (claims.Claim.primary): its own outcome, never hidden
CONTRADICTED = "contradicted at the paper's setting"
# judged by where the interval lies; every other method by its p-values
INTERVAL_METHODS = ("t", "welch", "log-ratio", "bootstrap over paths")
PERMUTATION_Z = "permutation z"  # z = Φ⁻¹(1 − p) of a two-sample relabelling test, band ± 1.96
TWO_SAMPLE = ("welch", PERMUTATION_Z)  # methods whose values are two samples (a and b)


def _unit(v):
    """One unit's value in JSON: a number, or a run's row of numbers."""
    return [float(x) for x in v] if isinstance(v, (tuple, list)) else v
ALPHA_SIDE = _exact.ALPHA_SIDE  # 2.5% each side: a two-sided 95% interval


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

    ``exact`` marks a deterministic quantity (a parameter count, a closed-form ratio, the
    worst of n runs): its single value is decisive on its own. ``values`` keeps the
    per-unit values where a test needs them (sign-flip) and ``df`` the t degrees of
    freedom (Welch's are fractional). A two-sample method (:data:`TWO_SAMPLE`) keeps its
    samples in ``values`` and ``values_b``; the permutation test of rank vectors keeps one
    row of metrics per run (a tuple of the options' values) in each. ``scale = "log"``: the
    numbers are logs of a ratio.
    """

    mean: float
    lo: float
    hi: float
    n: int
    std: float
    exact: bool = False
    method: str = "t"
    scale: str = "linear"
    df: float | None = None
    values: tuple[float, ...] = field(default=(), repr=False)
    values_b: tuple[float, ...] = field(default=(), repr=False)  # Welch: the second sample

    @classmethod
    def exact_value(cls, x: float, method: str = "exact") -> Interval:
        """A deterministic number (``method``: ``exact`` for a count or closed form,
        ``deterministic`` for a noiseless run)."""
        return cls(float(x), float(x), float(x), 1, 0.0, True, method, values=(float(x),))

    @property
    def has_spread(self) -> bool:
        return self.n >= 2 or self.exact

    @property
    def no_change(self) -> bool:
        """Every unit measured exactly 0 (a tied, integer measure; a log ratio of equal
        values)."""
        return (self.method.endswith("sign-flip") and len(self.values) >= 2
                and all(v == 0 for v in self.values))

    @property
    def tied(self) -> bool:
        return self.method.endswith("sign-flip") and len(set(self.values)) == 1

    def to_dict(self) -> dict:
        """The interval with the per-unit numbers it was computed from (``values``; a
        two-sample method's ``values_a`` and ``values_b``), so a reader can recompute it."""
        out = {"mean": self.mean, "low": _num(self.lo), "high": _num(self.hi), "n": self.n,
               "method": self.method, "scale": self.scale, "std": self.std, "df": self.df}
        if self.method in TWO_SAMPLE:
            out.update(values_a=[_unit(v) for v in self.values],
                       values_b=[_unit(v) for v in self.values_b])
        else:
            out["values"] = list(self.values)
        return out

    def _shown(self, x: float, digits: int) -> str:
        if self.scale == "log":
            return "∞" if x == math.inf else f"×{math.exp(x):.{digits}g}"
        return {math.inf: "∞", -math.inf: "−∞"}.get(x, f"{x:.{digits}g}")

    def fmt(self, digits: int = 3) -> str:
        m = self._shown(self.mean, digits)
        if self.method == "worst run":
            return f"{m} (worst of {self.n} runs)"
        if self.method == "deterministic":
            return f"{m} (deterministic)"
        if self.exact:
            return m
        if not self.has_spread:
            return f"{m} (n=1)"
        if self.no_change:
            return f"no change in {self.n} of {self.n} seeds"
        if self.tied:
            return f"{m} in {self.n} of {self.n} seeds (exact sign-flip test)"
        return f"{m} [{self._shown(self.lo, digits)}, {self._shown(self.hi, digits)}] (n={self.n})"


def _num(x: float) -> float | None:
    return x if math.isfinite(x) else None  # JSON has no infinity: null = unbounded


def _std(xs: list[float]) -> float:
    m = sum(xs) / len(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1)) if len(xs) > 1 else 0.0


def sign_flip_mean(values: Sequence[float]) -> Interval:
    """Mean with the exact sign-flip interval (:mod:`tokengeo.experiments.exact`)."""
    xs = [float(v) for v in values]
    lo, hi = _exact.sign_flip_interval(xs)
    return Interval(sum(xs) / len(xs), lo, hi, len(xs), _std(xs), method="sign-flip",
                    values=tuple(xs))


def mean_interval(values: Sequence[float], discrete: bool = False) -> Interval:
    """``m ± t_{0.975,n−1} · s/√n`` with the sample standard deviation ``s``; the exact
    sign-flip interval instead when ``discrete`` (integer measures) or the values are tied."""
    xs = [float(v) for v in values]
    if not xs:
        raise ValueError("mean_interval needs at least one value")
    n, m = len(xs), sum(xs) / len(xs)
    if n == 1:
        return Interval(m, m, m, 1, 0.0, values=tuple(xs))
    s = _std(xs)
    if discrete or s == 0 or len(set(xs)) == 1:
        return sign_flip_mean(xs)
    half = t975(n - 1) * s / math.sqrt(n)
    return Interval(m, m - half, m + half, n, s, df=n - 1, values=tuple(xs))


def paired_difference(treated: Sequence[float], baseline: Sequence[float],
                      discrete: bool = False) -> Interval:
    """Interval of the mean per-seed difference ``treated − baseline``."""
    if len(treated) != len(baseline):
        raise ValueError("paired difference needs the same seeds on both sides")
    return mean_interval([t - b for t, b in zip(treated, baseline, strict=True)], discrete)


def log_ratio(treated: Sequence[float], baseline: Sequence[float]) -> Interval:
    """Interval of the mean per-seed ``log(treated / baseline)`` (positive quantities);
    shown as a ratio ``exp(·)``, so its lower end stays above −100%."""
    if len(treated) != len(baseline):
        raise ValueError("a log ratio needs the same seeds on both sides")
    if any(not (t > 0 and b > 0) for t, b in zip(treated, baseline, strict=True)):
        raise ValueError("a log ratio needs positive values on both sides")
    iv = mean_interval([math.log(t / b) for t, b in zip(treated, baseline, strict=True)])
    method = "log-ratio" if iv.method == "t" else f"log-ratio {iv.method}"
    return Interval(iv.mean, iv.lo, iv.hi, iv.n, iv.std, iv.exact, method, "log", iv.df,
                    iv.values)


def worst_run_in(values: Sequence[float], low: float, high: float) -> Interval:
    """:func:`worst_run` against a two-sided region (low, high): the run with the least
    slack min(v − low, high − v), signed as measured (every run lies inside iff it does)."""
    xs = [float(v) for v in values]
    w = min(xs, key=lambda v: min(v - low, high - v))
    return Interval(w, w, w, len(xs), _std(xs), True, "worst run", values=tuple(xs))


def worst_run(values: Sequence[float], worst_is_high: bool = True) -> Interval:
    """A claim about *every* run, judged on its worst one (a deterministic statement
    about the runs made: all lie in the region iff the worst does)."""
    xs = [float(v) for v in values]
    w = max(xs) if worst_is_high else min(xs)
    return Interval(w, w, w, len(xs), _std(xs), True, "worst run", values=tuple(xs))


def welch_difference(a: Sequence[float], b: Sequence[float]) -> Interval:
    """Welch interval of ``mean(a) − mean(b)`` for unpaired samples:
    ``d ± t_{0.975, ν} √(s_a²/n_a + s_b²/n_b)`` with the Welch–Satterthwaite ``ν``
    (``scipy.stats.ttest_ind(a, b, equal_var=False).confidence_interval(0.95)``).
    ``std`` holds the standard error."""
    ia, ib = mean_interval(a), mean_interval(b)
    if ia.n < 2 or ib.n < 2:
        raise ValueError("welch_difference needs at least 2 values on each side")
    va, vb = ia.std**2 / ia.n, ib.std**2 / ib.n
    diff, se = ia.mean - ib.mean, math.sqrt(va + vb)
    samples = {"values": tuple(map(float, a)), "values_b": tuple(map(float, b))}
    if se == 0:
        return Interval(diff, -math.inf, math.inf, ia.n + ib.n, 0.0, method="welch", **samples)
    df = (va + vb) ** 2 / (va**2 / (ia.n - 1) + vb**2 / (ib.n - 1))
    half = t975(df) * se
    return Interval(diff, diff - half, diff + half, ia.n + ib.n, se, method="welch", df=df,
                    **samples)


@dataclass(frozen=True)
class Region:
    """Where the measurement must lie for the claim to hold: ``low < x < high``.

    ``margin`` (≥ 0) is the claim's stated tolerance, applied to both verdicts alike: the
    claim is *reproduced* only when the measurement lies inside the region by more than
    ``margin`` (inside ``(low + margin, high − margin)``), *not reproduced* only when it lies
    outside by more than ``margin`` (beyond ``low − margin`` or ``high + margin``), and
    *inconclusive* within ``margin`` of a finite boundary. With 0 the rule is the plain one.
    A suite states its margin here and never re-implements it."""

    low: float = -math.inf
    high: float = math.inf
    text: str = ""
    margin: float = 0.0

    def __post_init__(self) -> None:
        if not self.low < self.high:
            raise ValueError(f"a region needs low < high; got ({self.low}, {self.high})")
        if not (self.margin >= 0 and math.isfinite(self.margin)):
            raise ValueError(f"a region's margin must be a finite number >= 0; got "
                             f"{self.margin}")
        if not self.low + self.margin < self.high - self.margin:
            raise ValueError(f"margin {self.margin:g} leaves nothing of the region "
                             f"({self.low:g}, {self.high:g}); choose a smaller margin")
        if not self.text:  # say it in words when the maker did not
            lo, hi = math.isfinite(self.low), math.isfinite(self.high)
            text = (f"within [{self.low:g}, {self.high:g}]" if lo and hi else
                    f"> {self.low:g}" if lo else f"< {self.high:g}" if hi else "anywhere")
            object.__setattr__(self, "text", text)
        if self.margin and "margin" not in self.text:
            object.__setattr__(self, "text", f"{self.text} (margin {self.margin:g})")

    @property
    def inner(self) -> tuple[float, float]:
        """The bounds the measurement must clear to be reproduced: the region less its
        margin on each finite side."""
        return self.low + self.margin, self.high - self.margin

    @property
    def outer(self) -> tuple[float, float]:
        """The bounds beyond which it is not reproduced: the region plus its margin."""
        return self.low - self.margin, self.high + self.margin

    def with_margin(self, margin: float) -> Region:
        """The same region with the stated tolerance ``margin``."""
        return Region(self.low, self.high, self.text, margin)

    def to_dict(self) -> dict:
        """``{"low", "high", "text", "margin"}``, null for an open side."""
        return {"low": _num(self.low), "high": _num(self.high), "text": self.text,
                "margin": self.margin}

    @classmethod
    def above(cls, x: float, margin: float = 0.0) -> Region:
        return cls(low=x, text=f"> {x:g}", margin=margin)

    @classmethod
    def below(cls, x: float, margin: float = 0.0) -> Region:
        return cls(high=x, text=f"< {x:g}", margin=margin)

    @classmethod
    def around(cls, target: float, tol: float, margin: float = 0.0) -> Region:
        return cls(target - tol, target + tol, f"within {target:g} ± {tol:g}", margin)

    @classmethod
    def ratio_below(cls, ratio: float) -> Region:
        """A log-scale region: the ratio below ``ratio``."""
        return cls(high=math.log(ratio), text=f"ratio < {ratio:g}")

    @classmethod
    def ratio_above(cls, ratio: float) -> Region:
        return cls(low=math.log(ratio), text=f"ratio > {ratio:g}")


def standard_error(iv: Interval) -> float | None:
    """The interval's standard error: from its values (t), as stored (Welch), or from its
    width (``(hi − lo) / (2 · 1.96)``, normal) for intervals a suite built itself."""
    if iv.method in ("t", "log-ratio") and iv.n >= 2 and iv.std > 0:
        return iv.std / math.sqrt(iv.n)
    if iv.method == "welch":
        return iv.std or None
    if math.isfinite(iv.lo) and math.isfinite(iv.hi) and iv.hi > iv.lo:
        return (iv.hi - iv.lo) / (2 * 1.959964)
    return None


def _p_above(iv: Interval, b: float) -> float:
    """One-sided p-value of "the measured quantity lies above ``b``"."""
    if iv.exact:
        return 0.0 if iv.mean > b else 1.0
    if iv.method.endswith("sign-flip"):
        return _exact.p_above(iv.values, b)
    se = standard_error(iv)
    if se is None:
        return 1.0  # one noisy value: no evidence
    z = (iv.mean - b) / se
    if iv.df is not None:
        return float(_scipy_stats().t.sf(z, iv.df))
    return float(_scipy_stats().norm.sf(z))


def _p_below(iv: Interval, b: float) -> float:
    if iv.exact:
        return 0.0 if iv.mean < b else 1.0
    if iv.method.endswith("sign-flip"):
        return _exact.p_below(iv.values, b)
    return 1.0 - _p_above(iv, b) if standard_error(iv) is not None else 1.0


def p_inside(iv: Interval, region: Region) -> float:
    """p-value of "inside the region" (by more than its margin): the larger of the one-sided
    tests on its finite boundaries (an intersection–union test)."""
    low, high = region.inner
    ps = [0.0]
    if math.isfinite(low):
        ps.append(_p_above(iv, low))
    if math.isfinite(high):
        ps.append(_p_below(iv, high))
    return max(ps)


def p_outside(iv: Interval, region: Region) -> float:
    """p-value of "outside the region" (by more than its margin): the smaller of the
    one-sided tests beyond it."""
    low, high = region.outer
    ps = [1.0]
    if math.isfinite(low):
        ps.append(_p_below(iv, low))
    if math.isfinite(high):
        ps.append(_p_above(iv, high))
    return min(ps)


def verdict(measured: Interval, region: Region) -> str:
    """reproduced / not reproduced / inconclusive / no change (see the module docstring);
    the region's ``margin`` applies to every method alike."""
    if not measured.has_spread:
        return INCONCLUSIVE  # one noisy value: no interval, no verdict
    if measured.no_change:
        return NO_CHANGE
    (in_lo, in_hi), (out_lo, out_hi) = region.inner, region.outer
    if measured.exact:
        x = measured.mean
        return (REPRODUCED if in_lo < x < in_hi else
                NOT_REPRODUCED if (x <= out_lo or x >= out_hi) else INCONCLUSIVE)
    if measured.method.endswith("sign-flip") or measured.method not in INTERVAL_METHODS:
        return verdict_from_p(p_inside(measured, region), p_outside(measured, region))
    if in_lo < measured.lo and measured.hi < in_hi:
        return REPRODUCED
    if measured.hi <= out_lo or measured.lo >= out_hi:
        return NOT_REPRODUCED
    return INCONCLUSIVE


def verdict_from_p(p_in: float, p_out: float, alpha: float = ALPHA_SIDE) -> str:
    if p_in < alpha:
        return REPRODUCED
    if p_out < alpha:
        return NOT_REPRODUCED
    return INCONCLUSIVE
