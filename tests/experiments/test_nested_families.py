"""Nested families (issue 40 item 11): a family of families is judged by the same rule on
its members' p-value pairs; flat families keep today's verdicts."""

from __future__ import annotations

import itertools
import random

import pytest

from tokengeo.experiments.claims import Claim, family, family_verdict
from tokengeo.experiments.stats import (
    INCONCLUSIVE,
    NOT_REPRODUCED,
    REPRODUCED,
    Interval,
    Region,
    mean_interval,
    p_inside,
    p_outside,
)
from tokengeo.experiments.verdicts import holm_verdicts

ALPHA = 0.025


def _single(rng: random.Random, label: str, kind: str = "t") -> Claim:
    if kind == "no spread":
        iv = mean_interval([rng.gauss(0, 1)])
    elif kind == "no change":
        iv = mean_interval([0.0] * rng.choice([4, 6, 7]), discrete=True)
    elif kind == "sign-flip":
        iv = mean_interval([rng.choice([-2, -1, 0, 1, 2, 3]) for _ in range(7)], discrete=True)
    else:
        shift = rng.choice([-3.0, -1.0, -0.3, 0.0, 0.3, 1.0, 3.0])
        iv = mean_interval([rng.gauss(shift, 1.0) for _ in range(rng.randint(3, 8))])
    region = rng.choice([Region.above(0.0), Region.below(0.0), Region.around(0.0, 0.5)])
    return Claim("s", f"claim {label}", "src", "pv", "q", region, measured=iv, label=label)


def _flat(rng: random.Random) -> tuple[list[Claim], str]:
    kinds = ["t"] * 6 + ["sign-flip", "no spread", "no change"]
    members = [_single(rng, str(i), rng.choice(kinds)) for i in range(rng.randint(1, 5))]
    return members, rng.choice(["all", "any"])


@pytest.mark.parametrize("seed", range(300))
def test_flat_family_verdicts_unchanged(seed):
    """Today's rule: family_verdict over the raw verdicts and holm_verdicts of the members'
    (interval, region) pairs."""
    rng = random.Random(seed)
    members, rule = _flat(rng)
    before = family_verdict([m.verdict for m in members],
                            holm_verdicts([(m.measured, m.region) for m in members]), rule)
    f = family("s", "fam", members, rule=rule)
    assert f.verdict == before
    assert f.members_holm() == holm_verdicts([(m.measured, m.region) for m in members])


# ---- a slow reference: closed testing with Bonferroni local tests, by enumeration ----

def _closed_rejects(ps: list[float], alpha: float = ALPHA) -> list[bool]:
    """H_i is rejected iff every intersection H_S with i in S is rejected by its
    Bonferroni test (min_{j in S} p_j < alpha / |S|) (Marcus, Peritz & Gabriel 1976)."""
    idx = range(len(ps))
    return [all(min(ps[j] for j in s) < alpha / len(s)
                for r in range(1, len(ps) + 1) for s in itertools.combinations(idx, r)
                if i in s) for i in idx]


def _ref(c: Claim) -> tuple[str, float, float]:
    """(verdict, p_in, p_out) from first principles: a single claim's tests; an "all"
    family: IUT (max) for holding, closed testing for "some member fails"; "any": the
    reverse."""
    if not c.members:
        return c.verdict, p_inside(c.measured, c.region), p_outside(c.measured, c.region)
    refs = [_ref(m) for m in c.members]
    judged = [bool(m.members) or c_judged(m) for m in c.members]
    p_in = [p for _, p, _ in refs]
    p_out = [q for _, _, q in refs]
    raw = [v for v, _, _ in refs]
    rej_in = [r and j for r, j in zip(_closed_rejects(p_in), judged, strict=True)]
    rej_out = [r and j for r, j in zip(_closed_rejects(p_out), judged, strict=True)]
    # the family's own p-values: the smallest level at which the closure / IUT rejects
    adj_in = min((_smallest_level(p_in, i) for i in range(len(p_in)) if judged[i]),
                 default=1.0)
    adj_out = min((_smallest_level(p_out, i) for i in range(len(p_out)) if judged[i]),
                  default=1.0)
    big_in = max(p if j else 1.0 for p, j in zip(p_in, judged, strict=True))
    big_out = max(p if j else 1.0 for p, j in zip(p_out, judged, strict=True))
    if c.rule_of_family == "all":
        v = (REPRODUCED if all(x == REPRODUCED for x in raw)
             else NOT_REPRODUCED if any(rej_out) else INCONCLUSIVE)
        return v, big_in, adj_out
    v = (REPRODUCED if any(rej_in)
         else NOT_REPRODUCED if all(x == NOT_REPRODUCED for x in raw) else INCONCLUSIVE)
    return v, adj_in, big_out


