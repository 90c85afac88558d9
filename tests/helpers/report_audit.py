"""An independent audit of report.json: a second implementation of every interval, member
verdict, Holm verdict, family verdict and the tally, written against the documented rules
(docs/report.md) with scipy.stats and numpy, importing nothing from tokengeo.

:func:`audit` returns the list of disagreements (empty: the report recomputes) and counts
what it could check from the JSON alone. A format-1 report (before intervals carried their
values) is checked from each t interval's mean, std and n; a test whose values it lacks
(sign-flip) is taken as stored and counted as such.

Stated margins (the region's ``margin``), the "contradicted at the paper's setting" outcome
(an inconclusive "any" family whose ``primary`` member is not reproduced after Holm), the
``normality_only`` mark and the catalogue's rule (no entry tallied twice; tallied rows
without an entry counted) are checked where the report carries them; older reports carry
none.

Families nest: a member that is itself a family enters its parent's Holm step with its own
pair of p-values (:func:`family_p`: for "all" the largest member p_in and the smallest
Holm-adjusted p_out, for "any" the reverse), recomputed here from its members.
"""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass, field

import numpy as np
from scipy import stats

SIDE = 0.025
R, NR, INC, NOCH = "reproduced", "not reproduced", "inconclusive", "no change"
CONTRA = "contradicted at the paper's setting"  # an "any" family's primary reading fails
EXACT_UNITS = 6  # fewer: no exact sign-flip test of n values reaches 2.5% (2^-5 > 2.5%)
TALLIED = ("paper", "stand-in")
NOT_TESTABLE = "not testable here"
BUCKETS = (R, NR, CONTRA, INC, NOCH, "not run", NOT_TESTABLE)
CONTAINMENT = ("t", "welch", "log-ratio", "bootstrap over paths")
Z975 = stats.norm.ppf(0.975)


@dataclass
class Audit:
    problems: list[str] = field(default_factory=list)
    intervals: int = 0  # intervals recomputed from values (or mean, std, n)
    verdicts: int = 0  # member / claim verdicts recomputed
    holm: int = 0  # Holm verdicts recomputed
    families: int = 0
    taken: int = 0  # verdicts taken as stored (no values to recompute them)
    uncatalogued: int = 0  # tallied rows that name no catalogue entry

    def check(self, ok: bool, what: str) -> None:
        if not ok:
            self.problems.append(what)


# ------------------------------------------------------------------ regions
def region(claim: dict) -> tuple[float, float]:
    r = claim["region"]
    if isinstance(r, dict):
        return (-math.inf if r["low"] is None else r["low"],
                math.inf if r["high"] is None else r["high"])
    return parse_region(r)


def margin(claim: dict) -> float:
    """The region's stated tolerance m (0 when none): reproduced only inside the region by
    more than m, not reproduced only outside it by more than m."""
    r = claim["region"]
    return float(r.get("margin") or 0.0) if isinstance(r, dict) else 0.0


def shrunk(reg: tuple[float, float], m: float) -> tuple[float, float]:
    return reg[0] + m, reg[1] - m


def grown(reg: tuple[float, float], m: float) -> tuple[float, float]:
    return reg[0] - m, reg[1] + m


def parse_region(text: str) -> tuple[float, float]:
    """A format-1 region text as (low, high)."""
    if m := re.fullmatch(r"within \((\S+) − chance, 0\); chance (\S+)", text):
        return float(m[1]) - float(m[2]), 0.0
    if m := re.fullmatch(r"within (\S+) ± (\S+)", text):
        return float(m[1]) - float(m[2]), float(m[1]) + float(m[2])
    if m := re.fullmatch(r"within \[(\S+), (\S+)\]", text):
        return float(m[1]), float(m[2])
    if m := re.fullmatch(r"ratio ([<>]) (\S+)", text):
        b = math.log(float(m[2]))
        return (-math.inf, b) if m[1] == "<" else (b, math.inf)
    if m := re.fullmatch(r"([<>]) (\S+)(?: \(.*\))?", text):
        b = float(m[2])
        return (-math.inf, b) if m[1] == "<" else (b, math.inf)
    raise ValueError(f"region text {text!r} not understood")


