"""The judging rules: stated margins, the paper's-setting outcome, power at the Holm level,
normality-only verdicts, monotone readings over k, and questions a run cannot answer."""

import math

import pytest

from tokengeo.experiments import power
from tokengeo.experiments.claims import Claim, family
from tokengeo.experiments.stats import (
    CONTRADICTED,
    INCONCLUSIVE,
    NOT_REPRODUCED,
    REPRODUCED,
    Interval,
    Region,
    mean_interval,
    p_inside,
    p_outside,
    verdict,
)


def test_a_stated_margin_is_applied_to_exact_values_and_intervals():
    r = Region.above(-0.5, margin=0.1)
    assert r.to_dict()["margin"] == 0.1 and "margin 0.1" in r.text
    # the long flows run's exponent: -0.579 against > -0.5 with margin 0.1
    assert verdict(Interval.exact_value(-0.579, "deterministic"), r) == INCONCLUSIVE
    assert verdict(Interval.exact_value(-0.579), Region.above(-0.5)) == NOT_REPRODUCED
    assert verdict(Interval.exact_value(-0.61), r) == NOT_REPRODUCED
    assert verdict(Interval.exact_value(-0.39), r) == REPRODUCED
    # an interval inside the region, but not by more than the margin
    iv = mean_interval([-0.45, -0.44, -0.46, -0.45])
    assert verdict(iv, Region.above(-0.5)) == REPRODUCED
    assert verdict(iv, r) == INCONCLUSIVE
    assert p_inside(iv, r) > 0.025 and p_outside(iv, r) > 0.025  # the p-values agree
    with pytest.raises(ValueError, match="leaves nothing"):
        Region(0.0, 1.0, margin=0.5)
    with pytest.raises(ValueError, match="finite number >= 0"):
        Region.above(0.0, margin=-1.0)


def _members(values_at_h, values_below):
    up = Region.above(0.0)
    return [Claim("s", "at H", "src", "+", "d", up, measured=mean_interval(values_at_h),
                  label="k=H"),
            Claim("s", "below H", "src", "+", "d", up, measured=mean_interval(values_below),
                  label="k<H")]


def test_an_inconclusive_finding_opposite_at_the_papers_setting_is_contradicted():
    at_h, below = [-1.0, -1.1, -0.9, -1.05, -0.95], [0.3, -0.2, 0.1, -0.1, 0.2]
    plain = family("s", "finding", _members(at_h, below))
    assert plain.verdict == INCONCLUSIVE  # what the tally showed before
    row = family("s", "finding", _members(at_h, below), primary="k=H")
    assert row.verdict == CONTRADICTED and row.to_dict()["primary"] == "k=H"
    agree = family("s", "finding", _members([1.0, 1.1, 0.9, 1.05, 0.95], below), primary="k=H")
    assert agree.verdict == REPRODUCED
    with pytest.raises(ValueError, match="not a member's label"):
        family("s", "finding", _members(at_h, below), primary="k=7")


def test_mde_is_at_the_level_the_member_is_judged_at():
    values = [0.1, 0.3, 0.2, 0.25, 0.15]
    alone = Claim("s", "c", "src", "+", "d", Region.above(0.0),
                  measured=mean_interval(values))
    members = [Claim("s", f"c{i}", "src", "+", "d", Region.above(0.0),
                     measured=mean_interval(values), label=f"m{i}") for i in range(4)]
    family("s", "f", members)
    assert members[0].holm_size == 4
    sd = mean_interval(values).std
    assert members[0].mde_80 == pytest.approx(power.mde(sd, 5, alpha=0.025 / 4))
    assert members[0].mde_80 > alone.mde_80  # 2.5 % / 4 needs a larger effect


def test_a_verdict_decided_only_under_normality_says_so():
    few = Claim("s", "c", "src", "+", "d", Region.above(0.0),
                measured=mean_interval([1.0, 1.1, 0.9]))
    assert few.verdict == REPRODUCED and few.normality_only
    assert "normality only" in few.to_dict()["detail"]
    enough = Claim("s", "c", "src", "+", "d", Region.above(0.0),
                   measured=mean_interval([1.0, 1.1, 0.9, 1.2, 0.8, 1.05]))
    assert enough.verdict == REPRODUCED and not enough.normality_only
    undecided = Claim("s", "c", "src", "+", "d", Region.above(0.0),
                      measured=mean_interval([1.0, -1.1, 0.9]))
    assert undecided.verdict == INCONCLUSIVE and not undecided.normality_only


class _Sweep:
    """The two calls a claim makes of a sweep's results: values per label, not_run."""

    def __init__(self, by_label):
        self.by_label = by_label

    def not_run(self):
        return None

    def values(self, label, get):
        return [get(v) for v in self.by_label[label]]


