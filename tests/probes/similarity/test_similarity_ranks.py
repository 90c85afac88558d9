"""Rank statistics of the similarity-vs-attention comparison, against brute force and
against synthetic scores whose answer is known."""

import math

import pytest
import torch
from helpers.rank_reference import brute_auc
from hypothesis import given, settings
from hypothesis import strategies as st

from tokengeo.probes.similarity.ranks import (
    auc,
    average_ranks,
    bootstrap_mean,
    conditional_auc,
    spearman,
)

rows = st.lists(st.tuples(st.integers(0, 4), st.booleans(), st.booleans()),
                min_size=1, max_size=30)


@settings(max_examples=60, deadline=None)
@given(rows)
def test_auc_and_ranks_equal_brute_force_with_ties(data):
    s = torch.tensor([float(a) for a, _, _ in data])  # few values: many ties
    pos = torch.tensor([b for _, b, _ in data])
    valid = torch.tensor([c for _, _, c in data])
    got = float(auc(s[None], pos[None], valid[None])[0])
    want = brute_auc(s[valid], pos[valid])
    assert (math.isnan(got) and math.isnan(want)) or got == pytest.approx(want)
    ranks = average_ranks(s[None], valid[None])[0]
    sv = s[valid]
    brute = torch.tensor([float((sv < x).sum() + ((sv == x).sum() + 1) / 2) for x in sv])
    assert torch.allclose(ranks[valid].float(), brute)
    assert (ranks[~valid] == 0).all()


def test_auc_known_cases_and_gaussian_shift():
    s = torch.arange(10.0)[None]
    pos = s >= 5
    valid = torch.ones_like(pos)
    assert float(auc(s, pos, valid)) == 1.0 and float(auc(-s, pos, valid)) == 0.0
    assert float(auc(torch.zeros_like(s), pos, valid)) == 0.5
    # two unit Gaussians shifted by mu: AUC = Phi(mu / sqrt(2))
    g = torch.Generator().manual_seed(0)
    n, mu = 20000, 1.0
    label = torch.rand(n, generator=g) < 0.3
    score = torch.randn(n, generator=g) + mu * label
    want = 0.5 * (1 + math.erf(mu / 2))  # Phi(mu / sqrt 2) = (1 + erf(mu / 2)) / 2
    assert float(auc(score[None], label[None], torch.ones(1, n, dtype=torch.bool))) == \
        pytest.approx(want, abs=0.01)


def test_spearman_matches_scipy_with_ties_and_masks():
    stats = pytest.importorskip("scipy.stats", reason="scipy is in the data extra")
    g = torch.Generator().manual_seed(1)
    x = torch.randint(0, 6, (4, 40), generator=g).double()
    y = x + torch.randint(0, 4, (4, 40), generator=g)
    valid = torch.rand(4, 40, generator=g) < 0.8
    got = spearman(x, y, valid)
    for r in range(4):
        want = stats.spearmanr(x[r][valid[r]], y[r][valid[r]]).statistic
        assert float(got[r]) == pytest.approx(want)


def test_conditional_auc_is_half_when_scores_only_echo_the_covariate():
    g = torch.Generator().manual_seed(2)
    R, M = 6, 4000
    cov = torch.randn(R, M, generator=g)
    label = torch.rand(R, M, generator=g) < torch.sigmoid(3 * cov)  # depends on cov only
    valid = torch.ones(R, M, dtype=torch.bool)
    echo = cov + 0.1 * torch.randn(R, M, generator=g)  # knows nothing beyond cov
    assert (auc(echo, label, valid) > 0.8).all()  # raw AUC high: it is correlated with cov
    cond = conditional_auc(echo, cov, label, valid, n_bins=20)
    assert (cond - 0.5).abs().max() < 0.05
    extra = echo + 2.0 * label  # carries the label itself
    assert (conditional_auc(extra, cov, label, valid, n_bins=20) > 0.8).all()


def test_conditional_auc_with_one_bin_is_the_auc():
    g = torch.Generator().manual_seed(3)
    s, c = torch.randn(3, 50, generator=g), torch.randn(3, 50, generator=g)
    label, valid = torch.rand(3, 50, generator=g) < 0.4, torch.rand(3, 50, generator=g) < 0.9
    torch.testing.assert_close(conditional_auc(s, c, label, valid, n_bins=1),
                               auc(s, label, valid))


def test_bootstrap_mean_interval_and_p_value():
    g = torch.Generator().manual_seed(4)
    shifted = 0.3 + 0.1 * torch.randn(200, generator=g)
    b = bootstrap_mean(shifted, seed=0)
    assert b.low < 0.3 < b.high and b.low > 0.25 and b.p_le_null == 0.0 and b.n == 200
    noise = 0.1 * torch.randn(200, generator=g)
    centred = torch.cat([noise - noise.mean(), torch.tensor([math.nan])])  # mean exactly 0
    c = bootstrap_mean(centred, seed=0)
    assert c.n == 200 and c.low < 0 < c.high and 0.3 < c.p_le_null < 0.7
    assert bootstrap_mean(shifted, seed=5) == bootstrap_mean(shifted, seed=5)
    assert bootstrap_mean(torch.tensor([math.nan])).n == 0


def test_joint_strata_remove_what_a_second_covariate_explains():
    """Beyond attention *and* distance: scores that echo the distance (and nothing else)
    look informative within attention strata alone, and carry nothing within the joint
    strata of attention and distance (:meth:`Strata.of_bins`)."""
    from tokengeo.probes.similarity.ranks import Strata, quantile_bins

    g = torch.Generator().manual_seed(4)
    R, M, n_att, n_dist = 4, 6000, 5, 4
    valid = torch.ones(R, M, dtype=torch.bool)
    attention = torch.randn(R, M, generator=g)
    distance = torch.randint(1, 40, (R, M), generator=g).to(torch.float64)
    d_bins = quantile_bins(average_ranks(distance, valid), valid, n_dist)
    label = torch.rand(R, M, generator=g) < 0.6 - 0.15 * d_bins  # depends on distance only
    echo = -d_bins.to(torch.float64) + 0.1 * torch.randn(R, M, generator=g)
    rank_s, rank_a = average_ranks(echo, valid), average_ranks(attention, valid)
    att_only = Strata.of(rank_s, rank_a, valid, n_att).auc(label)
    joint = d_bins * n_att + quantile_bins(rank_a, valid, n_att)
    both = Strata.of_bins(rank_s, joint, valid, n_att * n_dist).auc(label)
    assert (att_only > 0.6).all() and ((both - 0.5).abs() < 0.05).all()
    # of_bins on the quantile bins is Strata.of
    torch.testing.assert_close(
        Strata.of_bins(rank_s, quantile_bins(rank_a, valid, n_att), valid, n_att).auc(label),
        att_only)