def _smallest_level(ps: list[float], i: int) -> float:
    """The closure's adjusted p-value of H_i: max over S ∋ i of |S| · min_{j∈S} p_j."""
    idx = range(len(ps))
    return min(1.0, max(len(s) * min(ps[j] for j in s)
                        for r in range(1, len(ps) + 1)
                        for s in itertools.combinations(idx, r) if i in s))


def c_judged(m: Claim) -> bool:
    return m.judged


@pytest.mark.parametrize("seed", range(200))
def test_nested_family_matches_closed_testing(seed):
    """A finding ("any", or "all" for every third seed) of [an "all" family, an "any"
    family, singles] equals the closed-testing construction computed by enumeration."""
    rng = random.Random(1000 + seed)
    inner_all = family("s", "every block", [_single(rng, f"b{i}") for i in range(3)],
                       rule="all", label="every block")
    inner_any = family("s", "some k", [_single(rng, f"k{i}") for i in range(2)],
                       rule="any", label="some k<H")
    singles = [_single(rng, "k=H"), _single(rng, "trend")]
    outer = family("s", "finding", [singles[0], inner_any, singles[1], inner_all],
                   rule="any" if seed % 3 else "all")
    v, p_in, p_out = _ref(outer)
    assert outer.verdict == v
    got = outer.p_pair()
    assert got == pytest.approx((p_in, p_out))
    for m in outer.members:
        assert m.p_pair() == pytest.approx(_ref(m)[1:])


def test_nested_holm_size_is_outer_times_inner():
    rng = random.Random(3)
    blocks = [_single(rng, f"b{i}") for i in range(4)]
    inner = family("s", "every block", blocks, rule="all", label="every block")
    family("s", "finding", [_single(rng, "k=H"), inner, _single(rng, "t")])
    assert inner.holm_size == 3
    assert [b.holm_size for b in blocks] == [12] * 4
    family("s", "again", [inner, _single(rng, "t")])  # regrouped: sizes follow, not compound
    assert inner.holm_size == 2 and [b.holm_size for b in blocks] == [8] * 4


def test_nested_any_of_all_reproduced_by_the_inner_family():
    """A clear inner "all" family carries an "any" finding whose other readings are null."""
    strong = [Claim("s", f"b{i}", "src", "pv", "q", Region.above(0.0),
                    measured=Interval.exact_value(1.0, "deterministic"), label=f"b{i}")
              for i in range(3)]
    inner = family("s", "blocks", strong, rule="all", label="every block")
    null = Claim("s", "k=H", "src", "pv", "q", Region.above(0.0),
                 measured=mean_interval([-0.1, 0.2, 0.05, -0.02]), label="k=H")
    outer = family("s", "finding", [null, inner])
    assert inner.p_pair() == (0.0, 1.0)
    assert outer.verdict == REPRODUCED
    assert outer.verdict_raw == REPRODUCED
    assert outer.to_dict()["members"][1]["members"][0]["label"] == "b0"


def test_report_shows_nested_members_as_parent_child_rows(tmp_path):
    """The finding's detail table lists each reading, then a nested family's members as
    ``parent › child`` rows, in report.md and report.html; only the finding is tallied."""
    from tokengeo.experiments.report import SuiteOutput, render_html, render_markdown
    from tokengeo.experiments.summary import report_json

    rng = random.Random(7)
    blocks = family("s", "every block", [_single(rng, f"block {i}") for i in (1, 2)],
                    rule="all", label="every block at k=H")
    finding = family("s", "Laplacian heads do X", [_single(rng, "k=H"), blocks],
                     kind="paper")
    suites = [SuiteOutput("s", "Suite", "Paper", [finding], paper_key="P")]
    md = render_markdown(suites, "r", [], tmp_path)
    assert "| every block at k=H › block 1 |" in md and "| every block at k=H |" in md
    html = render_html(suites, "r", [], tmp_path)
    assert "every block at k=H › block 2" in html
    data = report_json(suites, "quick", "0", None)
    assert sum(data["tally"]["papers"]["P"].values()) == 1
    assert data["claims"][0]["members"][1]["members"][1]["label"] == "block 2"
    from tokengeo.reporting.blocks import render_claims

    block = render_claims(data, "s")  # the generated docs' claims table
    assert f"every block at k=H: {blocks.verdict}" in block
