"""Claims undecidable by design are refused before any cell runs; no shipped mode has one."""

import importlib
import math

import pytest

from tokengeo.errors import ConfigError
from tokengeo.experiments.decidability import (
    PlannedTest,
    check_decidable,
    decidable,
    planned_tests,
    smallest_p,
    units_needed,
)
from tokengeo.experiments.exact import p_above
from tokengeo.experiments.rankings import ranking_difference_test
from tokengeo.experiments.reproduce import (
    BUILTIN_CONFIG_DIR,
    SUITES,
    ReproduceConfig,
    load_settings,
    plan_suite,
)


def _suite(name: str):
    return importlib.import_module(SUITES[name]).SUITE


def test_the_floors_are_the_tests_own_smallest_p_values():
    # sign-flip: every value positive is the most extreme sample
    for n in (3, 5, 6):
        floor = smallest_p(PlannedTest("c", "sign-flip", n))
        assert p_above([1.0 + i for i in range(n)]) == pytest.approx(floor) == 0.5**n
    # relabelling: two tasks ranking three options in opposite orders, n runs each
    for n in (3, 4, 5):
        a = [[1.0, 2.0, 3.0 + 0.1 * s] for s in range(n)]
        b = [[3.0 + 0.1 * s, 2.0, 1.0] for s in range(n)]
        test = ranking_difference_test(a, b)
        floor = smallest_p(PlannedTest("c", "relabelling", n, n, symmetric=True))
        assert test.p_value == pytest.approx(floor) == 2 / math.comb(2 * n, n)


def test_undecidable_tests_name_the_units_they_need():
    assert not decidable(PlannedTest("c", "sign-flip", 5))
    assert units_needed(PlannedTest("c", "sign-flip", 4)) == 6
    assert units_needed(PlannedTest("c", "relabelling", 4, 4, symmetric=True)) == 5
    assert units_needed(PlannedTest("c", "t", 1)) == 2
    with pytest.raises(ConfigError, match=r"ranking of the α.*needs 5 seeds per task"):
        check_decidable(_suite("ltransformer"), "x.toml", {
            "seeds": [0, 1, 2, 3], "alphas": ["identity", "linear"], "long_train": {}})


@pytest.mark.parametrize("mode", ["quick", "full", "paper"])
def test_no_shipped_claim_is_undecidable_by_design(mode):
    for suite in SUITES:
        settings = load_settings(BUILTIN_CONFIG_DIR, suite, mode)
        for t in planned_tests(_suite(suite), settings):
            assert decidable(t), (mode, suite, t)
        check_decidable(_suite(suite), f"{suite}.toml", settings)
    if mode != "quick":  # the α ranking runs, and can decide
        tests = planned_tests(_suite("ltransformer"), load_settings(BUILTIN_CONFIG_DIR,
                                                                    "ltransformer", mode))
        assert any(t.test == "relabelling" for t in tests)


def test_a_run_is_refused_before_any_cell(tmp_path):
    text = (BUILTIN_CONFIG_DIR / "ltransformer.toml").read_text()
    common = text[:text.index("[quick]")]
    full = text[text.index("[full]"):text.index("[paper]")].replace(
        "seeds = [0, 1, 2, 3, 4]", "seeds = [0, 1, 2, 3]")  # the α ranking at 4 per task
    (tmp_path / "ltransformer.toml").write_text(common + full.replace("[full]", "[quick]"))
    out = tmp_path / "out"
    cfg = ReproduceConfig(out=out, only=("ltransformer",), config_dir=tmp_path)
    with pytest.raises(ConfigError, match="undecidable by design.*needs 5 seeds per task"):
        plan_suite("ltransformer", cfg)
    assert not out.exists()


def test_each_suite_declares_its_planned_tests_beside_its_check():
    import tokengeo.experiments.decidability as decidability

    assert not hasattr(decidability, "PLANNERS")  # no table keyed by suite name
    lt = _suite("ltransformer")
    settings = {"seeds": [0, 1, 2, 3, 4], "alphas": ["identity", "linear"], "long_train": {}}
    assert [t.test for t in lt.planned("ltransformer", settings)] == ["t", "relabelling"]
    assert [t.unit for t in planned_tests(_suite("flows"), {"preset": {"n_paths": 8}})] == [
        "paths"]
    assert [t.unit for t in planned_tests(_suite("similarity"),
                                          {"corpora": {"a": {"shards": 4}}})] == ["shards"]