# ------------------------------------------------------------------ tests
def _signflip_p_above(values, b: float) -> float:
    d = np.asarray(values, float) - b
    signs = np.array(list(itertools.product((1.0, -1.0), repeat=len(d))))
    sums = signs @ d
    return float(np.mean(sums >= d.sum() - 1e-12 * max(1.0, np.abs(d).sum())))


def _t_parts(iv: dict) -> tuple[float, float, float] | None:
    """(mean, standard error, df) of a t-type interval, from its values where it has them."""
    m = iv["method"]
    if m == "welch" and iv.get("values_a"):
        a, b = np.asarray(iv["values_a"]), np.asarray(iv["values_b"])
        va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
        df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
        return float(a.mean() - b.mean()), math.sqrt(va + vb), df
    if m in ("t", "log-ratio") and iv["n"] >= 2:
        if iv.get("values"):
            v = np.asarray(iv["values"], float)
            return float(v.mean()), float(v.std(ddof=1) / math.sqrt(len(v))), len(v) - 1
        if iv["std"]:
            return iv["mean"], iv["std"] / math.sqrt(iv["n"]), iv["n"] - 1
    return None


def p_above(iv: dict, b: float) -> float | None:
    """One-sided p of "above b"; None where the JSON lacks what it needs."""
    m = iv["method"]
    if m in ("exact", "deterministic", "worst run"):
        return 0.0 if iv["mean"] > b else 1.0
    if m.endswith("sign-flip"):
        return _signflip_p_above(iv["values"], b) if iv.get("values") else None
    parts = _t_parts(iv)
    if parts is not None:
        mean, se, df = parts
        return float(stats.t.sf((mean - b) / se, df))
    if iv["low"] is None or iv["high"] is None or not iv["high"] > iv["low"]:
        return 1.0
    se = (iv["high"] - iv["low"]) / (2 * Z975)
    return float(stats.norm.sf((iv["mean"] - b) / se))


def p_below(iv: dict, b: float) -> float | None:
    m = iv["method"]
    if m in ("exact", "deterministic", "worst run"):
        return 0.0 if iv["mean"] < b else 1.0
    if m.endswith("sign-flip"):
        return (_signflip_p_above([-v for v in iv["values"]], -b) if iv.get("values")
                else None)
    if (m not in ("t", "log-ratio", "welch") and
            (iv["low"] is None or iv["high"] is None or not iv["high"] > iv["low"])):
        return 1.0
    p = p_above(iv, b)
    return None if p is None else 1.0 - p


def p_in_out(iv: dict, reg: tuple[float, float], m: float = 0.0
             ) -> tuple[float, float] | None:
    """(p of "inside the region by more than m", p of "outside it by more than m")."""
    (in_lo, in_hi), (out_lo, out_hi) = shrunk(reg, m), grown(reg, m)
    ins, outs = [0.0], [1.0]
    for b, test in ((in_lo, p_above), (in_hi, p_below)):
        if math.isfinite(b):
            p = test(iv, b)
            if p is None:
                return None
            ins.append(p)
    for b, test in ((out_lo, p_below), (out_hi, p_above)):
        if math.isfinite(b):
            p = test(iv, b)
            if p is None:
                return None
            outs.append(p)
    return max(ins), min(outs)


