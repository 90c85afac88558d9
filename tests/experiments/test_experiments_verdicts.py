"""The verdict rules on hand-made data whose answers are known: tied and integer measures,
ratios, worst runs, Holm's adjustment, the verdict against the paper's effect, power."""

import itertools
import math
import random

import pytest

from tokengeo.experiments import exact, power
from tokengeo.experiments.claims import Claim, family
from tokengeo.experiments.stats import (
    INCONCLUSIVE,
    NO_CHANGE,
    NOT_REPRODUCED,
    REPRODUCED,
    Interval,
    Region,
    log_ratio,
    mean_interval,
    paired_difference,
    verdict,
    worst_run,
)
from tokengeo.experiments.verdicts import holm, vs_paper


# ---------------------------------------------------------------- exact tests, zero width
def _brute_p_above(xs, b=0.0):
    d = [x - b for x in xs]
    obs = sum(d)
    flips = list(itertools.product((1, -1), repeat=len(d)))
    return sum(sum(s * v for s, v in zip(f, d, strict=True)) >= obs - 1e-12
               for f in flips) / len(flips)


@pytest.mark.parametrize("xs", [[1, 0, -1, 2, 3], [-1, -1, 0, -1, -1, -1], [2, 2, 2, 2, 2, 2, 2]])
def test_sign_flip_p_value_is_the_enumeration(xs):
    assert exact.p_above(xs) == pytest.approx(_brute_p_above(xs))
    assert exact.p_below(xs) == pytest.approx(_brute_p_above([-x for x in xs]))


def test_tied_differences_never_give_a_zero_width_reproduced_interval():
    # every seed one component fewer: a t interval would have zero width and "reproduce"
    iv = paired_difference([24, 25, 23, 26, 24], [25, 26, 24, 27, 25])
    assert iv.method == "sign-flip" and (iv.lo, iv.hi) == (-math.inf, math.inf)
    assert verdict(iv, Region.below(0)) == INCONCLUSIVE  # 2^-5 = 3.1% > 2.5%: undecidable
    six = paired_difference([1] * 6, [2] * 6)
    assert verdict(six, Region.below(0)) == REPRODUCED  # 2^-6 = 1.6% < 2.5%
    assert "6 of 6 seeds" in six.fmt()


def test_no_change_in_every_seed_has_its_own_verdict():
    iv = paired_difference([3, 4, 5, 6, 7], [3, 4, 5, 6, 7])
    assert iv.no_change and verdict(iv, Region.below(0)) == NO_CHANGE
    assert iv.fmt() == "no change in 5 of 5 seeds"


def test_discrete_measures_use_the_exact_test_and_its_interval_covers_the_mean():
    xs = [-1, 0, -1, -1, -2, -1, 0, -1]
    iv = mean_interval(xs, discrete=True)
    assert iv.method == "sign-flip" and iv.lo < iv.mean < iv.hi
    # the interval inverts the test: its ends are where a one-sided p crosses 2.5%
    assert exact.p_above(xs, iv.lo - 1e-6) <= 0.025 < exact.p_above(xs, iv.lo + 1e-3)


# ---------------------------------------------------------------- ratios, worst runs
def test_a_ratio_near_minus_100_percent_stays_above_it():
    # the retrofit's failure mode: one seed's ratio − 1 near −100%, others far above
    treated, base = [0.02, 30.0, 25.0], [20.0, 20.0, 20.0]
    linear = mean_interval([t / b - 1 for t, b in zip(treated, base, strict=True)])
    assert linear.lo < -1  # the old interval: below −100%, impossible for a ratio
    iv = log_ratio(treated, base)
    assert iv.scale == "log" and math.exp(iv.lo) > 0
    assert iv.fmt().startswith("×")
    assert verdict(iv, Region.ratio_below(1.05)) == INCONCLUSIVE


def test_log_ratio_region_and_paper_effect():
    iv = log_ratio([0.78, 0.80, 0.79, 0.77], [1.0, 1.01, 0.99, 1.0])
    assert verdict(iv, Region.ratio_below(1.0)) == REPRODUCED
    assert vs_paper(iv, math.log(430.4 / 547.7)) == "consistent"  # −21%, as the paper


def test_every_run_claims_are_judged_on_the_worst_run():
    residuals = [0.01, 0.02, 0.26, 0.01]  # mean 0.075, worst 0.26
    assert verdict(mean_interval([0.01, 0.02, 0.03, 0.01]), Region.below(0.05)) == REPRODUCED
    iv = worst_run(residuals)
    assert iv.mean == 0.26 and verdict(iv, Region.below(0.05)) == NOT_REPRODUCED
    assert "worst of 4 runs" in iv.fmt()


