"""The ranking-difference permutation test on synthetic data where the answer is known."""

import itertools
import math

import numpy as np
import pytest

from tokengeo.errors import ConfigError
from tokengeo.experiments.rankings import ranking_difference_test, within_run_ranks


def _runs(order, n, noise, rng, level=0.8):
    """n runs of J options whose true means follow ``order`` (a larger value = better)."""
    means = level + 0.01 * np.asarray(order, dtype=float)
    return means + noise * rng.standard_normal((n, len(order)))


def _brute_force(a, b):
    """D and p by looping over every relabelling in plain Python."""
    ranks = [list(r) for r in within_run_ranks(a)] + [list(r) for r in within_run_ranks(b)]
    n, n_a, J = len(ranks), len(a), len(ranks[0])

    def dist(chosen):
        mean_a = [sum(ranks[i][j] for i in chosen) / n_a for j in range(J)]
        rest = [i for i in range(n) if i not in chosen]
        mean_b = [sum(ranks[i][j] for i in rest) / len(rest) for j in range(J)]
        return sum((x - y) ** 2 for x, y in zip(mean_a, mean_b, strict=True))

    observed = dist(set(range(n_a)))
    null = [dist(set(c)) for c in itertools.combinations(range(n), n_a)]
    return observed, sum(d >= observed - 1e-12 for d in null) / len(null)


def test_matches_a_brute_force_enumeration():
    rng = np.random.default_rng(1)
    a, b = _runs([0, 1, 2, 3], 4, 0.02, rng), _runs([3, 1, 0, 2], 3, 0.02, rng)
    result = ranking_difference_test(a, b)
    d, p = _brute_force(a, b)
    assert result.statistic == pytest.approx(d) and result.p_value == pytest.approx(p)
    assert result.method == f"exact ({math.comb(7, 4)} relabellings)"


def test_opposite_rankings_reach_the_smallest_p():
    rng = np.random.default_rng(0)
    a = _runs([0, 1, 2, 3, 4], 5, 0.001, rng)  # option 4 best on A, every run
    b = _runs([4, 3, 2, 1, 0], 5, 0.001, rng)  # option 0 best on B
    result = ranking_difference_test(a, b)
    assert result.p_value == pytest.approx(2 / math.comb(10, 5))  # D symmetric in A, B
    assert result.mean_rank_a == (1, 2, 3, 4, 5) and result.mean_rank_b == (5, 4, 3, 2, 1)
    assert result.z > 1.96


def test_level_and_scale_of_a_task_do_not_matter():
    rng = np.random.default_rng(2)
    a, b = _runs([0, 2, 1, 4, 3], 5, 0.01, rng), _runs([0, 2, 1, 4, 3], 5, 0.01, rng)
    shifted = ranking_difference_test(a, 3.0 * b + 10.0)
    assert shifted == ranking_difference_test(a, b)


def test_same_ranking_distribution_rejects_at_its_level():
    """Under H0 (one generative ranking for both tasks) p < 0.05 about 5 % of the time."""
    rng = np.random.default_rng(3)
    ps = [ranking_difference_test(_runs([0, 1, 1, 2, 3], 5, 0.01, rng),
                                  _runs([0, 1, 1, 2, 3], 5, 0.01, rng)).p_value
          for _ in range(300)]
    assert np.mean(np.asarray(ps) < 0.05) < 0.09
    # and a real difference of the best option is found most of the time
    power = [ranking_difference_test(_runs([0, 1, 2, 3, 4], 5, 0.01, rng),
                                     _runs([0, 4, 2, 3, 1], 5, 0.01, rng)).p_value
             for _ in range(100)]
    assert np.mean(np.asarray(power) < 0.05) > 0.8


def test_many_runs_sample_the_relabellings():
    rng = np.random.default_rng(4)
    a, b = _runs([0, 1, 2], 12, 0.001, rng), _runs([2, 1, 0], 12, 0.001, rng)
    result = ranking_difference_test(a, b)
    assert result.method.startswith("monte carlo") and result.p_value < 0.001


@pytest.mark.parametrize("a, b, needle", [
    ([[1, 2, 3]] * 3, [[1, 2]] * 3, "same options"),
    ([[1, 2, 3]], [[1, 2, 3]] * 3, "at least 2 runs"),
    ([[1, 2, float("nan")]] * 3, [[1, 2, 3]] * 3, "finite"),
])
def test_bad_tables_are_refused(a, b, needle):
    with pytest.raises(ConfigError, match=needle):
        ranking_difference_test(a, b)