# ------------------------------------------------------------------ intervals
def recompute_interval(iv: dict, reg, a: Audit, name: str) -> None:
    m, vals = iv["method"], iv.get("values") or []
    if m in ("t", "log-ratio") and iv["n"] >= 2:
        if vals:
            lo, hi = stats.ttest_1samp(vals, 0.0).confidence_interval(0.95)
            a.check(math.isclose(np.mean(vals), iv["mean"], rel_tol=1e-9, abs_tol=1e-12),
                    f"{name}: mean {iv['mean']} is not the mean of its values")
        elif iv["std"]:
            half = stats.t.ppf(0.975, iv["n"] - 1) * iv["std"] / math.sqrt(iv["n"])
            lo, hi = iv["mean"] - half, iv["mean"] + half
        else:
            return
    elif m == "welch" and iv.get("values_a"):
        lo, hi = stats.ttest_ind(iv["values_a"], iv["values_b"],
                                 equal_var=False).confidence_interval(0.95)
    elif m == "permutation z" and iv.get("values_a"):
        z = ranking_z(iv["values_a"], iv["values_b"])
        if z is None:
            return
        lo, hi = z - Z975, z + Z975
        a.check(math.isclose(z, iv["mean"], rel_tol=1e-9, abs_tol=1e-9),
                f"{name}: permutation z {iv['mean']} != {z} recomputed from its runs")
    elif m in ("exact", "deterministic") and vals:
        a.check(len(vals) == 1 and vals[0] == iv["mean"] == iv["low"] == iv["high"],
                f"{name}: a {m} value is its one number")
        a.intervals += 1
        return
    elif m == "worst run" and vals:
        lo, hi = reg  # the run with the least slack to the region's finite sides
        worst = min(vals, key=lambda v: min(v - lo, hi - v))
        a.check(math.isclose(worst, iv["mean"]), f"{name}: worst run {iv['mean']} != {worst}")
        a.intervals += 1
        return
    else:
        return
    a.intervals += 1
    for got, want, side in ((iv["low"], lo, "low"), (iv["high"], hi, "high")):
        a.check(got is not None and math.isclose(got, want, rel_tol=1e-6, abs_tol=1e-9),
                f"{name}: interval {side} {got} != {want}")


def ranking_z(runs_a, runs_b) -> float | None:
    """Φ⁻¹(1 − p) of the exact relabelling test of "the options rank differently on the two
    tasks": within-run mid-ranks, D = Σ_j (mean rank_A − mean rank_B)², p the share of the
    C(n_a + n_b, n_a) task relabellings with D at least the observed (None beyond 100,000
    relabellings, where the report samples them)."""
    ranks = np.concatenate([stats.rankdata(np.asarray(runs_a, float), axis=1),
                            stats.rankdata(np.asarray(runs_b, float), axis=1)])
    n, n_a = len(ranks), len(runs_a)
    if math.comb(n, n_a) > 100_000:
        return None

    def distance(chosen) -> float:
        mask = np.zeros(n, bool)
        mask[list(chosen)] = True
        return float(np.square(ranks[mask].mean(0) - ranks[~mask].mean(0)).sum())

    observed = distance(range(n_a))
    null = [distance(c) for c in itertools.combinations(range(n), n_a)]
    p = float(np.mean(np.asarray(null) >= observed - 1e-9 * max(observed, 1.0)))
    return float(stats.norm.isf(min(max(p, 1e-12), 1 - 1e-12)))


# ------------------------------------------------------------------ verdicts
def raw_verdict(iv: dict, reg, mg: float = 0.0) -> str | None:
    """The region rule with its margin ``mg`` (None: the values needed are not in the
    JSON)."""
    m = iv["method"]
    if iv["n"] < 2 and m not in ("exact", "deterministic", "worst run"):
        return INC
    if m.endswith("sign-flip") and iv.get("values") and all(v == 0 for v in iv["values"]):
        return NOCH
    (in_lo, in_hi), (out_lo, out_hi) = shrunk(reg, mg), grown(reg, mg)
    if m in ("exact", "deterministic", "worst run"):
        x = iv["mean"]
        return R if in_lo < x < in_hi else NR if (x <= out_lo or x >= out_hi) else INC
    if m in CONTAINMENT:
        low = -math.inf if iv["low"] is None else iv["low"]
        high = math.inf if iv["high"] is None else iv["high"]
        if in_lo < low and high < in_hi:
            return R
        return NR if (high <= out_lo or low >= out_hi) else INC
    ps = p_in_out(iv, reg, mg)
    if ps is None:
        return None
    return R if ps[0] < SIDE else NR if ps[1] < SIDE else INC


