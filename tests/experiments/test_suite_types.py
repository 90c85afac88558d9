"""Suites as types: every built-in suite is a Suite whose claims have kinds (stand-ins name
their proxy), a skipped suite reports every claim as not run, a sweep's cells and results
share one key scheme, and the L-Transformer states at most 12 rows."""

import tomllib

import pytest

from tokengeo.experiments.cells import CellResult
from tokengeo.experiments.claims import CLAIM_KINDS
from tokengeo.experiments.reproduce import BUILTIN_CONFIG_DIR, SUITES, ReproduceConfig, plan_suite
from tokengeo.experiments.suite import Suite, SuiteContext
from tokengeo.experiments.sweep import Sweep, TrainResult

TYPED = list(SUITES)
TRAINED = [name for name in SUITES if name not in ("flows", "similarity")]  # their units:
# a Monte Carlo path (flows), an input (similarity: tests/experiments/test_similarity_suite.py)


def _settings(suite: str, mode: str) -> dict:
    data = tomllib.loads((BUILTIN_CONFIG_DIR / f"{suite}.toml").read_text())
    return {**data.get("common", {}), **data[mode]}


def _suite(name: str) -> Suite:
    import importlib

    return importlib.import_module(SUITES[name]).SUITE


@pytest.mark.parametrize("name", TYPED)
@pytest.mark.parametrize("mode", ["quick", "full"])
def test_skipped_suite_reports_kinds_and_not_run(name, mode, tmp_path):
    suite = _suite(name)
    assert isinstance(suite, Suite) and suite.name == name
    settings = _settings(name, mode)
    assert not any(k.startswith("_") for k in settings)  # no magic keys
    ctx = SuiteContext(tmp_path, tmp_path / "figures", skipped="not today")
    assert suite.plan(settings, ctx) == []
    out = suite.summarise(settings, {}, ctx)
    measured = [c for c in out.claims if c.kind != "construction"]  # need no cell
    assert measured and all(c.verdict == "not run: not today" for c in measured)
    for c in out.claims:
        for m in [c, *c.members]:
            assert m.kind in CLAIM_KINDS
            assert m.kind != "stand-in" or m.proxy, m.text
    if name == "ltransformer":
        assert len(out.claims) <= 14


def test_quick_ltransformer_reports_the_full_only_comparisons_as_not_run(tmp_path):
    settings = _settings("ltransformer", "quick")
    assert "long_train" not in settings and "widths" not in settings
    plan = plan_suite("ltransformer", ReproduceConfig(out=tmp_path, mode="quick"))
    assert not any(c.key.startswith(("long", "d256", "p1")) for c in plan.cells)
    results = {c.key: CellResult(c.key, None, not_run="n/a") for c in plan.cells}
    out = plan.summarise(results)
    full_only = [c for c in out.claims if "α strategies" in c.text or "long inputs" in c.text]
    assert len(full_only) == 2 and all("runs only with `tokengeo reproduce --full`" in c.verdict
                                       for c in full_only)


def test_sweep_cells_and_results_share_one_key_scheme():
    sweep = Sweep("s", {"a": {"x": 1}, "b": {"x": 2}}, (3, 4), {"y": 0})
    cells = sweep.cells(lambda label, seed, cfg: (dict, {"cfg": cfg}))
    assert [c.key for c in cells] == ["a-s3", "a-s4", "b-s3", "b-s4"]
    assert cells[1].kwargs["cfg"] == {"y": 0, "x": 1, "seed": 4}
    value = {"final": {"test": {"accuracy": 0.5}}, "parameters": {}, "wall_time_s": 1,
             "step": 2}
    results = {c.key: CellResult(c.key, {**value, "final": {"test": {"accuracy": i}}})
               for i, c in enumerate(cells)}
    res = sweep.results(results)
    assert res.not_run() is None
    assert res.values("b", lambda r: r.metric("test", "accuracy")) == [2.0, 3.0]
    assert isinstance(res.typed("a", 3), TrainResult)
    del results["b-s4"]
    assert sweep.results(results).not_run() == "cell b-s4 missing"
    assert sweep.results(results, skipped="later").not_run() == "later"


# The full run's 2.5 h budget sets the seeds: >= 3 per comparison, except the
# retrofit (tokengeo's own question; 2 seeds, see retrofit.toml's [full] note).
FEWEST_FULL_UNITS = {"retrofit": 2}
# DINO's --full budget went to laplacian-images: its [full] is skipped, with a reason;
# the retrofit is opt-in (5 fine-tuning steps cannot answer its question), with its cost.
SKIPPED_IN_FULL = {"dino": "went to laplacian-images", "retrofit": "opt-in"}


@pytest.mark.parametrize("name", TRAINED)
def test_full_settings_train_every_comparison_on_at_least_three_units(name):
    full = _settings(name, "full")
    units = full.get("seeds", list(range(full.get("replicates", 0))))
    assert len(units) >= FEWEST_FULL_UNITS.get(name, 3)
    if name in SKIPPED_IN_FULL:
        assert SKIPPED_IN_FULL[name] in full["skip"]
    else:
        assert not full.get("skip")


def test_the_full_run_is_estimated_within_its_budget(tmp_path):
    """The full run's cost hints, two cells at a time, fit 2 h 30 min: the measured means of
    the last full run, scaled by the work ratio where a cell's work changed (the TOMLs say
    which are estimates)."""
    from tokengeo.experiments.cells import CellStore
    from tokengeo.experiments.dry_run import estimate
    from tokengeo.experiments.reproduce import plan_all

    cfg = ReproduceConfig(out=tmp_path, mode="full")
    costs = estimate(plan_all(cfg, paths_required=False), CellStore(tmp_path))
    assert sum(c.to_run_s for c in costs) / 2 <= 2.5 * 3600


def test_each_suite_owns_its_checks_and_validation_names_none():
    """The cross-checks of a suite's settings live on the suite (``Suite.check``);
    validation runs the checks every suite shares and then the suite's, choosing none by
    name."""
    from pathlib import Path

    from tokengeo.errors import ConfigError
    from tokengeo.experiments import validation
    from tokengeo.experiments.suite import no_checks

    source = Path(validation.__file__).read_text()
    assert not [name for name in SUITES if f'"{name}"' in source]
    owners = {"flows", "retrofit", "dino", "laplacian-images", "laplacian-language"}
    assert {name for name in TYPED if _suite(name).check is not no_checks} == owners
    flows = _suite("flows")
    with pytest.raises(ConfigError, match="heads = \\[4\\] must hold at least two"):
        validation.check_suite(flows, "f.toml", {"heads": [4]})
    with pytest.raises(ConfigError, match="seeds = \\[1, 1\\] repeats 1"):  # shared, first
        validation.check_suite(flows, "f.toml", {"seeds": [1, 1], "heads": [4]})


def test_one_label_for_k_and_the_dino_sweep_reuses_k_variants():
    """Variants over k are labelled by ``k_label`` alone, and DINO's sweep is the k
    variants plus one random backbone for each."""
    from pathlib import Path

    from tokengeo.experiments.suites import dino
    from tokengeo.experiments.sweep import k_label, k_variants

    assert k_label(3) == "k=3" and list(k_variants([0, 2])) == ["k=0", "k=2"]
    suites = Path(dino.__file__).parent
    written = [p.name for p in suites.glob("*.py") if 'f"k={' in p.read_text()]
    assert written == []
    settings = {**_settings("dino", "quick"), "ks": [2, 0]}
    variants = dino._sweep(settings).variants
    assert variants == {**k_variants([0, 2]),
                        **{dino.RANDOM + lab: v for lab, v in k_variants([0, 2]).items()}}
