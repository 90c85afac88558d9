"""Do two data sets rank the same options (the five α) differently? A permutation test.

El Ichi et al. (arXiv 2603.05727) report that the best positional strategy α depends on the
data set (identity on IMDB, linear on AG News). With the metric ``y[t][s, j]`` of option j in
run (seed) s on task t, every run gives a *rank vector* r_ts (mid-ranks of its J options,
1 = worst, so a higher rank is a better option). Under

    H0: the rank vectors of both tasks come from one distribution

(the ranking does not depend on the task) the 2·S runs are exchangeable between the tasks.
The statistic is the squared distance between the tasks' mean rank vectors,

    D = Σ_j (r̄_Aj − r̄_Bj)²,

and its one-sided p-value is the share of task relabellings (every way of choosing which
n_A of the n_A + n_B rank vectors belong to task A; exact below :data:`EXACT_LIMIT`
relabellings, else :data:`MONTE_CARLO` random ones with a fixed seed) whose D is at least
the observed one (Good, *Permutation Tests*, 2000, Sec. 3; the two-sample permutation test
applied to rank vectors). The smallest attainable p is 1 / C(n_A + n_B, n_A) (2/252 with
5 seeds per task: D is symmetric in the tasks).

Ranks within a run remove each run's level (a task where every α scores 20 points higher
is not a different ranking), which is what "the best α depends on the data set" asks;
the interaction term of a two-way (task × α) analysis would also flag a change of spread.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from tokengeo.errors import ConfigError

EXACT_LIMIT = 100_000
MONTE_CARLO = 20_000


@dataclass(frozen=True)
class RankingTest:
    """Result of :func:`ranking_difference_test`."""

    mean_rank_a: tuple[float, ...]  # r̄_A per option (higher = better)
    mean_rank_b: tuple[float, ...]
    statistic: float  # D
    p_value: float  # one-sided, P(D* >= D) under H0
    n_a: int
    n_b: int
    method: str  # "exact (N relabellings)" or "monte carlo (N)"

    @property
    def z(self) -> float:
        """Φ⁻¹(1 − p): the p-value on the normal scale (0 at p = 1/2), for a verdict."""
        from statistics import NormalDist

        p = min(max(self.p_value, 1e-12), 1 - 1e-12)
        return NormalDist().inv_cdf(1.0 - p)

    def to_dict(self) -> dict:
        return {**asdict(self), "z": self.z}


def within_run_ranks(values: Sequence[Sequence[float]]) -> np.ndarray:
    """Mid-ranks (1 = lowest) of each row of ``values`` (S, J): ties share their mean."""
    from tokengeo._deps import require

    y = np.asarray(values, dtype=float)
    if y.ndim != 2 or y.shape[1] < 2 or y.shape[0] < 1 or not np.isfinite(y).all():
        raise ConfigError(f"rank vectors need a finite (runs, options) table with at least "
                          f"2 options; got shape {y.shape}")
    return require("scipy.stats").rankdata(y, axis=1)


def _distance(ranks: np.ndarray, in_a: np.ndarray) -> np.ndarray:
    """D for each relabelling: ``in_a`` (M, N) boolean, ``ranks`` (N, J) -> (M,)."""
    n_a = in_a.sum(1, keepdims=True)  # (M, 1)
    sum_a = in_a.astype(float) @ ranks  # (M, J)
    sum_b = ranks.sum(0) - sum_a
    diff = sum_a / n_a - sum_b / (len(ranks) - n_a)
    return np.square(diff).sum(1)


def _relabellings(n_a: int, n: int) -> tuple[np.ndarray, str]:
    total = math.comb(n, n_a)
    if total <= EXACT_LIMIT:
        rows = np.zeros((total, n), dtype=bool)
        for i, chosen in enumerate(itertools.combinations(range(n), n_a)):
            rows[i, list(chosen)] = True
        return rows, f"exact ({total} relabellings)"
    rng = np.random.default_rng(0)
    keys = rng.random((MONTE_CARLO, n))
    rows = np.zeros((MONTE_CARLO, n), dtype=bool)
    np.put_along_axis(rows, np.argsort(keys, 1)[:, :n_a], True, 1)
    rows[0, :n_a] = True  # the observed labelling is one of them
    rows[0, n_a:] = False
    return rows, f"monte carlo ({MONTE_CARLO})"


def ranking_difference_test(task_a: Sequence[Sequence[float]],
                            task_b: Sequence[Sequence[float]]) -> RankingTest:
    """Permutation test of "the options rank differently on task A than on task B".

    ``task_a`` (S_A, J) and ``task_b`` (S_B, J): the metric (higher = better) of the same J
    options in each run; runs of one task need not pair with the other's. See the module
    docstring for the statistic and its null distribution."""
    ra, rb = within_run_ranks(task_a), within_run_ranks(task_b)
    if ra.shape[1] != rb.shape[1]:
        raise ConfigError(f"both tasks need the same options; got {ra.shape[1]} and "
                          f"{rb.shape[1]}")
    if len(ra) < 2 or len(rb) < 2:
        raise ConfigError("a ranking test needs at least 2 runs per task")
    ranks = np.concatenate([ra, rb])  # (N, J), task A first
    labellings, method = _relabellings(len(ra), len(ranks))
    observed = np.zeros(len(ranks), dtype=bool)
    observed[: len(ra)] = True
    d_obs = float(_distance(ranks, observed[None])[0])
    null = _distance(ranks, labellings)
    p = float(np.mean(null >= d_obs - 1e-9 * max(d_obs, 1.0)))
    return RankingTest(tuple(ra.mean(0).tolist()), tuple(rb.mean(0).tolist()), d_obs, p,
                       len(ra), len(rb), method)
