"""Intervals and the verdict rule, on fabricated inputs with known answers."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tokengeo.experiments.stats import (
    INCONCLUSIVE,
    NOT_REPRODUCED,
    REPRODUCED,
    Interval,
    Region,
    mean_interval,
    paired_difference,
    t975,
    verdict,
)


def test_t_interval_matches_hand_computation():
    iv = mean_interval([1.0, 2.0, 3.0])  # mean 2, s = 1, t_{0.975,2} = 4.303
    assert iv.mean == 2.0 and iv.std == pytest.approx(1.0)
    assert iv.hi - iv.mean == pytest.approx(4.303 / math.sqrt(3), rel=1e-4)


def test_t_quantile_tail_is_continuous():
    assert t975(30) == pytest.approx(2.042, abs=5e-4)
    assert abs(t975(31) - 2.040) < 2e-3 and abs(t975(120) - 1.980) < 2e-3


@pytest.mark.parametrize("df", [1, 2, 3, 5, 7.5, 10, 29, 30, 31, 45.3, 100, 1000])
def test_t_quantile_is_scipys(df):
    from scipy import stats

    assert t975(df) == pytest.approx(float(stats.t.ppf(0.975, df)), rel=1e-12)


def test_t_quantile_needs_two_values():
    with pytest.raises(ValueError, match="at least 2 values"):
        t975(0)


@pytest.mark.parametrize(
    "treated,baseline,expected",
    [
        ([0.90, 0.91, 0.92], [0.80, 0.81, 0.80], REPRODUCED),  # clearly better
        ([0.70, 0.72, 0.69], [0.80, 0.81, 0.80], NOT_REPRODUCED),  # clearly worse
        ([0.80, 0.83, 0.79], [0.81, 0.80, 0.82], INCONCLUSIVE),  # overlapping
    ],
)
def test_verdict_on_fabricated_differences(treated, baseline, expected):
    assert verdict(paired_difference(treated, baseline), Region.above(0.0)) == expected


def test_band_claims_and_single_values():
    assert verdict(mean_interval([-1.02, -0.98, -1.0]), Region.around(-1, 0.25)) == REPRODUCED
    assert verdict(mean_interval([0.01, -0.02, 0.0]), Region.around(-1, 0.25)) == NOT_REPRODUCED
    assert verdict(mean_interval([0.5]), Region.above(0)) == INCONCLUSIVE
    assert verdict(Interval.exact_value(0.25), Region(0.24, 0.27)) == REPRODUCED
    assert verdict(Interval.exact_value(0.30), Region(0.24, 0.27)) == NOT_REPRODUCED


@given(st.lists(st.floats(-1e3, 1e3), min_size=2, max_size=20))
def test_interval_contains_mean(xs):
    iv = mean_interval(xs)
    assert iv.lo <= iv.mean + 1e-9 and iv.mean <= iv.hi + 1e-9


def test_welch_difference_matches_hand_computation():
    from tokengeo.experiments.stats import welch_difference

    a, b = [1.0, 2.0, 3.0], [0.0, 0.0, 1.0, 1.0]
    iv = welch_difference(a, b)
    va, vb = 1.0 / 3, (1.0 / 3) / 4  # s²/n: s_a² = 1, s_b² = 1/3
    df = (va + vb) ** 2 / (va**2 / 2 + vb**2 / 3)
    assert iv.mean == pytest.approx(1.5)
    # Welch–Satterthwaite df is fractional (2.72 here): no rounding down to an integer
    assert iv.hi - iv.mean == pytest.approx(t975(df) * math.sqrt(va + vb))
    assert iv.mean - iv.lo == pytest.approx(t975(df) * math.sqrt(va + vb))


def test_welch_difference_is_scipys_interval():
    from scipy import stats

    from tokengeo.experiments.stats import welch_difference

    a, b = [0.31, 0.45, 0.38, 0.52, 0.40], [0.20, 0.35, 0.22]
    ci = stats.ttest_ind(a, b, equal_var=False).confidence_interval(0.95)
    iv = welch_difference(a, b)
    assert (iv.lo, iv.hi) == (pytest.approx(ci.low), pytest.approx(ci.high))
    assert verdict(iv, Region.above(0)) in (REPRODUCED, INCONCLUSIVE)