def test_the_monotone_reading_is_not_the_k_equals_h_contrast():
    from tokengeo.experiments.suites.laplacian_sweep import monotone_claim
    from tokengeo.experiments.trend import trend_over_k

    # rises from k=0 to k=4 in every seed, but falls from k=2 to k=4: not monotone
    seeds = range(6)
    by_k = {0: [0.0 + 0.01 * s for s in seeds], 2: [2.0 + 0.01 * s for s in seeds],
            4: [1.0 + 0.02 * s for s in seeds]}
    sweep = _Sweep({f"k={k}": v for k, v in by_k.items()})
    labels = {k: f"k={k}" for k in by_k}
    slope = trend_over_k(by_k)  # the reading it replaces: exactly (m(4) − m(0)) / 4
    contrast = [(b - a) / 4 for a, b in zip(by_k[0], by_k[4], strict=True)]
    assert list(slope.slopes) == pytest.approx(contrast)
    row = monotone_claim("s", sweep, "rises at every step", "src", "+", labels, "acc",
                         lambda v: v, True)
    assert [m.label for m in row.members] == ["k=0→k=2", "k=2→k=4"]
    assert row.verdict == NOT_REPRODUCED  # the slope reading would say reproduced
    short = monotone_claim("s", sweep, "t", "src", "+", {0: "k=0", 4: "k=4"}, "acc",
                           lambda v: v, True)
    assert short.verdict.startswith("not run: a monotone trend needs 3")
    from tokengeo.experiments.suites.laplacian_sweep import more_k_hint

    how = more_k_hint("dino", {"seeds": [0, 1, 2], "cell_cost": 280})
    hinted = monotone_claim("s", sweep, "t", "src", "+", {0: "k=0", 4: "k=4"}, "acc",
                            lambda v: v, True, how=how)
    assert hinted.verdict.endswith("(have 2); " + how)
    assert "3 cells, ~840 core-s" in how and "--only dino --config-dir DIR" in how


def test_log2_p_is_labelled_as_such():
    from tokengeo.experiments.suites.ltransformer import _trend

    c = _trend("t", {0: [0.1, 0.2], 1: [0.0, 0.1], 2: [-0.1, 0.0]}, None, "q", False,
               variable="log₂ p", paper="p", kind="new")
    assert c.detail.startswith("per log₂ p: ")


def test_the_memory_claim_compares_with_the_paper_only_at_its_size():
    from tokengeo.experiments.cells import CellResult
    from tokengeo.experiments.suites.ltransformer import memory_claim

    def peaks(d):
        return CellResult("efficiency", {"rows": [], "training_peaks": [
            {"batch": 8, "name": n, "d_model_l": d, "peak_bytes": b, "method": "cpu rss",
             "seq_len": 64} for n, b in (("ltransformer", 9e6), ("fair_baseline", 1e7))]})

    small = memory_claim(peaks(128), {"efficiency": {"vocab_size": 4096}})
    assert small.paper_effect is None and small.vs_paper is None
    assert "not compared" in small.detail
    paper = memory_claim(peaks(768), {"efficiency": {"vocab_size": 30_522}})
    assert paper.paper_effect == pytest.approx(math.log(0.85)) and paper.vs_paper


def test_the_wall_clock_claim_reads_each_width_with_a_timing_margin():
    from tokengeo.experiments.cells import CellResult
    from tokengeo.experiments.suites.ltransformer import wall_clock_claim

    def row(d, name, ms):
        return {"d_model_l": d, "name": name, "step_ms": ms}

    rows = [row(128, "ltransformer", 9.0), row(128, "fair_baseline", 10.0),
            row(128, "matched", 8.0), row(768, "ltransformer", 90.0),
            row(768, "fair_baseline", 100.0), row(768, "matched", 80.0)]
    c = wall_clock_claim(CellResult("efficiency", {"rows": rows}))
    assert c.catalogue == "ltransformer.wall-clock"
    by = {m.label: m.verdict for m in c.members}
    assert by == {"d=128": NOT_REPRODUCED, "d=768": REPRODUCED}  # no overhead at 128
    assert c.verdict == NOT_REPRODUCED
    rows[1]["step_ms"] = 9.2  # within 5 %: not told apart
    assert wall_clock_claim(CellResult("efficiency", {"rows": rows})).members[0].verdict \
        == INCONCLUSIVE


def test_a_learnable_alpha_that_did_not_learn_is_left_out():
    from tokengeo.experiments.suites.ltransformer import UNLEARNED, accuracy_family

    class Acc:
        def __init__(self, a):
            self.metrics = {"test": {"accuracy": a}}

        def metric(self, split, key):
            return self.metrics[split][key]

    runs = {"fair": [0.70, 0.71, 0.72], "L_alpha-identity": [0.72, 0.74, 0.73],
            "L_alpha-learnable": [0.72, 0.74, 0.73], "L_alpha-linear": [0.71, 0.72, 0.74]}
    sweep = _Sweep({k: [Acc(a) for a in v] for k, v in runs.items()})
    sweep.labels = list(runs)
    row = accuracy_family(sweep, ["L_alpha-identity", "L_alpha-learnable", "L_alpha-linear"],
                          "fair", "fair encoder", Region.above(0.0), "beats", kind="new",
                          proxy=None)
    assert [m.label for m in row.members] == ["α=identity", "α=linear"]
    assert row.detail == UNLEARNED and row.primary == "α=linear"


def test_a_ratio_unchanged_in_every_seed_is_no_change():
    from tokengeo.experiments.stats import NO_CHANGE, log_ratio

    iv = log_ratio([12.0, 15.0, 9.0], [12.0, 15.0, 9.0])  # equal counts: log ratio 0 each
    assert iv.method == "log-ratio sign-flip"
    assert verdict(iv, Region.ratio_below(1.0)) == NO_CHANGE
    assert iv.fmt() == "no change in 3 of 3 seeds"
