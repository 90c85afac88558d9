"""Cells in worker processes and on Ray: the same report as a serial run, resumable."""

from pathlib import Path

import pytest
import torch

from tokengeo.errors import ConfigError
from tokengeo.experiments import reproduce as rp
from tokengeo.experiments.cells import Cell
from tokengeo.experiments.claims import Claim
from tokengeo.experiments.executors import ExecutorConfig, execute_cell, run_cells
from tokengeo.experiments.report import SuiteOutput
from tokengeo.experiments.stats import Region, paired_difference


def _measure(seed: int, setting: str, calls: str) -> dict:
    """A cell that leaves a trace of each call (workers share only the file system) and
    fails while a file ``FAIL-<setting>`` exists beside the traces."""
    if Path(calls, f"FAIL-{setting}").exists():
        raise RuntimeError(f"cell {setting}-{seed} failed")
    Path(calls, f"{setting}-{seed}").touch()
    g = torch.Generator().manual_seed(seed)
    noise = torch.randn(64, generator=g, dtype=torch.float64)
    acc = 0.8 + (0.1 if setting == "treated" else 0.0) + 1e-3 * float(noise.sum())
    return {"acc": acc, "threads": torch.get_num_threads()}


def _threads() -> dict:
    return {"threads": torch.get_num_threads()}


def _cells(settings, ctx):
    return [Cell("fake", f"{s}-{seed}", _measure,
                 {"seed": seed, "setting": s, "calls": settings["calls"]})
            for s in ("base", "treated") for seed in settings["seeds"]]


def _summarise(settings, results, ctx):
    def accs(s):
        return [results[f"{s}-{i}"].value["acc"] for i in settings["seeds"]]

    claim = Claim("fake", "treated beats baseline", "Fake et al., §1", "0.1", "acc diff",
                  Region.above(0), measured=paired_difference(accs("treated"), accs("base")))
    return SuiteOutput("fake", "Fake suite", "Fake et al.", [claim])


@pytest.fixture
def conf_and_calls(fake_suite, tmp_path):
    calls = tmp_path / "calls"
    calls.mkdir()
    return fake_suite(_cells, _summarise, f"[quick]\nseeds = [0, 1, 2, 3]\ncalls = '{calls}'\n",
                      seeds="int_list", calls="str"), calls


def _report(out: Path, conf: Path, executor: ExecutorConfig) -> str:
    cfg = rp.ReproduceConfig(out=out, config_dir=conf)
    path, _ = rp.reproduce(cfg, log=lambda m: None, executor=executor)
    return path.with_suffix(".md").read_text()


def test_two_workers_give_the_serial_report(conf_and_calls, tmp_path):
    conf, calls = conf_and_calls
    serial = _report(tmp_path / "serial", conf, ExecutorConfig("serial"))
    parallel = _report(tmp_path / "parallel", conf, ExecutorConfig("process", jobs=2))
    assert parallel == serial
    assert "treated beats baseline" in serial


def test_a_failed_parallel_run_resumes_with_only_the_missing_cells(conf_and_calls, tmp_path):
    conf, calls = conf_and_calls
    flag = calls / "FAIL-treated"
    flag.touch()
    with pytest.raises(RuntimeError, match="failed"):
        _report(tmp_path / "out", conf, ExecutorConfig("process", jobs=2))
    cached = sorted(p.name.rsplit("-", 1)[0] for p in (tmp_path / "out/cells/fake").glob("*.json"))
    finished = sorted(p.name for p in calls.iterdir() if p != flag)
    # every cached cell had finished; a cell that finished while the driver was stopping may
    # be lost (recomputed next time), never cached half-done
    assert cached and set(cached) <= set(finished)
    assert all(c.startswith("base") for c in cached)
    for p in calls.iterdir():
        p.unlink()
    _report(tmp_path / "out", conf, ExecutorConfig("process", jobs=2))
    recomputed = sorted(p.name for p in calls.iterdir())
    everything = sorted(f"{s}-{i}" for s in ("base", "treated") for i in range(4))
    assert sorted(recomputed + cached) == everything  # only the missing cells ran


def test_each_cell_runs_with_its_own_thread_count_and_restores_the_callers():
    before = torch.get_num_threads()
    cell = Cell("t", "x", _threads, {}, threads=1)
    assert execute_cell(cell).value == {"threads": 1}
    assert torch.get_num_threads() == before
    cells = [Cell("t", f"x{i}", _threads, {}, threads=1 + i % 2) for i in range(4)]
    got = {c.key: o.value["threads"] for c, o in run_cells(cells, ExecutorConfig(jobs=2))}
    assert got == {"x0": 1, "x1": 2, "x2": 1, "x3": 2}


@pytest.mark.parametrize("bad, match", [
    (ExecutorConfig("dask"), "executor='dask'"),
    (ExecutorConfig(jobs=-1), "jobs=-1"),
    (ExecutorConfig(jobs=1.5), "jobs=1.5"),
    (ExecutorConfig("process", ray_address="auto"), "needs --executor ray"),
])
def test_bad_executor_settings_are_refused(bad, match):
    with pytest.raises(ConfigError, match=match):
        list(run_cells([Cell("t", "x", _threads, {})], bad))


def test_ray_cells_give_the_serial_report(conf_and_calls, tmp_path):
    pytest.importorskip("ray", reason="Ray is the optional extra tokengeo[cluster]")
    conf, calls = conf_and_calls
    serial = _report(tmp_path / "serial", conf, ExecutorConfig("serial"))
    on_ray = _report(tmp_path / "ray", conf, ExecutorConfig("ray", jobs=2))
    assert on_ray == serial


def test_a_real_suite_gives_the_same_numbers_in_two_workers(tmp_path):
    from test_suites import MICRO

    (tmp_path / "flows.toml").write_text(MICRO["flows"])
    outs = {}
    for name, executor in (("serial", ExecutorConfig("serial")),
                           ("two", ExecutorConfig("process", jobs=2))):
        cfg = rp.ReproduceConfig(out=tmp_path / name, only=("flows",), config_dir=tmp_path)
        _, (out,) = rp.reproduce(cfg, log=lambda m: None, executor=executor)
        assert out.figures and all(Path(f).exists() for f in out.figures)
        outs[name] = [(c.verdict, c.measured) for c in out.claims]
    assert outs["two"] == outs["serial"]
