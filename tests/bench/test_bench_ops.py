"""The benchmark's three operators compute the same thing (a benchmark of wrong code is moot)."""

import pytest
import torch

from tokengeo.bench.laplacian import (
    composed_laplacian_op,
    fused_laplacian_op,
    naive_laplacian_op,
    standard_op,
)
from tokengeo.bench.measure import interleaved_medians


def test_fused_and_naive_laplacian_agree_and_complement_attention():
    q, k, v = (torch.randn(2, 17, 3, 8, dtype=torch.float64) for _ in range(3))
    fused, naive = fused_laplacian_op(q, k, v), naive_laplacian_op(q, k, v)
    assert torch.allclose(fused, naive, atol=1e-12)
    assert torch.equal(fused, composed_laplacian_op(q, k, v))
    assert torch.allclose(standard_op(q, k, v) + fused, v.reshape(2, 17, 24), atol=1e-12)


def test_interleaved_medians_calls_each_function():
    calls = {"a": 0, "b": 0}

    def make(name):
        def f():
            calls[name] += 1
        return f

    t = interleaved_medians({"a": make("a"), "b": make("b")}, repeats=3, warmup=1)
    assert set(t) == {"a", "b"} and all(v >= 0 for v in t.values())
    assert calls == {"a": 4, "b": 4}


def test_flows_benchmark_reference_agrees_with_the_simulator():
    from tokengeo.bench.flows import FlowsBenchConfig, run

    r = run(FlowsBenchConfig(n=6, heads=2, paths=2, steps=2, repeats=1))
    assert r["agree_1e-9"] and r["ratio"] > 0
    assert len(r["all_s_per_step"]["ours"]) == len(r["all_s_per_step"]["reference"]) == 1


def test_benchmark_flags_come_from_the_config_fields():
    import pytest

    from tokengeo.bench.cli import parse_config
    from tokengeo.bench.similarity import SimilarityBenchConfig
    from tokengeo.bench.trainer import TrainerBenchConfig

    cfg = parse_config(SimilarityBenchConfig, argv=["--batch-size", "4", "--memory-samples",
                                                    "8", "16", "--no-memory"])
    assert cfg == SimilarityBenchConfig(batch_size=4, memory_samples=(8, 16), memory=False)
    assert parse_config(TrainerBenchConfig, argv=[]) == TrainerBenchConfig()
    with pytest.raises(SystemExit) as exc:
        parse_config(TrainerBenchConfig, argv=["--case", "bert"])
    assert exc.value.code == 2


def test_benchmark_scripts_are_thin_entry_points():
    """Every benchmarks/*.py only parses flags and prints what tokengeo.bench computes."""
    import ast
    from pathlib import Path

    scripts = sorted((Path(__file__).parents[2] / "benchmarks").glob("*.py"))
    assert len(scripts) == 7
    for path in scripts:
        tree = ast.parse(path.read_text())
        defs = [n.name for n in ast.walk(tree)
                if isinstance(n, ast.FunctionDef | ast.ClassDef | ast.AsyncFunctionDef)]
        sources = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        assert defs == [], f"{path.name} defines {defs}: move them to tokengeo.bench"
        assert any(m and m.startswith("tokengeo.bench.") for m in sources), path.name


def test_host_cost_benchmark_reports_every_kernel_against_standard(one_thread):
    """benchmarks/laplacian_host.py: every op timed and kept-memory measured, ratios taken
    to standard SDPA in the same process, the in_place kernel on its device path."""
    from tokengeo.bench import laplacian_host
    from tokengeo.nn.kernels import in_place

    routes = []
    decide = in_place.backward_route
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(in_place, "backward_route", lambda **kw: routes.append(decide(**kw)) or routes[-1])
        out = laplacian_host.run(laplacian_host.HostBenchConfig(repeats=1, calls=2))
    assert routes and set(routes) <= {"device", "packed_device"}  # the CUDA routes' Python
    names = set(out["host"]["us"])
    assert {"standard", "v_minus_sdpa", "compose planned[lap]", "in_place[half]"} <= names
    assert len(names) == 2 + 3 * len(laplacian_host.KERNELS) * len(laplacian_host.KINDS)
    assert out["host"]["ratio"]["standard"] == 1.0
    assert all(t > 0 for t in out["host"]["us"].values())
    assert "MALLOC_MMAP_THRESHOLD_" in out["memory"]["skipped"]  # pytest did not set it


@pytest.mark.parametrize("argv", [["--repeats", "0"], ["--calls", "-3"]])
def test_host_benchmark_refuses_counts_below_one(argv, capsys, monkeypatch):
    from tokengeo.bench import registry

    monkeypatch.setattr("tokengeo.bench.measure.ensure_precise_rss", lambda: None)
    assert registry.script("laplacian_host", argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "must be at least 1" in err[0]
