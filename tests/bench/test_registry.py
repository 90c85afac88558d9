"""Benchmarks in one style: every one is registered with a config dataclass and run(cfg),
has its benchmarks/NAME.py, and comes back in one JSON shape; ``tokengeo bench all`` runs
every one and records what cannot run here."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import json
from pathlib import Path

import pytest
import torch

from tokengeo.bench import registry
from tokengeo.cli import main
from tokengeo.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
SHAPE = ["benchmark", "versions", "device", "threads", "load_at_start", "config", "figures",
         "targets"]


@pytest.mark.parametrize("name", list(registry.BENCHMARKS))
def test_every_benchmark_has_a_config_dataclass_run_and_a_script(name):
    bench = registry.BENCHMARKS[name]
    cls = bench.config_class()
    assert dataclasses.is_dataclass(cls)
    fields = {f.name for f in dataclasses.fields(cls)}
    assert {field for field, _ in bench.quick} <= fields  # --quick sets real fields
    assert list(inspect.signature(bench.runner()).parameters)[0] == "cfg"
    quick = bench.make_config(quick=True)
    assert all(getattr(quick, field) == value for field, value in bench.quick)
    script = ast.parse((ROOT / "benchmarks" / f"{name}.py").read_text())
    calls = [n for n in ast.walk(script) if isinstance(n, ast.Call)
             and getattr(n.func, "id", None) == "script"]
    assert [c.args[0].value for c in calls] == [name]


def test_every_script_is_a_registered_benchmark():
    scripts = sorted(p.stem for p in (ROOT / "benchmarks").glob("*.py"))
    assert scripts == sorted(registry.BENCHMARKS)


def test_a_benchmark_comes_back_in_the_one_shape(one_thread):
    from tokengeo.bench.flows import FlowsBenchConfig

    result = registry.run("flows", FlowsBenchConfig(n=6, heads=2, paths=2, steps=2, repeats=1))
    assert list(result) == SHAPE
    assert result["benchmark"] == "flows" and result["threads"] == torch.get_num_threads()
    assert result["versions"]["torch"] == torch.__version__
    assert len(result["load_at_start"]) == 3
    assert result["config"]["n"] == 6 and result["figures"]["agree_1e-9"]
    assert not set(registry.HEADER_KEYS) & set(result["figures"])


def test_unknown_benchmark_names_the_choices():
    with pytest.raises(ConfigError, match=r"no benchmark 'nope'; choose one of \['laplacian'"):
        registry.benchmark("nope")


def test_bench_all_runs_every_one_and_records_what_cannot_run(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("tokengeo.bench.measure.ensure_precise_rss", lambda: None)
    ran = []

    def fake_runner(self):
        def run(cfg):
            ran.append(self.name)
            if self.name == "similarity":
                raise ConfigError("the model is not installed; run make mpnet")
            return {"benchmark": self.name, "torch": "x", "value": 1.0,
                    "targets": {"t": {"value": 1.0, "target": "<= 2", "met": True}}}
        return run

    monkeypatch.setattr(registry.Benchmark, "runner", fake_runner)
    monkeypatch.setattr("tokengeo.bench.laplacian.table", lambda result: "table")
    out = tmp_path / "all.json"
    assert main(["bench", "all", "--quick", "--json", str(out)]) == 0
    results = json.loads(out.read_text())
    assert [r["benchmark"] for r in results] == list(registry.BENCHMARKS)
    assert sorted(ran) == sorted(registry.BENCHMARKS)
    by_name = {r["benchmark"]: r for r in results}
    assert by_name["similarity"] == {"benchmark": "similarity",
                                     "skipped": "the model is not installed; run make mpnet"}
    ok = by_name["flows"]
    assert list(ok) == SHAPE and ok["figures"] == {"value": 1.0}
    assert ok["targets"]["t"]["met"] and ok["config"]["repeats"] == 1  # --quick


@pytest.mark.cuda
def test_cuda_event_timer_measures_gpu_work():
    from tokengeo.bench.measure import cuda_median_ms, cuda_seconds

    x = torch.randn(2048, 2048, device="cuda")
    small = cuda_median_ms(lambda: x[:64, :64] @ x[:64, :64], repeats=5)
    large = cuda_median_ms(lambda: x @ x @ x @ x, repeats=5)
    assert 0 < small < large and cuda_seconds(lambda: x @ x) > 0


def test_flags_of_fields_the_device_chooses_take_their_annotated_type():
    from tokengeo.bench.cli import parse_config
    from tokengeo.bench.laplacian import LaplacianBenchConfig

    cfg = parse_config(LaplacianBenchConfig, argv=["--seq-lens", "64", "128", "--batch", "2",
                                                   "--kernel", "compose", "--compile"])
    assert cfg.seq_lens == (64, 128) and cfg.batch == 2 and cfg.compile
    assert cfg.kernel == "compose" and cfg.n_heads == 4  # the CPU default fills the rest
    with pytest.raises(ConfigError, match=r"kernel='lean' is not valid; choose one of \['auto'"):
        parse_config(LaplacianBenchConfig, argv=["--kernel", "lean"])


def test_interleaved_times_take_a_timer_round_robin():
    """One round-robin loop serves the wall clock and the CUDA-event timer alike."""
    from tokengeo.bench.measure import interleaved_times

    calls: list[str] = []
    fns = {"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}
    seconds = iter(range(1, 100))
    times = interleaved_times(fns, repeats=3, warmup=1, timer=lambda fn: (fn(), next(seconds))[1])
    assert calls == ["a", "b"] + ["a", "b"] * 3  # warm-up, then alternating
    assert times == {"a": [1, 3, 5], "b": [2, 4, 6]}