# ---------------------------------------------------------------- Holm
def test_holm_matches_the_step_down_definition():
    ps = [0.01, 0.04, 0.03, 0.005]
    # sorted 0.005, 0.01, 0.03, 0.04 -> 4*0.005, 3*0.01, 2*0.03, 1*0.04, running max
    assert holm(ps) == pytest.approx([0.03, 0.06, 0.06, 0.02])


UP = Region.above(0.0)


def _claim(values, label, region=UP, effect=None):
    return Claim("t", f"member {label}", "src", "-", "difference", region,
                 measured=mean_interval(values), label=label, paper_effect=effect)


def test_a_family_where_holm_changes_a_verdict():
    # five α: one member clears 2.5% on its own but not 5 × its p-value
    clear = [0.02, 0.01, 0.0, 0.03, 0.015]  # t = 3.0, one-sided p = 2.0%
    noise = [[0.01, -0.01, 0.005, -0.004, 0.002]] * 4
    members = [_claim(clear, "a")] + [_claim(v, f"n{i}") for i, v in enumerate(noise)]
    fam = family("t", "some α helps", members, rule="any")
    assert members[0].verdict == REPRODUCED
    # "some α helps" needs the adjusted evidence: the family is inconclusive
    assert fam.verdict_raw == REPRODUCED and fam.verdict == INCONCLUSIVE
    assert fam.member_holm()[0] == INCONCLUSIVE
    d = fam.to_dict("paper")
    assert d["verdict"] == INCONCLUSIVE and d["verdict_raw"] == REPRODUCED
    assert len(d["members"]) == 5 and d["members"][0]["verdict_holm"] == INCONCLUSIVE


def test_an_all_family_needs_adjusted_evidence_to_fail_and_none_to_hold():
    # six blocks, "every block falls": one block rises at p ≈ 2% alone, not after Holm
    rises = [-0.02, -0.01, 0.0, -0.03, -0.015]  # negated: t = +3.0 against "< 0", p ≈ 2%
    down = Region.below(0.0)
    fails = _claim([-v for v in rises], "b1", region=down)  # raw: not reproduced
    holds = [_claim([-1.0, -1.1, -0.9, -1.05, -0.95], f"b{i}", region=down) for i in range(2, 7)]
    fam = family("t", "every block falls", [fails, *holds], rule="all")
    assert fails.verdict == NOT_REPRODUCED and fam.member_holm()[0] == INCONCLUSIVE
    assert fam.verdict_raw == NOT_REPRODUCED and fam.verdict == INCONCLUSIVE
    # every member reproduced on its own: the intersection-union test needs no adjustment
    weak = [_claim([-0.02, -0.01, 0.0, -0.03, -0.015], f"w{i}", region=down) for i in range(6)]
    assert all(m.verdict == REPRODUCED for m in weak)
    assert all(h == INCONCLUSIVE for h in family("t", "w", weak, rule="all").member_holm())
    assert family("t", "w", weak, rule="all").verdict == REPRODUCED
    # ... and "any" is the reverse: every member failing needs no adjustment
    assert family("t", "w", [_claim([-v for v in m.measured.values], "x", region=down)
                             for m in weak], rule="any").verdict == NOT_REPRODUCED


def test_the_tally_counts_a_familys_one_verdict():
    from tokengeo.experiments.summary import SuiteOutput, tally

    down = Region.below(0.0)
    fails = _claim([0.02, 0.01, 0.0, 0.03, 0.015], "b1", region=down)
    holds = [_claim([-1.0, -1.1, -0.9, -1.05, -0.95], f"b{i}", region=down) for i in range(5)]
    fam = family("t", "every block falls", [fails, *holds], rule="all", kind="stand-in")
    counts = tally([SuiteOutput("t", "T", "P", [fam])])["papers"]["P"]
    assert counts[INCONCLUSIVE] == 1 and counts[NOT_REPRODUCED] == 0


def test_family_rules_any_and_all():
    good, bad = _claim([1, 1.1, 0.9], "g"), _claim([-1, -1.1, -0.9], "b")
    assert family("t", "x", [good, bad], rule="any").verdict == REPRODUCED
    assert family("t", "x", [good, bad], rule="all").verdict == NOT_REPRODUCED


# ---------------------------------------------------------------- vs the paper's effect
@pytest.mark.parametrize("lo,hi,effect,expected", [
    (0.5, 1.5, 1.0, "consistent"),
    (-0.2, 0.6, 1.0, "smaller"),  # excludes the paper's size though it straddles 0
    (1.2, 2.0, 1.0, "larger"),
    (-2.0, -0.5, 1.0, "opposite"),
    (-0.3, -0.1, -0.21, "consistent"),  # a negative effect (a relative drop)
    (-0.1, 0.05, -0.21, "smaller"),
    (0.01, 0.05, -0.21, "opposite"),
])
def test_vs_paper(lo, hi, effect, expected):
    iv = Interval((lo + hi) / 2, lo, hi, 5, 1.0)
    assert vs_paper(iv, effect) == expected


