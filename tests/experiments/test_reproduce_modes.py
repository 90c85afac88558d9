"""``reproduce --paper`` (paths the user supplies, checked before anything runs) and
``--dry-run`` (cells and cost, nothing run or written), on a fabricated suite and on the
built-in suites' ``[paper]`` tables."""

from __future__ import annotations

import pytest
from helpers.cifar_archive import cifar100_members, write_archive, write_folder

from tokengeo.cli import main
from tokengeo.errors import ConfigError
from tokengeo.experiments import reproduce as rp
from tokengeo.experiments.cells import Cell, CellStore
from tokengeo.experiments.claims import Claim
from tokengeo.experiments.report import SuiteOutput
from tokengeo.experiments.stats import Region, paired_difference
from tokengeo.experiments.user_data import fill_paths, parse_data_paths

CALLS: list[tuple[str, int]] = []


def _measure(data: str, seed: int) -> dict:
    CALLS.append((data, seed))
    return {"acc": 0.5 + 0.01 * seed, "data": data}


def _cells(settings, ctx):
    return [Cell("fake", f"s{seed}", _measure, {"data": settings["data"], "seed": seed},
                 cost=settings["cost"]) for seed in settings["seeds"]]


def _summarise(settings, results, ctx):
    accs = [results[f"s{i}"].value["acc"] for i in settings["seeds"]]
    claim = Claim("fake", "acc above its own mean - 1", "Fake, §1", "1", "acc", Region.above(0),
                  measured=paired_difference(accs, [a - 1 for a in accs]))
    return SuiteOutput("fake", "Fake suite", "Fake et al.", [claim])


TOML = """[common]
cost = 1800.0
[quick]
seeds = [0, 1]
data = "offline"
[paper]
seeds = [0, 1, 2]
data = "cifar100:${FAKE_DATA}"
"""


@pytest.fixture
def conf(fake_suite, monkeypatch):
    monkeypatch.delenv("FAKE_DATA", raising=False)
    CALLS.clear()
    return fake_suite(_cells, _summarise, TOML, cost="number", seeds="int_list",
                      data="str")


def _cfg(conf, tmp_path, mode="paper", **paths):
    return rp.ReproduceConfig(out=tmp_path / "out", mode=mode, config_dir=conf,
                              data_paths=paths)


def test_paper_mode_runs_on_the_supplied_path(conf, tmp_path):
    data = write_archive(tmp_path / "cifar-100-python.tar.gz", "cifar-100-python",
                         cifar100_members())  # read whole at the door: a real (tiny) archive
    _, outputs = rp.reproduce(_cfg(conf, tmp_path, FAKE_DATA=str(data)), log=print)
    assert CALLS == [(f"cifar100:{data}", s) for s in range(3)]
    assert not outputs[0].claims[0].verdict.startswith("not run")  # measured, on that path
    assert '"mode": "paper"' in (tmp_path / "out" / "report.json").read_text()


def test_paper_mode_without_the_path_fails_before_anything(conf, tmp_path):
    with pytest.raises(ConfigError) as err:
        rp.reproduce(_cfg(conf, tmp_path), log=print)
    message = str(err.value)
    assert "suite 'fake'" in message and "data = 'cifar100:${FAKE_DATA}'" in message
    assert "--data-path FAKE_DATA=PATH" in message and "cifar-100-python.tar.gz" in message
    assert "\n" not in message
    assert CALLS == [] and not (tmp_path / "out").exists()


def test_a_path_that_does_not_exist_is_refused(conf, tmp_path):
    with pytest.raises(ConfigError, match=r"FAKE_DATA=/no/such \(--data-path\) does not exist"):
        rp.reproduce(_cfg(conf, tmp_path, FAKE_DATA="/no/such"), log=print)
    assert not (tmp_path / "out").exists()


def test_the_environment_supplies_a_path(conf, tmp_path, monkeypatch):
    folder = write_folder(tmp_path / "cifar", "cifar-100-python", cifar100_members())
    monkeypatch.setenv("FAKE_DATA", str(folder))
    rp.reproduce(_cfg(conf, tmp_path), log=print)
    assert CALLS[0] == (f"cifar100:{folder}", 0)


def test_a_path_no_suite_uses_is_refused(conf, tmp_path):
    with pytest.raises(ConfigError, match="--data-path FAKE_DTA is used by none"):
        rp.reproduce(_cfg(conf, tmp_path, FAKE_DTA=str(tmp_path)), log=print)
    with pytest.raises(ConfigError, match=r"they need \['FAKE_DATA'\]"):
        rp.reproduce(_cfg(conf, tmp_path, FAKE_DTA=str(tmp_path)), log=print)


@pytest.mark.parametrize("items, message", [
    (["FAKE_DATA"], "must be NAME=PATH"),
    (["=x"], "must be NAME=PATH"),
    (["9X=/a"], "must be NAME=PATH"),
    (["A=/a", "A=/b"], "gives A twice"),
])
def test_malformed_data_paths(items, message):
    with pytest.raises(ConfigError, match=message):
        parse_data_paths(items)


def test_placeholders_in_nested_tables_and_lists(tmp_path):
    settings = {"train": {"data": "${A}", "more": ["x/${A}/y", 3]}, "n": 1}
    filled, unresolved = fill_paths("s", "s.toml", settings, {"A": str(tmp_path)})
    assert filled == {"train": {"data": str(tmp_path), "more": [f"x/{tmp_path}/y", 3]}, "n": 1}
    assert unresolved == []
    _, unresolved = fill_paths("s", "s.toml", settings, {}, required=False, environ={})
    assert [(u.key, u.name) for u in unresolved] == [("train.data", "A"), ("train.more[0]", "A")]


