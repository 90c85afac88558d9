"""A claim of a paper, what tokengeo measured for it, and its verdicts.

Each claim has a kind (:data:`CLAIM_KINDS`), a direction verdict (the region rule of
:mod:`tokengeo.experiments.stats`), a Holm-adjusted verdict when it belongs to a family, a
verdict against the paper's own effect (``vs_paper``) when the paper gives one, and, for
undecided ones, the power numbers (:mod:`tokengeo.experiments.power`). A *family* (five α,
several k) is one claim whose ``members`` are claims: one row in the summary, its members in
a detail table, and one verdict (:func:`family_verdict`):

* ``all`` (every member must hold: an intersection–union test, Berger 1982): *reproduced*
  when every member is reproduced on its own (no adjustment: each member's test at 2.5%
  bounds the family's error); *not reproduced* only when some member's Holm-adjusted
  verdict is (the union of "this member fails" needs the multiplicity correction);
* ``any`` (some member must hold): the reverse — *reproduced* only when some member's
  Holm-adjusted verdict is; *not reproduced* when every member is, unadjusted;
* otherwise *inconclusive*. ``verdict_raw`` keeps the unadjusted combination for the reader.

**Nested families.** Every claim carries a pair of p-values (:meth:`Claim.p_pair`): ``p_in``
tests "inside the region" (the claim holds), ``p_out`` "outside it" (it fails). A single
claim's are :func:`~tokengeo.experiments.stats.p_inside` / ``p_outside`` of its interval; a
member that cannot be judged (one noisy value, or "no change" in every seed) counts as
(1, 1) on its family's own side. A family's pair follows from its rule, the same rule as its
verdict:

* ``all``: ``p_in = max`` of the members' ``p_in`` (Berger 1982: the intersection–union test
  of "every member holds" at level α rejects when each member's does), ``p_out`` = the
  smallest Holm-adjusted member ``p_out`` (Holm 1979; ``min(1, m · min p_out)``, Holm's first
  step, when every member is judged);
* ``any``: the reverse, ``p_in`` = the smallest Holm-adjusted member ``p_in``,
  ``p_out = max`` of the members' ``p_out``.

A family whose members are families is judged by exactly the same rule on its members'
pairs: Holm across the members' ``p_in`` (``p_out``) through
:func:`~tokengeo.experiments.verdicts.holm`, the unadjusted side on the members' own
verdicts. This is valid by closure: an inner family's pair is itself a valid p-value for
its hypothesis at every level (an IUT max, or a Bonferroni-bounded Holm minimum), so the
outer Holm/Bonferroni step over m such p-values controls the family-wise error of the whole
tree at 2.5% per side; an inner family's members are then effectively tested at
2.5% / (outer m · inner m) at most, which is why their ``holm_size`` (the power numbers) is
that product (Bonferroni-conservative). For a flat family nothing changes: the members'
pairs are their intervals' p-values, as before.

**Findings.** A paper's claim ("Laplacian heads raise test accuracy") is one tallied row:
an ``any`` family whose members are its pre-specified readings (at k = H, at some k < H, as
a trend over k, at every block). The claim holds when some reading holds after the
multiplicity adjustment, and fails when every reading fails; the readings are shown, never
tallied, in its detail table.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from tokengeo.experiments import power
from tokengeo.experiments.stats import (
    CONTRADICTED,
    INCONCLUSIVE,
    NO_CHANGE,
    NOT_REPRODUCED,
    NOT_TESTABLE,
    REPRODUCED,
    Interval,
    Region,
    p_inside,
    p_outside,
    standard_error,
    verdict,
    verdict_from_p,
)
from tokengeo.experiments.verdicts import holm, vs_paper

CLAIM_KINDS = ("paper", "stand-in", "sanity", "construction", "new")
TALLIED_KINDS = ("paper", "stand-in")  # the headline tally per paper
FAMILY_RULES = ("any", "all")
EXACT_MIN_UNITS = 6  # the fewest seeds an exact sign-flip test can decide with (2^-6 < 2.5%)
NORMALITY_NOTE = ("Decided under normality only: an exact test of the same values (sign-flip, "
                  "or relabelling for two samples) could not reach 2.5% with this few units.")


@dataclass
class Claim:
    """One line of the report's summary table.

    ``measured`` is the quantity the rule judges (often a paired difference over seeds);
    ``detail`` holds the per-setting numbers a reader wants next to it.

    ``kind`` says what the claim is to the paper (see :data:`CLAIM_KINDS`): ``paper`` (the
    paper states it, measured as stated), ``stand-in`` (the paper's claim through a proxy
    model, data set or metric, named in ``proxy``), ``sanity`` (a precondition the other
    claims need), ``construction`` (holds by construction or is pinned by a unit test) or
    ``new`` (tokengeo's own question). ``paper_effect`` is the paper's own number in the
    unit of ``measured`` (on the log scale for a ratio), when the paper gives one.
    """

    suite: str
    text: str
    source: str
    paper_value: str
    quantity: str
    region: Region
    measured: Interval | None = None
    not_run: str | None = None
    detail: str = ""
    figures: list[str] = field(default_factory=list)
    kind: str = "paper"
    proxy: str | None = None
    paper_effect: float | None = None
    members: list[Claim] = field(default_factory=list)
    rule_of_family: str = "any"
    label: str = ""  # a member's name in its family's table (k=2, α=linear)
    margin: float | None = None  # equivalence margin of a paper value "≈ 0" or a tolerance
    # a sanity claim this one needs (DINO beats a random backbone at segmentation): unless it
    # is reproduced, this claim is "not testable here" and counted apart
    precondition: Claim | None = field(default=None, repr=False)
    holm_size: int = 1  # the members in this claim's family (power at 2.5% / m)
    untestable: str | None = None  # why the measurement cannot test the claim (not judged)
    # the id of the one catalogue entry (tokengeo.experiments.catalogue) a tallied row tests
    catalogue: str | None = None
    # a family's member at the paper's own setting (its label): an "any" family that is
    # inconclusive while that member is not reproduced after Holm is CONTRADICTED
    primary: str | None = None

    def __post_init__(self) -> None:
        if self.paper_effect == 0 and not (self.margin or 0) > 0:
            raise ValueError(f"claim {self.text!r}: a paper effect of 0 (\"≈ 0\") needs an "
                             "equivalence margin; pass margin=")
        if self.kind not in CLAIM_KINDS:
            raise ValueError(f"claim kind {self.kind!r}; choose one of {CLAIM_KINDS}")
        if self.rule_of_family not in FAMILY_RULES:
            raise ValueError(f"family rule {self.rule_of_family!r}; choose {FAMILY_RULES}")
        if self.primary is not None and self.primary not in {m.label for m in self.members}:
            raise ValueError(f"claim {self.text!r}: primary reading {self.primary!r} is not "
                             "a member's label")

    # ------------------------------------------------------------------ verdicts
    @property
    def is_family(self) -> bool:
        return bool(self.members)

    def _missing(self) -> str | None:
        if self.not_run is not None:
            return f"not run: {self.not_run}"
        if self.untestable is not None:
            return f"{NOT_TESTABLE}: {self.untestable}"
        if self.precondition is not None and self.precondition.verdict != REPRODUCED:
            return (f"{NOT_TESTABLE}: the precondition \"{self.precondition.text}\" is "
                    f"{self.precondition.verdict.split(':')[0]}")
        if self.is_family:
            return next((m._missing() for m in self.members if m._missing()), None)
        if self.measured is None:
            return "not run: no measurement"
        return None

    @property
    def verdict(self) -> str:
        """The claim's one verdict; a family's by :func:`family_verdict`."""
        missing = self._missing()
        if missing:
            return missing
        if self.is_family:
            holm_verdicts = self.member_holm()
            v = family_verdict([m.verdict for m in self.members], holm_verdicts,
                               self.rule_of_family)
            return self._at_primary(v, holm_verdicts)
        return verdict(self.measured, self.region)

    def _at_primary(self, v: str, holm_verdicts: list[str]) -> str:
        """:data:`CONTRADICTED` for an inconclusive "any" family whose reading at the
        paper's own setting (``primary``) is not reproduced after Holm; else ``v``."""
        if v != INCONCLUSIVE or self.primary is None or self.rule_of_family != "any":
            return v
        at = dict(zip((m.label for m in self.members), holm_verdicts, strict=True))
        return CONTRADICTED if at.get(self.primary) == NOT_REPRODUCED else v

    @property
    def normality_only(self) -> bool:
        """Whether the verdict is decided only under normality: a t-type interval
        (t, log-ratio, Welch) on so few units that the exact test of the same values
        (sign-flip; a relabelling for Welch) could not reach 2.5% whatever the data. A
        family: some decided member is. The verdict stands; the report says so."""
        if self._missing() or self.verdict not in (REPRODUCED, NOT_REPRODUCED, CONTRADICTED):
            return False
        if self.is_family:
            return any(m.normality_only for m in self.members)
        iv = self.measured
        if iv.method == "welch":
            na, nb = len(iv.values), len(iv.values_b)
            return na > 0 and nb > 0 and 1 / math.comb(na + nb, na) >= power.ALPHA
        return iv.method in ("t", "log-ratio") and iv.n < EXACT_MIN_UNITS

    @property
    def verdict_raw(self) -> str:
        """A family's unadjusted combination of its members' verdicts (shown, not tallied)."""
        missing = self._missing()
        if missing or not self.is_family:
            return missing or self.verdict
        return _combine([m.verdict_raw for m in self.members], self.rule_of_family)

    @property
    def judged(self) -> bool:
        """Whether the claim takes part in its family's adjusted side: a family always; a
        single claim unless it has one noisy value or no change in every seed."""
        if self.is_family:
            return True
        iv = self.measured
        return iv is not None and iv.has_spread and verdict(iv, self.region) != NO_CHANGE

    def p_pair(self) -> tuple[float, float]:
        """(p_in, p_out): the p-values of "inside the region" and "outside it" (a family's
        from its members' by its rule; see the module docstring)."""
        if not self.is_family:
            return p_inside(self.measured, self.region), p_outside(self.measured, self.region)
        pairs = [m.p_pair() for m in self.members]
        judged = [m.judged for m in self.members]
        return family_p([p for p, _ in pairs], [q for _, q in pairs], judged,
                        self.rule_of_family)

    def _holm_pairs(self) -> tuple[list[float], list[float]]:
        pairs = [m.p_pair() for m in self.members]
        return holm([p for p, _ in pairs]), holm([q for _, q in pairs])

    def member_holm(self) -> list[str]:
        """The members' verdicts, Holm-adjusted across the family (both tests, on the
        members' p pairs; a member that is not judged keeps its own verdict)."""
        p_in, p_out = self._holm_pairs()
        return [verdict_from_p(pi, po) if m.judged else m.verdict
                for m, pi, po in zip(self.members, p_in, p_out, strict=True)]

    @property
    def vs_paper(self) -> str | None:
        if self._missing() or self.paper_effect is None:
            return None
        if self.is_family:
            seen = {m.vs_paper for m in self.members} - {None}
            return seen.pop() if len(seen) == 1 else ("mixed" if seen else None)
        return vs_paper(self.measured, self.paper_effect, self.margin)

    # ------------------------------------------------------------------ power
    def _spread(self) -> tuple[float, int, int] | None:
        """(σ per unit, units per group, groups) of the measurement, or None."""
        iv = self.measured
        if iv is None or iv.exact or iv.n < 2:
            return None
        if iv.method == "welch":
            per_group = max(2, iv.n // 2)
            return iv.std * math.sqrt(per_group / 2), per_group, 2
        if iv.std > 0 and iv.method in ("t", "log-ratio", "sign-flip", "log-ratio sign-flip"):
            return iv.std, iv.n, 1
        se = standard_error(iv)
        return (se * math.sqrt(iv.n), iv.n, 1) if se else None

    def _boundary(self) -> float | None:
        r, m = self.region, self.measured.mean if self.measured else 0.0
        ends = [b for b in (r.low, r.high) if math.isfinite(b)]
        return min(ends, key=lambda b: abs(b - m)) if ends else None

    def _exact_test(self) -> bool:
        return self.measured is not None and self.measured.method.endswith("sign-flip")

    @property
    def mde_80(self) -> float | None:
        """Smallest distance from the region's boundary detected at 80% power (t
        approximation) at the level the claim is judged at (2.5% / m in a family of m, as
        :attr:`seeds_for_80`); None where no effect is detectable (an exact test on n ≤ 5 seeds)."""
        spread = None if self.is_family else self._spread()
        if spread is None or (self._exact_test() and spread[1] < EXACT_MIN_UNITS):
            return None
        return power.mde(spread[0], spread[1], spread[2],
                         alpha=power.ALPHA / max(1, self.holm_size))

    @property
    def power_basis(self) -> str | None:
        """What ``seeds_for_80`` detects: the paper's effect, unless the data already
        exclude it (``vs_paper`` smaller or opposite); then the observed effect, unless that
        lies within one standard error of the boundary: then ``"no effect"`` (no seed count
        is meaningful)."""
        if self.is_family or self._spread() is None or self._boundary() is None:
            return None
        if self.paper_effect is None or self.vs_paper in ("smaller", "opposite"):
            se = standard_error(self.measured)
            if se and abs(self.measured.mean - self._boundary()) < se:
                return "no effect"
            return "observed"
        return "paper"

    def _seeds(self, upper: bool) -> int | None:
        basis = self.power_basis
        if basis not in ("paper", "observed"):
            return None
        target = self.paper_effect if basis == "paper" else self.measured.mean
        sd, n_units, groups = self._spread()
        if upper:
            sd = power.sd_upper(sd, n_units)
        n = power.units_for(target - self._boundary(), sd, groups,
                            alpha=power.ALPHA / max(1, self.holm_size))
        if n is not None and self._exact_test():
            return max(n, EXACT_MIN_UNITS)  # 2^-n < 2.5% needs 6 seeds
        return n

    @property
    def seeds_for_80(self) -> int | None:
        """Seeds for 80% power at the observed spread (at 2.5% / m in a family of m)."""
        return self._seeds(upper=False)

    @property
    def seeds_for_80_upper(self) -> int | None:
        """The same at the upper 95% confidence bound of the spread (σ from few seeds is
        uncertain: a conservative count)."""
        return self._seeds(upper=True)

    # ------------------------------------------------------------------ text
    @property
    def rule(self) -> str:
        if self.is_family:
            if self.rule_of_family == "all":
                how = ("every member must hold: reproduced if every member is reproduced; "
                       "not reproduced if some member is, after Holm's adjustment")
            else:
                how = ("some member must hold: reproduced if some member is reproduced "
                       "after Holm's adjustment; not reproduced if every member is")
            first = self.members[0]
            if any(m.is_family for m in self.members):
                return (f"{how}; inconclusive otherwise. Each member (a reading of the "
                        "claim) by its own rule, a family member by its family's rule on its "
                        "own members (the members' table); Holm across members on their "
                        "p-value pairs")
            each = first.rule if _shared_quantity(self.members) else (
                f"reproduced if the 95% interval of its own quantity (the members' table) "
                f"lies {first.region.text}; not reproduced if it lies outside; inconclusive "
                "otherwise")
            return f"{how}; inconclusive otherwise. Each member: {each}"
        how = {"sign-flip": " (exact sign-flip test)",
               "worst run": " (the worst run: a claim about every run)",
               "log-ratio": " (log scale, shown as a ratio)"}.get(
                   self.measured.method if self.measured else "", "")
        return (f"reproduced if the 95% interval of {self.quantity}{how} lies "
                f"{self.region.text}; not reproduced if it lies outside; inconclusive "
                "otherwise")

    def measured_text(self) -> str:
        if self.is_family:
            done = [m for m in self.members if m.measured is not None or m.is_family]
            if not done:
                return "—"
            return "; ".join(f"{m.label}: {m.measured.fmt() if m.measured else m.verdict}"
                             for m in done)
        return self.measured.fmt() if self.measured is not None else "—"

    def paper_effect_text(self) -> str:
        if self.paper_effect is None:
            return ""
        first = self
        while first.measured is None and first.members:
            first = first.members[0]
        scale = first.measured.scale if first.measured else "linear"
        if scale == "log":
            return f"×{math.exp(self.paper_effect):.3g}"
        return f"{self.paper_effect:+.3g}"

    def to_dict(self, paper: str = "") -> dict:
        """The claim as ``report.json`` holds it (``report.schema.json``)."""
        out = {
            "suite": self.suite, "paper": paper, "claim": self.text, "kind": self.kind,
            "proxy": self.proxy, "source": self.source, "paper_value": self.paper_value,
            "quantity": self.quantity, "region": self.region.to_dict(),
            "margin": self.margin, "interval": self._interval_dict(),
            "verdict": self.verdict,
            "paper_effect": self.paper_effect, "vs_paper": self.vs_paper,
            "mde_80": self.mde_80, "seeds_for_80": self.seeds_for_80,
            "seeds_for_80_upper": self.seeds_for_80_upper, "holm_size": self.holm_size,
            "power_basis": self.power_basis,
            "not_run": self._not_run(), "rule": self.rule, "detail": self.detail,
            "catalogue": self.catalogue, "normality_only": self.normality_only,
        }
        if self.normality_only:
            out["detail"] = " ".join([self.detail, NORMALITY_NOTE]).strip()
        if self.is_family:
            out["family_rule"] = self.rule_of_family
            out["primary"] = self.primary
            out["verdict_raw"] = self.verdict_raw
            out["members"] = [dict(m.to_dict(paper), label=m.label, verdict_holm=h)
                              for m, h in zip(self.members, self.members_holm(),
                                              strict=True)]
        return out

    def descendants(self) -> list[Claim]:
        """Every member below this claim, depth first."""
        return [d for m in self.members for d in (m, *m.descendants())]

    def _not_run(self) -> str | None:
        missing = self._missing()
        return missing if missing and missing.startswith("not run") else None

    def _interval_dict(self) -> dict | None:
        if self.measured is None:
            return None
        out = self.measured.to_dict()
        if self.margin is not None:
            out["margin"] = self.margin
        return out

    def members_holm(self) -> list[str]:
        """The members' Holm-adjusted verdicts (their raw ones where some did not run)."""
        if self._missing():
            return [m.verdict for m in self.members]
        return self.member_holm()


def _shared_quantity(members: list[Claim]) -> bool:
    return len({m.quantity for m in members}) == 1


def family_verdict(raw: list[str], holm: list[str], rule: str) -> str:
    """One verdict for a family from its members' raw and Holm-adjusted verdicts.

    ``all``: reproduced iff every raw verdict is; not reproduced iff some Holm-adjusted
    verdict is. ``any``: reproduced iff some Holm-adjusted verdict is; not reproduced iff
    every raw verdict is. Else inconclusive (see the module docstring)."""
    if rule == "all":
        if all(v == REPRODUCED for v in raw):
            return REPRODUCED
        return NOT_REPRODUCED if NOT_REPRODUCED in holm else INCONCLUSIVE
    if REPRODUCED in holm:
        return REPRODUCED
    return NOT_REPRODUCED if all(v == NOT_REPRODUCED for v in raw) else INCONCLUSIVE


def family_p(p_in: list[float], p_out: list[float], judged: list[bool],
             rule: str) -> tuple[float, float]:
    """A family's (p_in, p_out) from its members' (see the module docstring): the rule's
    unadjusted side is the largest member p-value (an unjudged member counts as 1), its
    adjusted side the smallest Holm-adjusted p-value of a judged member (1 if none)."""
    def largest(ps: list[float]) -> float:
        return max((p if j else 1.0) for p, j in zip(ps, judged, strict=True))

    def adjusted(ps: list[float]) -> float:
        return min((p for p, j in zip(holm(ps), judged, strict=True) if j), default=1.0)

    if rule == "all":
        return largest(p_in), adjusted(p_out)
    return adjusted(p_in), largest(p_out)


def _combine(verdicts: list[str], rule: str) -> str:
    """A family's verdict from its members' (``any`` or ``all`` of them)."""
    hit = [v == REPRODUCED for v in verdicts]
    miss = [v == NOT_REPRODUCED for v in verdicts]
    if rule == "any":
        return REPRODUCED if any(hit) else NOT_REPRODUCED if all(miss) else INCONCLUSIVE
    return REPRODUCED if all(hit) else NOT_REPRODUCED if any(miss) else INCONCLUSIVE


def _set_holm_size(members: list[Claim], outer: int) -> None:
    """A member's power is at Holm's first step, 2.5% / m; an inner family's members at
    2.5% / (outer m · their own m), the Bonferroni-conservative level of the closure."""
    for m in members:
        m.holm_size = outer * len(members)
        _set_holm_size(m.members, m.holm_size)


def family(suite: str, text: str, members: list[Claim], rule: str = "any",
           **fields) -> Claim:
    """One row for a family of related claims; fields default to the first member's."""
    first = members[0]
    quantity = first.quantity if _shared_quantity(members) else (
        "per member: " + "; ".join(f"{m.label or m.text}: {m.quantity}" for m in members))
    base = {"source": first.source, "paper_value": first.paper_value,
            "quantity": quantity, "region": first.region, "kind": first.kind,
            "proxy": first.proxy, "paper_effect": first.paper_effect, "margin": first.margin}
    _set_holm_size(members, 1)
    return Claim(suite, text, **{**base, **fields}, members=members, rule_of_family=rule)