def holm(ps: list[float]) -> list[float]:
    """Holm's step-down adjusted p-values (Holm 1979), in input order."""
    order = np.argsort(ps, kind="stable")
    m, out, running = len(ps), [0.0] * len(ps), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * ps[i]))
        out[i] = running
    return out


def family_verdict(raw: list[str], adjusted: list[str], rule: str) -> str:
    if rule == "all":
        if all(v == R for v in raw):
            return R
        return NR if NR in adjusted else INC
    if R in adjusted:
        return R
    return NR if all(v == NR for v in raw) else INC


def _format1(iv: dict) -> dict:
    """Format 1 wrote a deterministic flows value as a zero-width ``t`` interval of n = 1:
    read it as the deterministic number it is."""
    if (iv["method"] == "t" and iv["n"] == 1 and iv["std"] == 0
            and iv["low"] == iv["high"] == iv["mean"]):
        return {**iv, "method": "deterministic"}
    return iv


def _claim_verdict(c: dict, a: Audit, name: str) -> str:
    if c.get("not_run"):
        return c["verdict"]
    if c["verdict"].startswith(NOT_TESTABLE):  # its precondition's verdict is checked itself
        a.taken += 1
        return c["verdict"]
    iv, reg = _format1(c["interval"]), region(c)
    v = raw_verdict(iv, reg, margin(c))
    if v is None:
        a.taken += 1
        return c["verdict"]
    a.verdicts += 1
    recompute_interval(iv, reg, a, name)
    a.check(v == c["verdict"], f"{name}: verdict {c['verdict']!r}, recomputed {v!r}")
    return v


def _single_p(c: dict) -> tuple[float, float] | None:
    if c.get("not_run") or c["interval"] is None:
        return None
    return p_in_out(_format1(c["interval"]), region(c), margin(c))


def _is_judged(c: dict, v: str) -> bool:
    """A member takes part in its family's adjusted side: a family always; a single claim
    unless it has one noisy value or no change in every seed."""
    if c.get("members"):
        return True
    iv = c["interval"]
    spread = iv["n"] >= 2 or iv["method"] in ("exact", "deterministic", "worst run")
    return spread and v != NOCH


def family_p(pairs: list[tuple[float, float]], judged: list[bool],
             rule: str) -> tuple[float, float]:
    """A family's (p_in, p_out): for "all", p_in is the largest member p_in (Berger's
    intersection-union test; an unjudged member counts 1) and p_out the smallest
    Holm-adjusted p_out of a judged member; for "any" the reverse."""
    def big(ps):
        return max(p if j else 1.0 for p, j in zip(ps, judged, strict=True))

    def adj(ps):
        return min((p for p, j in zip(holm(ps), judged, strict=True) if j), default=1.0)

    p_in, p_out = [p for p, _ in pairs], [q for _, q in pairs]
    return (big(p_in), adj(p_out)) if rule == "all" else (adj(p_in), big(p_out))


def _family(c: dict, a: Audit, name: str) -> tuple[str, tuple[float, float] | None]:
    """The family's verdict and p pair, recomputed from its members (recursively: a
    member that is itself a family is judged the same way and enters with its pair)."""
    members = c["members"]
    judged = [_judge(m, a, f"{name} [{m.get('label')}]") for m in members]
    raw = [v for v, _ in judged]
    if c.get("not_run"):
        return c["verdict"], None
    if c["verdict"].startswith(NOT_TESTABLE):  # its precondition failed: not judged
        a.taken += 1
        return c["verdict"], None
    ps = [p for _, p in judged]
    if any(p is None for p in ps):  # a member's test lacks its values: take Holm as stored
        adjusted = [m["verdict_holm"] for m in members]
        a.taken += 1
        pair = None
    else:
        p_in, p_out = holm([p[0] for p in ps]), holm([p[1] for p in ps])
        ok = [_is_judged(m, v) for m, v in zip(members, raw, strict=True)]
        adjusted = [(R if pi < SIDE else NR if po < SIDE else INC) if j else v
                    for v, j, pi, po in zip(raw, ok, p_in, p_out, strict=True)]
        for m, h in zip(members, adjusted, strict=True):
            a.holm += 1
            a.check(h == m["verdict_holm"],
                    f"{name} [{m.get('label')}]: Holm {m['verdict_holm']!r}, recomputed {h!r}")
        pair = family_p(ps, ok, c["family_rule"])
    v = family_verdict(raw, adjusted, c["family_rule"])
    if v == INC and c["family_rule"] == "any" and c.get("primary"):
        at = {m.get("label"): h for m, h in zip(members, adjusted, strict=True)}
        v = CONTRA if at.get(c["primary"]) == NR else v
    a.families += 1
    a.check(v == c["verdict"], f"{name}: family verdict {c['verdict']!r}, recomputed {v!r}")
    return v, pair