def test_dry_run_prints_cells_and_cost_and_writes_nothing(conf, tmp_path):
    lines: list[str] = []
    costs = rp.dry_run(_cfg(conf, tmp_path), jobs=2, out=lines.append)
    text = "\n".join(lines)
    assert [(c.suite, c.cells, c.cached) for c in costs] == [("fake", 3, 0)]
    assert costs[0].total_s == 3 * 1800.0  # three cells of 1800 core-seconds (the hints)
    assert "1.50" in text and "at least 0.75 h of wall time" in text  # 1.5 core-h / 2 jobs
    assert "needs a path: suite 'fake' data" in text and "--data-path FAKE_DATA=PATH" in text
    assert CALLS == [] and not (tmp_path / "out").exists()


def test_dry_run_after_a_run_counts_cached_cells_at_their_measured_time(conf, tmp_path):
    cfg = _cfg(conf, tmp_path, mode="quick")
    rp.reproduce(cfg, log=print)
    store = CellStore(tmp_path / "out")
    cells = rp.plan_all(rp.ReproduceConfig(**{**cfg.__dict__, "out": store.out}))[0].cells
    measured = [store.measured_seconds(c) for c in cells]
    assert all(s is not None and 0 <= s < 60 for s in measured)  # recorded by the run
    CALLS.clear()
    costs = rp.dry_run(cfg, jobs=1, out=lambda line: None)
    assert (costs[0].cells, costs[0].cached, costs[0].measured) == (2, 2, 2)
    assert costs[0].to_run_s == 0 and costs[0].total_s == pytest.approx(sum(measured))
    assert CALLS == []


def test_cli_paper_without_paths_exits_2_in_one_line(conf, tmp_path, capsys):
    code = main(["reproduce", "--paper", "--config-dir", str(conf),
                 "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "--data-path FAKE_DATA=PATH" in err[0]
    assert not (tmp_path / "out").exists()


def test_cli_dry_run_exits_0_and_prints_the_table(conf, tmp_path, capsys):
    code = main(["reproduce", "--dry-run", "--paper", "--config-dir", str(conf),
                 "--out", str(tmp_path / "out"), "--jobs", "3"])
    out = capsys.readouterr().out
    assert code == 0 and "fake" in out and "--jobs 3" in out
    assert not (tmp_path / "out").exists()


def test_builtin_paper_tables_pass_every_check_and_name_their_paths(tmp_path):
    """Each suite's [paper] table is checked against its schema; the dry run lists the
    placeholders a user must supply."""
    cfg = rp.ReproduceConfig(out=tmp_path / "out", mode="paper")
    lines: list[str] = []
    costs = rp.dry_run(cfg, jobs=2, out=lines.append)
    assert [c.suite for c in costs] == list(rp.SUITES)
    assert all(c.cells > 0 or c.skipped for c in costs)
    needs = {u.name for c in costs for u in c.unresolved}
    assert {"CIFAR100", "IMAGENET", "BERT_BASE"} <= needs
    with pytest.raises(ConfigError, match="--data-path"):
        rp.reproduce(cfg, log=print)
    assert not (tmp_path / "out").exists()


PAPER_MICRO = """[common]
geometry_k = 2
[paper]
seeds = [0, 1]
ks = [0, 2]
geometry_examples = 6
train = { model = "vit-tiny", data = "cifar10:${CIFAR10}", steps = 2, batch_size = 8, warmup = 1, eval_every = 0, final_eval_batches = 1, model_overrides = { n_layers = 1, d_model = 16 } }
"""


@pytest.mark.slow  # ~12 s: four micro trainings
def test_laplacian_images_trains_on_a_supplied_cifar_archive(tmp_path):
    """The whole path of --paper: placeholder -> name:path -> CIFAR loader -> a ViT on
    3x32x32 images -> claims (on a CIFAR-10 archive of 26 images made here)."""
    from helpers.cifar_archive import cifar10_members, write_archive

    archive = write_archive(tmp_path / "cifar-10-python.tar.gz", "cifar-10-batches-py",
                            cifar10_members())
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "laplacian-images.toml").write_text(PAPER_MICRO)
    cfg = rp.ReproduceConfig(out=tmp_path / "out", mode="paper", only=("laplacian-images",),
                             config_dir=conf, data_paths={"CIFAR10": str(archive)})
    _, outputs = rp.reproduce(cfg, log=lambda m: None)
    assert outputs[0].claims and not any(c.verdict.startswith("not run")
                                         for c in outputs[0].claims if c.kind != "new")
    runs = list((tmp_path / "out" / "runs" / "laplacian-images").iterdir())
    assert len(runs) == 4
    resolved = (runs[0] / "config.json").read_text()
    assert f"cifar10:{archive}" in resolved  # the run trained on the supplied archive


def test_cli_dry_run_checks_jobs_and_unknown_paths(conf, tmp_path, capsys):
    code = main(["reproduce", "--dry-run", "--config-dir", str(conf), "--jobs", "-1",
                 "--out", str(tmp_path / "out")])
    assert code == 2 and "jobs=-1" in capsys.readouterr().err
    code = main(["reproduce", "--dry-run", "--config-dir", str(conf),
                 "--data-path", "NOPE=/x", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "--data-path NOPE is used by none" in err[0]
