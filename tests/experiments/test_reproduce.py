"""The reproduce machinery on a fabricated suite: resume, not-run cells, the report."""

from dataclasses import replace
from pathlib import Path

import pytest

from tokengeo.errors import ConfigError, DataNotFoundError
from tokengeo.experiments import reproduce as rp
from tokengeo.experiments.cells import Cell
from tokengeo.experiments.claims import Claim
from tokengeo.experiments.report import SuiteOutput
from tokengeo.experiments.stats import Region, paired_difference

CALLS: list[str] = []
STOP_AT: list[str] = []


def _measure(seed: int, setting: str) -> dict:
    if setting in STOP_AT:
        raise KeyboardInterrupt
    if setting == "missing":
        raise DataNotFoundError("source 'x' is not installed; install it with: apt-get install x")
    CALLS.append(f"{setting}-{seed}")
    treated = setting == "treated"  # differences not tied over seeds (an exact test's case)
    return {"acc": 0.8 + (0.1 if treated else 0.0) + 0.001 * seed * (2 if treated else 1)}


def _cells(settings, ctx):
    return [Cell("fake", f"{s}-{seed}", _measure, {"seed": seed, "setting": s})
            for s in settings["settings"] for seed in settings["seeds"]]


def _summarise(settings, results, ctx):
    def accs(s):
        return [results[f"{s}-{i}"].value["acc"] for i in settings["seeds"]]

    claims = [Claim("fake", "treated beats baseline", "Fake et al., §1", "0.1", "acc diff",
                    Region.above(0), measured=paired_difference(accs("treated"), accs("base")))]
    if "missing" in settings["settings"]:
        reason = results["missing-0"].not_run
        claims.append(Claim("fake", "needs a missing source", "Fake, §2", "1", "x",
                            Region.above(0), not_run=reason))
    return SuiteOutput("fake", "Fake suite", "Fake et al.", claims)


@pytest.fixture
def conf(fake_suite):
    CALLS.clear()
    STOP_AT.clear()
    return fake_suite(_cells, _summarise,
                      "[quick]\nseeds = [0, 1, 2]\nsettings = ['base', 'treated', 'missing']\n"
                      "[full]\nseeds = [0, 1, 2, 3, 4]\nsettings = ['base', 'treated']\n",
                      seeds="int_list", settings="str_list")


def test_report_verdicts_and_not_run(conf, tmp_path):
    cfg = rp.ReproduceConfig(out=tmp_path / "out", config_dir=conf)
    path, outputs = rp.reproduce(cfg, log=lambda m: None)
    verdicts = [c.verdict for c in outputs[0].claims]
    assert verdicts[0] == "reproduced"
    assert verdicts[1].startswith("not run: source 'x' is not installed")
    html = path.read_text()
    assert "treated beats baseline" in html and "not run: source" in html
    assert (tmp_path / "out" / "report.md").exists()
    assert not list((tmp_path / "out" / "cells" / "fake").glob("missing-0*"))


def test_interrupted_run_resumes_without_recomputing(conf, tmp_path):
    cfg = rp.ReproduceConfig(out=tmp_path / "out", config_dir=conf)
    STOP_AT.append("treated")
    with pytest.raises(KeyboardInterrupt):
        rp.reproduce(cfg, log=lambda m: None)
    assert CALLS == ["base-0", "base-1", "base-2"]
    STOP_AT.clear()
    CALLS.clear()
    rp.reproduce(cfg, log=lambda m: None)
    assert CALLS == ["treated-0", "treated-1", "treated-2"]  # base cells came from disk


def test_bad_suite_names_and_configs(conf, tmp_path):
    with pytest.raises(ConfigError, match="unknown suite"):
        rp.reproduce(rp.ReproduceConfig(out=tmp_path, only=("nope",), config_dir=conf))
    with pytest.raises(ConfigError, match="not found"):
        rp.reproduce(rp.ReproduceConfig(out=tmp_path, config_dir=Path(tmp_path / "empty")))


def test_a_suite_module_without_SUITE_is_refused_naming_what_it_must_define(
        conf, tmp_path, monkeypatch):
    import sys

    monkeypatch.delattr(sys.modules["tokengeo_fake_suite"], "SUITE")
    with pytest.raises(TypeError, match=r"tokengeo_fake_suite defines no SUITE; define SUITE = "
                       r"tokengeo\.experiments\.suite\.Suite\(.*cells\(settings, ctx\)"):
        rp.plan_suite("fake", rp.ReproduceConfig(out=tmp_path / "out", config_dir=conf))
    assert not (tmp_path / "out").exists()  # refused before anything is written


def test_changed_settings_recompute_only_the_changed_cells(conf, tmp_path):
    cfg = rp.ReproduceConfig(out=tmp_path / "out", config_dir=conf)
    rp.reproduce(cfg, log=lambda m: None)
    CALLS.clear()
    (conf / "fake.toml").write_text(
        "[quick]\nseeds = [0, 1, 2, 3]\nsettings = ['base', 'treated']\n")
    rp.reproduce(cfg, log=lambda m: None)
    assert CALLS == ["base-3", "treated-3"]  # seeds 0-2 unchanged: read from disk


def test_report_json_says_what_the_cells_cost_and_keeps_it_when_read_from_cache(conf,
                                                                                tmp_path):
    import json

    cfg = rp.ReproduceConfig(out=tmp_path / "out", config_dir=conf)
    rp.reproduce(cfg, log=lambda m: None)
    first = json.loads((tmp_path / "out" / "report.json").read_text())["cells"]
    assert first["fake"]["cells"] == 9 and first["fake"]["timed"] == 6  # 3 not run
    assert first["all"] == first["fake"] and first["fake"]["core_hours"] >= 0
    rp.reproduce(cfg, log=lambda m: None)  # every computed cell read from disk
    again = json.loads((tmp_path / "out" / "report.json").read_text())["cells"]
    assert again == first


def test_rejudge_applies_a_changed_definition_to_stored_cells_without_computing(
        conf, tmp_path, monkeypatch):
    import shutil

    first = tmp_path / "published"
    cfg = rp.ReproduceConfig(out=first, config_dir=conf)
    _, outputs = rp.reproduce(cfg, log=lambda m: None)
    assert outputs[0].claims[0].verdict == "reproduced"
    copy = tmp_path / "copy"  # the stored cells travel with the run (no weights in them)
    shutil.copytree(first / "cells", copy / "cells")
    CALLS.clear()

    def stricter(settings, results, ctx):  # a corrected definition: gain above 0.5
        out = _summarise(settings, results, ctx)
        out.claims[0].region = Region.above(0.5)
        return out

    import sys

    module = sys.modules["tokengeo_fake_suite"]
    monkeypatch.setattr(module, "SUITE", replace(module.SUITE, summarise=stricter))
    _, outputs = rp.reproduce(rp.ReproduceConfig(out=copy, config_dir=conf, rejudge=True),
                              log=lambda m: None)
    assert CALLS == []  # nothing recomputed
    assert outputs[0].claims[0].verdict == "not reproduced"
    assert (copy / "report.json").exists()
    cells = [Cell("fake", "new-0", _measure, {"seed": 0, "setting": "new"})]
    got = rp.compute_cells(cells, rp.CellStore(copy), rp.ExecutorConfig("serial"),
                           lambda m: None, compute=False)
    assert got["fake", "new-0"].not_run == rp.NOT_STORED and CALLS == []