def _judge(c: dict, a: Audit, name: str) -> tuple[str, tuple[float, float] | None]:
    if c.get("members"):
        return _family(c, a, name)
    return _claim_verdict(c, a, name), _single_p(c)


def _normality_only(c: dict, v: str) -> bool:
    """A decided verdict that rests on a t-type interval of fewer units than an exact test
    of the same values needs (a family: some decided member)."""
    if v not in (R, NR, CONTRA) or c.get("not_run"):
        return False
    if c.get("members"):
        return any(_normality_only(m, m["verdict"]) for m in c["members"])
    iv = c["interval"]
    if iv is None:
        return False
    if iv["method"] == "welch" and iv.get("values_a"):
        na, nb = len(iv["values_a"]), len(iv["values_b"])
        return 1 / math.comb(na + nb, na) >= SIDE
    return iv["method"] in ("t", "log-ratio") and iv["n"] < EXACT_UNITS


def _catalogue(report: dict, a: Audit) -> None:
    """A report that names catalogue entries: no entry is tallied twice; tallied rows that
    name none are counted (``uncatalogued``: the catalogue's own test requires none)."""
    claims = report["claims"]
    if not any("catalogue" in c for c in claims):
        return  # reports before the catalogue
    seen: dict[str, int] = {}
    for i, c in enumerate(claims):
        if c["kind"] not in TALLIED:
            continue
        cid = c.get("catalogue")
        if not cid:
            a.uncatalogued += 1
            continue
        a.check(cid not in seen, f"claims[{i}]: catalogue entry {cid!r} already tallied by "
                                 f"claims[{seen.get(cid)}]")
        seen.setdefault(cid, i)


def audit(report: dict) -> Audit:
    a = Audit()
    first = next(iter(report["tally"]["kinds"].values()), {})
    buckets = tuple(first) or BUCKETS  # the report's own columns (older reports have fewer)
    papers = {p: dict.fromkeys(buckets, 0) for p in report["tally"]["papers"]}
    kinds = {k: dict.fromkeys(buckets, 0) for k in report["tally"]["kinds"]}
    for i, c in enumerate(report["claims"]):
        name = f"claims[{i}] {c['claim'][:60]}"
        v, _ = _judge(c, a, name)
        if "normality_only" in c:
            a.check(c["normality_only"] == _normality_only(c, v),
                    f"{name}: normality_only {c['normality_only']}, recomputed "
                    f"{_normality_only(c, v)}")
        bucket = ("not run" if v.startswith("not run") else
                  NOT_TESTABLE if v.startswith(NOT_TESTABLE) else v)
        kinds.setdefault(c["kind"], dict.fromkeys(buckets, 0))[bucket] += 1
        if c["kind"] in TALLIED:
            papers.setdefault(c["paper"], dict.fromkeys(buckets, 0))[bucket] += 1
    _catalogue(report, a)
    a.check(papers == report["tally"]["papers"],
            f"tally per paper {report['tally']['papers']}, recomputed {papers}")
    a.check(kinds == report["tally"]["kinds"],
            f"tally per kind {report['tally']['kinds']}, recomputed {kinds}")
    return a
