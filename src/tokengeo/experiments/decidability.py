"""Can every claim's test reach its threshold with the configured units? Checked before any
cell runs.

A verdict is a one-sided test at 2.5% on each side of the 95% interval
(:mod:`tokengeo.experiments.stats`). Some tests have a floor on their p-value that depends
only on how many units they get, not on the data:

* an exact **sign-flip** test of n per-seed values: the smallest p is ``2^-n`` (Fisher 1935,
  Sec. 21), so it needs n ≥ 6 (2^-5 = 3.1% > 2.5%);
* a two-sample **relabelling** (permutation) test of n_a and n_b runs: the smallest p is
  ``1 / C(n_a + n_b, n_a)``, twice that when its statistic is symmetric in the two groups and
  n_a = n_b (the α-ranking test of :mod:`tokengeo.experiments.rankings`: 2/70 = 2.9% with 4
  runs per task, 2/252 = 0.8% with 5);
* a **t** interval needs n ≥ 2 values (its p falls to 0 as |t| grows).

One standard for every test: a verdict counts when its test reaches 2.5% on the data. A
t interval can do so from 2 units on, but only under normality; where the exact test of the
same values could not (fewer than 6 seeds for a sign-flip), the report marks the verdict
"decided under normality only" (:attr:`~tokengeo.experiments.claims.Claim.normality_only`).

A claim whose test cannot reach 2.5% with the configured seeds is *undecidable by design*:
its "inconclusive" says nothing about the paper. :func:`planned_tests` lists, from a suite's
resolved settings, the tests whose power depends on units (each suite declares them in
``Suite.planned``, beside ``Suite.check``), and :func:`check_decidable`
refuses the settings (one :class:`~tokengeo.errors.ConfigError` naming each such claim and
the seeds it needs) before any cell runs. Tests a suite chooses at run time (the sign-flip
fallback for a tied sample) cannot be foreseen and are not listed.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from tokengeo.errors import ConfigError
from tokengeo.experiments.exact import ALPHA_SIDE

TESTS = ("t", "sign-flip", "relabelling")


@dataclass(frozen=True)
class PlannedTest:
    """One claim's test as the settings fix it: ``units`` per group (``units_b``: the
    second group of a two-sample test); ``symmetric``: the statistic is the same when the
    groups swap (halves the number of distinct relabellings when the groups are equal)."""

    claim: str
    test: str
    units: int
    units_b: int = 0
    unit: str = "seeds"
    symmetric: bool = False

    def __post_init__(self) -> None:
        if self.test not in TESTS:
            raise ValueError(f"test {self.test!r}; choose one of {TESTS}")


def smallest_p(t: PlannedTest) -> float:
    """The smallest one-sided p-value ``t`` can give, whatever the data."""
    if t.test == "t":
        return 0.0 if t.units >= 2 else 1.0
    if t.test == "sign-flip":
        return 0.5 ** t.units
    if min(t.units, t.units_b) < 1:
        return 1.0
    ties = 2 if (t.symmetric and t.units == t.units_b) else 1
    return ties / math.comb(t.units + t.units_b, t.units)


def decidable(t: PlannedTest, alpha: float = ALPHA_SIDE) -> bool:
    return smallest_p(t) < alpha


def units_needed(t: PlannedTest, alpha: float = ALPHA_SIDE) -> int:
    """The fewest units per group (both groups grown together) that make ``t`` decidable."""
    n = max(t.units, 1)
    while True:
        grown = PlannedTest(t.claim, t.test, n, n if t.units_b else 0, t.unit, t.symmetric)
        if decidable(grown, alpha):
            return n
        n += 1


# --------------------------------------------------------------------- the suites' tests
# Each suite declares its planner beside its own rules: ``Suite(..., planned=...)``, a
# function ``(suite name, resolved settings) -> [PlannedTest]``; these are the shared ones.
def _seeds(settings: dict) -> int:
    return len(settings.get("seeds", []))


def seed_t(suite: str, settings: dict) -> list[PlannedTest]:
    """A seeded suite judges paired differences over seeds with t intervals."""
    if "seeds" not in settings:
        return []
    return [PlannedTest(f"{suite}: paired differences over seeds", "t", _seeds(settings))]


def sweep_tests(metrics) -> Callable[[str, dict], list[PlannedTest]]:
    """A Laplacian sweep over ``metrics``: its integer (``discrete``) metrics take the exact
    sign-flip test, the others t intervals over seeds."""
    def tests(suite: str, settings: dict) -> list[PlannedTest]:
        return seed_t(suite, settings) + [
            PlannedTest(f"{suite}: {m.text}", "sign-flip", _seeds(settings))
            for m in metrics if getattr(m, "discrete", False)]
    return tests


def paths_t(suite: str, settings: dict) -> list[PlannedTest]:
    """Intervals over the Monte Carlo paths of ``preset.n_paths`` (none without paths)."""
    paths = dict(settings.get("preset", {})).get("n_paths")
    if paths is None:
        return []
    return [PlannedTest(f"{suite}: OU weights, intervals over paths", "t", int(paths),
                        unit="paths")]


def shards_t(suite: str, settings: dict) -> list[PlannedTest]:
    """Claims from each shard's statistics: a t interval over the shards of the first
    corpus."""
    corpora = list(dict(settings.get("corpora", {})).values())
    if not corpora:
        return []
    return [PlannedTest(f"{suite}: per-shard statistics", "t", int(corpora[0]["shards"]),
                        unit="shards")]


def planned_tests(suite, settings: dict) -> list[PlannedTest]:
    """The unit-dependent tests of ``suite``'s claims (a
    :class:`~tokengeo.experiments.suite.Suite`: its ``planned``) under ``settings`` (none
    when the settings skip the suite)."""
    if settings.get("skip"):
        return []
    return suite.planned(suite.name, settings)


def check_decidable(suite, where: str, settings: dict) -> None:
    """Refuse settings under which some claim's test of ``suite`` cannot reach 2.5%
    (ConfigError naming each claim, its test, and the units it needs)."""
    bad = [t for t in planned_tests(suite, settings) if not decidable(t)]
    if not bad:
        return
    lines = "; ".join(
        f"{t.claim} ({t.test} test, {t.units} {t.unit}: smallest p = "
        f"{smallest_p(t):.3g} ≥ {ALPHA_SIDE:g}) needs {units_needed(t)} {t.unit}"
        for t in bad)
    raise ConfigError(f"{where}: undecidable by design: {lines}; add seeds (or units) so "
                      "every claim's test can reach its threshold")
