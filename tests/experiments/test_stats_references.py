"""The hand-written multiple-testing and permutation tests against the libraries that have
them: Holm's adjustment against ``statsmodels.stats.multitest.multipletests`` and the exact
sign-flip test against ``scipy.stats.permutation_test`` (sign flips of one sample)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokengeo.experiments.exact import p_above, p_below
from tokengeo.experiments.verdicts import holm

multitest = pytest.importorskip("statsmodels.stats.multitest",
                                reason="statsmodels is in the dev extra")

def test_holm_equals_statsmodels():
    rng = np.random.default_rng(0)
    for _ in range(20):  # random families: sizes 1..12, p-values spread over decades
        ps = list(10 ** rng.uniform(-4, 0, size=rng.integers(1, 13)))
        reject, adjusted, _, _ = multitest.multipletests(ps, alpha=0.05, method="holm")
        np.testing.assert_allclose(holm(ps), adjusted, rtol=0, atol=1e-12)
        assert [a < 0.05 for a in holm(ps)] == list(reject)


def test_holm_with_ties_and_ones():
    ps = [0.01, 0.01, 0.04, 1.0, 0.5, 0.0]
    _, adjusted, _, _ = multitest.multipletests(ps, method="holm")
    np.testing.assert_allclose(holm(ps), adjusted, atol=1e-12)


samples = st.lists(st.floats(-5, 5, allow_nan=False).map(lambda x: round(x, 3)),
                   min_size=2, max_size=8)


@settings(max_examples=25, deadline=None)
@given(samples, st.floats(-1, 1).map(lambda b: round(b, 2)))
def test_sign_flip_equals_scipy_permutation_test(values, b):
    from scipy.stats import permutation_test

    d = np.asarray(values) - b

    def statistic(x, axis=-1):
        return np.sum(x, axis=axis)

    for alternative, ours in (("greater", p_above(values, b)), ("less", p_below(values, b))):
        ref = permutation_test((d,), statistic, permutation_type="samples", vectorized=True,
                               n_resamples=np.inf, alternative=alternative)
        assert ours == pytest.approx(ref.pvalue, abs=1e-12), (values, b, alternative)


def test_sign_flip_on_tied_integers():
    from scipy.stats import permutation_test

    values = [1, 1, 1, 2, 0, 1, 1]  # counts: ties everywhere
    ref = permutation_test((np.asarray(values, float),), lambda x, axis=-1: x.sum(axis=axis),
                           permutation_type="samples", vectorized=True, n_resamples=np.inf,
                           alternative="greater")
    assert p_above(values) == pytest.approx(ref.pvalue, abs=1e-12)
    assert p_above(values) == 2 / 2**7  # only the identity and the flip of the 0 reach it