# ---------------------------------------------------------------- power
@pytest.mark.parametrize("n,sd", [(5, 1.0), (8, 0.02)])
def test_mde_is_detected_80_percent_of_the_time(n, sd):
    effect = power.mde(sd, n)
    rng = random.Random(1234)
    trials = 4000
    hits = sum(mean_interval([rng.gauss(effect, sd) for _ in range(n)]).lo > 0
               for _ in range(trials))
    assert abs(hits / trials - 0.8) < 0.05


def test_seeds_for_80_is_the_smallest_n_with_that_power():
    n = power.units_for(0.5, 1.0)
    assert power.power(0.5, 1.0, n) >= 0.8 > power.power(0.5, 1.0, n - 1)
    assert power.units_for(0.0, 1.0) is None and power.units_for(1.0, 0.0) is None


def test_claim_power_uses_the_paper_effect_and_the_boundary():
    c = _claim([0.02, -0.015, 0.01, -0.012, 0.005], "x", Region.above(-0.01), effect=0.0125)
    assert c.vs_paper == "consistent"
    assert c.power_basis == "paper"
    # distance from the boundary −0.01 to the paper's +0.0125: 0.0225
    assert c.seeds_for_80 == power.units_for(0.0225, c.measured.std)
    assert c.mde_80 == pytest.approx(power.mde(c.measured.std, 5))
    # where the data exclude the paper's effect, the seeds detect the observed one
    low = _claim([0.004, 0.005, 0.006, 0.005, 0.004], "y", effect=0.0125)
    assert low.vs_paper == "smaller" and low.power_basis == "observed"
    assert low.seeds_for_80 == power.units_for(low.measured.mean, low.measured.std)
    # ... unless the observed effect is within a standard error of the boundary: none
    flat = _claim([0.001, -0.002, 0.0, 0.002, -0.001], "y", effect=0.0125)
    assert flat.vs_paper == "smaller" and flat.power_basis == "no effect"
    assert flat.seeds_for_80 is None


def test_exact_tests_need_six_seeds_before_any_effect_is_detectable():
    c = Claim("t", "fewer components", "src", "-", "count difference", Region.below(0),
              measured=mean_interval([-1, -1, 0, -2, -1], discrete=True))
    assert c.verdict == INCONCLUSIVE and c.mde_80 is None
    assert c.seeds_for_80 >= 6


def test_a_familys_text_names_each_members_own_quantity():
    members = []
    for a in ("identity", "linear"):
        c = _claim([0.1, 0.2, 0.15], f"α={a}")
        c.quantity = f"test accuracy(L_alpha-{a}) − test accuracy(fair)"
        members.append(c)
    fam = family("t", "some α", members, rule="any")
    assert "L_alpha-linear" in fam.quantity and "L_alpha-identity" in fam.quantity
    assert "L_alpha-identity" not in fam.rule  # not the first member's label for every α


def test_the_spreads_upper_bound_is_the_chi_square_one():
    from scipy import stats

    for n in (3, 4, 10):
        lo_q = stats.chi2.ppf(0.025, n - 1)
        assert power.sd_upper(1.0, n) == pytest.approx(math.sqrt((n - 1) / lo_q))
    assert 3.6 < power.sd_upper(1.0, 4) < 3.8  # σ from 4 seeds: up to ×3.7 larger


def test_power_counts_state_the_upper_bound_the_holm_size_and_no_effect():
    # a paper claim 1 σ above the boundary: seeds at the spread and at its upper bound
    c = _claim([0.2, 1.5, 0.8, 1.4, 0.4], "x", effect=1.0)
    assert c.vs_paper == "consistent" and c.power_basis == "paper"
    assert c.seeds_for_80_upper > c.seeds_for_80 >= 2
    # the same member in a family of 5: its test is at 2.5% / 5, so more seeds
    alone = c.seeds_for_80
    family("t", "f", [c] + [_claim([0.1, 0.2, 0.15], f"m{i}") for i in range(4)])
    assert c.holm_size == 5 and c.seeds_for_80 > alone
    # an observed effect within a standard error of the boundary: no seed count
    flat = _claim([0.01, -0.02, 0.015, -0.004, 0.001], "flat")
    assert flat.power_basis == "no effect" and flat.seeds_for_80 is None
    from tokengeo.experiments.summary import SuiteOutput, power_rows

    flat.kind = "stand-in"
    row = power_rows([SuiteOutput("t", "T", "P", [flat])])[0]
    assert "no effect to detect" in row[-1]
