"""``reproduce --device`` / ``--gpu`` / ``--gpus-per-cell`` (issue 41) on the CPU: cells placed
on a device with its kind and precision in their key, GPUs shared round-robin by local
workers, Ray's GPU request per cell, device settings refused before anything is written,
the ``[gpu]`` tables checked and costed, and a ``--gpu`` cell trained at a tiny size through
the same code path with ``--device cpu``. The CUDA versions are marked ``cuda``."""

from __future__ import annotations

import multiprocessing
import os
import sys
import tomllib
import types
from pathlib import Path

import pytest
import torch

from tokengeo.cli import main
from tokengeo.errors import ConfigError
from tokengeo.experiments import placement as pl
from tokengeo.experiments import reproduce as rp
from tokengeo.experiments.cells import Cell, CellStore
from tokengeo.experiments.executors import (
    ExecutorConfig,
    _run_ray,
    ray_resources,
    run_cells,
    worker_gpu_env,
)
from tokengeo.experiments.training import NODE_GPUS, median_step_s, train_cell

GPU_SUITES = ("laplacian-images", "laplacian-language", "ltransformer")


def _train_cell(config: dict | None = None, **kwargs) -> Cell:
    config = {"model": "vit-tiny", "data": "digits", "steps": 2, **(config or {})}
    return Cell("s", "k=0-s0", train_cell, {"run_dir": "/tmp/out/runs/s/k=0-s0-ab",
                                            "config": config, **kwargs}, on_device=True)


# ---- placement: device kind and precision in the key, the config and the run folder

def test_a_cpu_cell_keeps_the_key_of_earlier_cpu_runs(tmp_path):
    cell = _train_cell()
    placed = pl.place(cell, "cpu")
    store = CellStore(tmp_path)
    assert placed == cell and store.path(placed) == store.path(cell)
    assert "@" not in store.path(placed).name


def test_a_cuda_cell_records_device_and_precision_in_key_config_and_run_folder(tmp_path):
    cell = _train_cell()
    store = CellStore(tmp_path)
    bf16 = pl.place(cell, "cuda")
    assert bf16.placement == "cuda-bf16"  # precision auto: bf16 autocast on CUDA
    assert bf16.kwargs["config"]["device"] == "cuda"
    assert bf16.kwargs["config"]["precision"] == "bf16"
    assert bf16.kwargs["run_dir"].endswith("-cuda-bf16")
    fp32 = pl.place(_train_cell({"precision": "fp32"}), "cuda")
    paths = {store.path(cell), store.path(bf16), store.path(fp32)}
    assert len(paths) == 3  # CPU, CUDA bf16 and CUDA fp32 never share a cached result
    assert store.path(bf16).name.startswith("k=0-s0@cuda-bf16-")
    assert fp32.placement == "cuda-fp32" and cell.kwargs["config"].get("device") is None


def test_a_gpu_table_on_the_cpu_trains_fp32_uncompiled():
    cell = _train_cell({"precision": "bf16", "compile": True})
    placed = pl.place(cell, "cpu")
    assert placed.placement == ""
    assert placed.kwargs["config"]["precision"] == "fp32"
    assert placed.kwargs["config"]["compile"] is False
    assert placed.kwargs["run_dir"] == cell.kwargs["run_dir"]


def test_device_cpu_overrides_a_table_that_names_cuda():
    placed = pl.place(_train_cell({"device": "cuda"}), "cpu")
    assert placed.kwargs["config"]["device"] == "cpu" and placed.placement == ""


def test_a_ddp_cell_has_its_own_run_folder_and_key():
    on_gpu = pl.place(_train_cell(processes=2), "cuda")
    on_cpu = pl.place(_train_cell(processes=2), "cpu")
    assert on_gpu.placement == "cuda-bf16-x2" and on_cpu.placement == "cpu-x2"
    assert on_cpu.kwargs["run_dir"].endswith("-cpu-x2")  # world sizes never share checkpoints


def test_cells_that_cannot_use_a_gpu_stay_as_they_are():
    plain = Cell("flows", "a", dict, {"config": {"n": 1}})  # on_device False
    random = Cell("dino", "r", dict, {"config": {"seed": 0}}, on_device=False)
    assert pl.place(plain, "cuda") == plain and pl.place(random, "cuda") == random
    eff = Cell("lt", "efficiency", dict, {"config": {"widths": [8]}}, on_device=True)
    placed = pl.place(eff, "cuda")
    assert placed.placement == "cuda" and placed.kwargs["config"]["device"] == "cuda"
    assert "precision" not in placed.kwargs["config"]  # it measures in fp32


def test_builtin_training_cells_can_use_a_gpu_and_others_cannot():
    cfg = rp.ReproduceConfig(out=Path("/tmp/unused"), mode="quick")
    images = rp.plan_suite("laplacian-images", cfg, kind="cuda")
    flows = rp.plan_suite("flows", cfg, kind="cuda")
    assert images.cells and all(c.placement == "cuda-bf16" for c in images.cells)
    assert flows.cells and not any(c.placement for c in flows.cells)


def test_where_ran_names_devices_and_gpus():
    cells = [pl.place(_train_cell(), "cuda"), Cell("s", "x", dict, {})]
    line = pl.where_ran(cells, [{"device_name": "NVIDIA H100"}, {}])
    assert line == "Where the cells ran: 1 on the CPU; 1 on CUDA in bf16 (NVIDIA H100)."
    ddp = pl.place(_train_cell(processes=2), "cpu")
    assert "DDP over 2 processes each" in pl.where_ran([ddp], [None])


# ---- local workers share the GPUs round-robin

def test_worker_gpu_env_is_round_robin():
    envs = [worker_gpu_env(i, ("0", "1")) for i in range(5)]
    assert [e["CUDA_VISIBLE_DEVICES"] for e in envs] == ["0", "1", "0", "1", "0"]
    assert {e[NODE_GPUS] for e in envs} == {"0,1"}


def _report_env(barrier) -> dict:
    barrier.wait()  # both workers hold a cell at once: each worker runs one
    return {"gpu": os.environ.get("CUDA_VISIBLE_DEVICES"), "node": os.environ.get(NODE_GPUS),
            "pid": os.getpid()}


def test_two_fake_gpus_give_each_worker_its_own():
    ctx = multiprocessing.get_context("spawn")
    with ctx.Manager() as manager:
        barrier = manager.Barrier(2, timeout=120)
        cells = [Cell("s", f"c{i}", _report_env, {"barrier": barrier}) for i in range(2)]
        out = [o.value for _, o in run_cells(cells, ExecutorConfig("process", jobs=2,
                                                                   gpus=("0", "1")))]
    assert sorted(v["gpu"] for v in out) == ["0", "1"]
    assert len({v["pid"] for v in out}) == 2
    assert {v["node"] for v in out} == {"0,1"}  # a DDP cell's torchrun gets the node's GPUs


# ---- Ray: each cell asks for its GPU share (a fake Ray module; no cluster is started)

def test_ray_resources_per_cell():
    cpu = Cell("s", "a", dict, {}, threads=2)
    gpu = pl.place(_train_cell(), "cuda")
    ddp = pl.place(_train_cell(processes=4), "cuda")
    on_cpu = pl.place(_train_cell(), "cpu")
    assert ray_resources(cpu, 0.5) == {"num_cpus": 2}  # not on CUDA: no GPU asked
    assert ray_resources(on_cpu, 0.5) == {"num_cpus": 1}  # a CPU run (--device cpu)
    assert ray_resources(gpu) == {"num_cpus": 1, "num_gpus": 1.0}  # the default
    assert ray_resources(gpu, 0.25) == {"num_cpus": 1, "num_gpus": 0.25}
    assert ray_resources(ddp, 0.25) == {"num_cpus": 4, "num_gpus": 4}
    packed = pl.place_all([_train_cell()], "cuda", share=0.5)[0]  # the suite's gpus_per_cell
    assert ray_resources(packed) == {"num_cpus": 1, "num_gpus": 0.5}
    assert ray_resources(packed, 0.25)["num_gpus"] == 0.25  # --gpus-per-cell overrides it


def _fake_ray(gpus_per_node: list[float], requests: list[dict]):
    ray = types.ModuleType("ray")

    class Remote:
        def options(self, **kw):
            requests.append(kw)
            return self

        def remote(self, cell):
            return Ref(cell)

    ray.is_initialized = lambda: True
    ray.remote = lambda fn: Remote()
    ray.nodes = lambda: [{"Alive": True, "Resources": {"GPU": g}} for g in gpus_per_node]
    ray.wait = lambda pending, num_returns: (pending[:1], pending[1:])
    ray.get = lambda ref: pl_outcome(ref.cell)
    ray.cancel = lambda ref, force: None
    return ray


class Ref:  # a Ray object reference: hashable, holding its cell
    def __init__(self, cell):
        self.cell = cell


def pl_outcome(cell):
    from tokengeo.experiments.executors import CellOutcome

    return CellOutcome({"key": cell.key})


def test_ray_asks_each_cell_for_its_gpu_share(monkeypatch):
    requests: list[dict] = []
    monkeypatch.setitem(sys.modules, "ray", _fake_ray([2.0], requests))
    cells = [pl.place(_train_cell(), "cuda"), pl.place(_train_cell(processes=2), "cuda")]
    cfg = ExecutorConfig("ray", jobs=2, gpu_share=0.5)
    done = [c.key for c, _ in _run_ray(cells, cfg)]
    assert len(done) == 2
    assert requests == [{"num_cpus": 1, "num_gpus": 0.5}, {"num_cpus": 2, "num_gpus": 2}]


def test_ray_refuses_cells_no_node_can_hold_before_submitting(monkeypatch):
    requests: list[dict] = []
    monkeypatch.setitem(sys.modules, "ray", _fake_ray([1.0, 1.0], requests))
    cells = [pl.place(_train_cell(processes=2), "cuda")]
    with pytest.raises(ConfigError, match="largest node of the Ray cluster has 1"):
        list(_run_ray(cells, ExecutorConfig("ray", gpu_share=1.0)))
    assert requests == []


# ---- bad device settings: one line, exit 2, before --out is touched

@pytest.mark.parametrize("argv, words", [
    (["--device", "tpu"], "invalid choice: 'tpu'"),
    (["--gpus-per-cell", "0.3"], "1/n"),
    (["--gpus-per-cell", "0"], "1/n"),
    (["--gpus-per-cell", "2"], "1/n"),
    (["--gpus-per-cell", "nan"], "1/n"),
    (["--gpus-per-cell", "0.5"], "needs --executor ray"),
    (["--gpus-per-cell", "0.5", "--executor", "ray", "--device", "cpu"], "needs cells on CUDA"),
])
def test_bad_device_settings_exit_2_in_one_line(tmp_path, capsys, argv, words):
    out = tmp_path / "out"
    try:
        code = main(["reproduce", "--only", "ltransformer", "--out", str(out), *argv])
    except SystemExit as exc:  # argparse's own refusal (an unknown choice)
        code = exc.code
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and words in err[0]
    assert not out.exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA device")
def test_cuda_without_a_gpu_exits_2_before_out_is_touched(tmp_path, capsys):
    out = tmp_path / "out"
    code = main(["reproduce", "--gpu", "--device", "cuda", "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "--device cuda, but torch sees no CUDA device" in err[0]
    assert not out.exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA device")
def test_gpu_mode_never_falls_back_to_the_cpu_unasked(tmp_path, capsys):
    out = tmp_path / "out"
    code = main(["reproduce", "--gpu", "--out", str(out)])  # --device auto, no GPU
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "--device cpu to train the [gpu] tables" in err[0]
    assert not out.exists()


def _tiny_conf(tmp_path: Path, gpus: int = 1, extra: str = "") -> Path:
    """The built-in laplacian-images [gpu] table with its sizes shrunk (model, steps, data)
    and everything else (task options, precision, ks, the code path) as it is."""
    builtin = rp.load_settings(rp.BUILTIN_CONFIG_DIR, "laplacian-images", "gpu")
    t = builtin["train"]
    opts = ", ".join(f"{k} = {str(v).lower()}" for k, v in t["task_options"].items())
    conf = tmp_path / "conf"
    conf.mkdir(parents=True)
    (conf / "laplacian-images.toml").write_text(
        "[gpu]\n"
        f"seeds = [0, 1]\nks = {builtin['ks']}\ngeometry_examples = 32\ncell_cost = 1\n"
        f"gpus = {gpus}\n{extra}"
        f'train = {{ model = "{t["model"]}", data = "digits", task = "{t["task"]}", '
        f'task_options = {{ {opts} }}, steps = 3, batch_size = 16, warmup = 1, '
        f'eval_every = 0, final_eval_batches = 2, precision = "{t["precision"]}", '
        f'model_overrides = {{ patch_size = 4, d_model = 12, n_layers = 1, '
        f'n_heads = {t["model_overrides"]["n_heads"]} }} }}\n')
    return conf


def test_more_gpus_per_cell_than_the_node_has_is_refused_before_out(tmp_path, monkeypatch):
    monkeypatch.setattr(pl, "visible_gpus", lambda: ["0", "1"])  # a fake two-GPU node
    monkeypatch.setattr(rp, "visible_gpus", lambda: ["0", "1"])
    cfg = rp.ReproduceConfig(out=tmp_path / "out", mode="gpu", only=("laplacian-images",),
                             config_dir=_tiny_conf(tmp_path, gpus=4),
                             devices=pl.DeviceConfig("cuda"))
    with pytest.raises(ConfigError, match="asks gpus = 4 per cell but this node has 2"):
        rp.reproduce(cfg, log=lambda m: None, executor=ExecutorConfig("process", jobs=2))
    assert not (tmp_path / "out").exists()


def test_a_suite_gpus_per_cell_is_checked_and_set_on_its_cuda_cells(tmp_path):
    cfg = rp.ReproduceConfig(out=tmp_path / "out", mode="gpu",
                             config_dir=_tiny_conf(tmp_path, extra="gpus_per_cell = 0.25\n"))
    plan = rp.plan_suite("laplacian-images", cfg, kind="cuda")
    assert {c.gpu_share for c in plan.cells} == {0.25}
    assert {c.gpu_share for c in rp.plan_suite("laplacian-images", cfg).cells} == {None}
    bad_conf = _tiny_conf(tmp_path / "b", extra="gpus_per_cell = 0.3\n")
    bad = rp.ReproduceConfig(out=tmp_path / "out", mode="gpu", config_dir=bad_conf)
    with pytest.raises(ConfigError, match=r"laplacian-images.toml: gpus_per_cell = 0.3 must be"):
        rp.plan_suite("laplacian-images", bad, kind="cuda")


def test_a_fake_two_gpu_node_gives_the_executor_its_gpus(monkeypatch):
    monkeypatch.setattr(rp, "visible_gpus", lambda: ["3", "5"])
    kind, ex = rp.place_executor(pl.DeviceConfig("auto"), ExecutorConfig("process", jobs=4))
    assert kind == "cuda" and ex.gpus == ("3", "5") and ex.gpu_share is None
    kind, ex = rp.place_executor(pl.DeviceConfig("cpu"), ExecutorConfig("process", jobs=4))
    assert kind == "cpu" and ex.gpus == () and ex.gpu_share is None


# ---- the [gpu] tables: checked, sized as issue 41 asks, costed by the dry run

def test_gpu_tables_pass_every_check_with_the_issue_sizes():
    cfg = rp.ReproduceConfig(out=Path("/tmp/unused"), mode="gpu")
    plans = {p.name: p for p in rp.plan_all(cfg, kind="cuda")}
    img = plans["laplacian-images"].settings
    t = img["train"]
    assert (t["data"], t["model_overrides"]) == ("fashion-mnist", {
        "patch_size": 4, "d_model": 192, "n_layers": 6, "n_heads": 6})
    assert t["task_options"]["hflip"] and t["task_options"]["crop_padding"] > 0
    assert img["ks"] == [0, 3, 6] and len(img["seeds"]) == 4
    lang = plans["laplacian-language"].settings
    over = lang["train"]["model_overrides"]
    assert (over["d_model"], over["n_layers"], over["n_heads"], over["block_size"]) == \
        (256, 6, 8, 256)
    assert lang["train"]["data"] == "austen-bpe"
    assert lang["ks"] == [0, 4, 8] and len(lang["seeds"]) == 3
    lt = plans["ltransformer"].settings
    from tokengeo.experiments.suites.ltransformer import l_config

    assert [l_config(lt).d_model, *lt["widths"]] == [128, 256, 512, 768]
    assert lt["main_alpha"] == "linear" and lt["alphas"] == ["linear"]
    assert lt["long_train"]["data"] == "spam-assassin"
    for name in GPU_SUITES:
        cells = plans[name].cells
        assert cells and all(c.placement.startswith("cuda") for c in cells)
    others = [p for n, p in plans.items() if n not in GPU_SUITES]
    assert others and all(p.ctx.skipped and not p.cells for p in others)


def test_a_skip_only_table_takes_the_full_settings(tmp_path):
    (tmp_path / "s.toml").write_text('[common]\na = 1\n[full]\nb = 2\n[gpu]\nskip = "why"\n'
                                     '[quick]\nskip = "q"\nb = 3\n')
    assert rp.load_settings(tmp_path, "s", "gpu") == {"a": 1, "b": 2, "skip": "why"}
    assert rp.load_settings(tmp_path, "s", "quick") == {"a": 1, "b": 3, "skip": "q"}


def test_gpu_dry_run_prints_estimated_gpu_minutes(tmp_path, capsys):
    code = main(["reproduce", "--gpu", "--dry-run", "--out", str(tmp_path / "out")])
    out = capsys.readouterr().out
    assert code == 0 and "GPU-min (all)" in out and "ESTIMATES" in out
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line.strip()}
    assert rows["laplacian-images"][1] == "12" and rows["laplacian-language"][1] == "9"
    hints = sum(tomllib.loads((rp.BUILTIN_CONFIG_DIR / f"{n}.toml").read_text())["gpu"]
                ["cell_cost"] * int(rows[n][1]) for n in ("laplacian-images",
                                                          "laplacian-language"))
    assert float(rows["laplacian-images"][3]) + float(rows["laplacian-language"][3]) == \
        pytest.approx(hints / 60, abs=0.01)
    assert not (tmp_path / "out").exists()


# ---- a --gpu cell at a tiny size, through the same code path, on the CPU

def test_a_tiny_gpu_table_runs_on_the_cpu(tmp_path):
    cfg = rp.ReproduceConfig(out=tmp_path / "out", mode="gpu", only=("laplacian-images",),
                             config_dir=_tiny_conf(tmp_path), devices=pl.DeviceConfig("cpu"))
    path, outputs = rp.reproduce(cfg, log=lambda m: None, executor=ExecutorConfig("serial"))
    md = path.with_suffix(".md").read_text()
    assert "Where the cells ran: 6 on the CPU." in md and "GPU scale" in md
    cached = sorted((tmp_path / "out" / "cells" / "laplacian-images").glob("*.json"))
    assert len(cached) == 6 and not any("@" in p.name for p in cached)
    runs = sorted((tmp_path / "out" / "runs" / "laplacian-images").iterdir())
    import json

    saved = json.loads((runs[0] / "config.json").read_text())
    assert saved["precision"] == "fp32" and saved["compile"] is False  # bf16 asks CUDA
    assert saved["task_options"] == {"crop_padding": 2, "hflip": True}
    value = json.loads(cached[0].read_text())["value"]
    assert value["device"] == "cpu" and value["step_s"] > 0
    assert "peak_memory_bytes" not in value  # measured on CUDA only
    heads = {r["head"] for r in value["smoothing"]}  # the smoothing sign (issue 42), every head
    assert heads == set(range(6)) and {r["layer"] for r in value["smoothing"]} == {0}
    claims = {c.text: c for c in outputs[0].claims}
    signs = [c for t, c in claims.items() if "Laplacian heads smooth the residual" in t]
    assert len(signs) == 1 and signs[0].text.startswith("k=6:")  # k = H of the [gpu] table
    member = signs[0].members[0]
    assert member.measured is not None and member.not_run is None
    assert any(t.startswith("control, k=0: attention heads smooth") for t in claims)


def test_ddp_cells_measure_no_smoothing_sign_and_refuse_asking_for_one(tmp_path):
    cfg = rp.ReproduceConfig(out=tmp_path / "out", mode="gpu",
                             config_dir=_tiny_conf(tmp_path, gpus=2))
    cells = rp.plan_suite("laplacian-images", cfg, kind="cpu").cells
    assert cells and all(c.kwargs["processes"] == 2 for c in cells)
    assert not any("smoothing_examples" in c.kwargs for c in cells)  # torchrun would refuse
    for extra in ("smoothing_examples = 8\n", "curve_every = 2\n"):
        conf = _tiny_conf(tmp_path / extra[:5], gpus=2, extra=extra)
        bad = rp.ReproduceConfig(out=tmp_path / "out", mode="gpu", config_dir=conf)
        with pytest.raises(ConfigError, match=rf"{extra.split()[0]} needs gpus = 1"):
            rp.plan_suite("laplacian-images", bad, kind="cpu")
    assert not (tmp_path / "out").exists()


def test_median_step_s_ignores_pauses_and_eval_records():
    records = [{"step": 1, "split": "train", "wall_s": 5.0},  # first step: compilation
               {"step": 2, "split": "train", "wall_s": 5.1},
               {"step": 2, "split": "val", "wall_s": 7.0},
               {"step": 3, "split": "train", "wall_s": 5.2},
               {"step": 5, "split": "train", "wall_s": 5.4},
               {"step": 6, "split": "train", "wall_s": 9.4}]  # an evaluation pause
    assert median_step_s(records) == pytest.approx(0.1)
    assert median_step_s([]) is None


@pytest.mark.slow
def test_a_ddp_cell_trains_under_torchrun_on_two_cpu_processes(tmp_path):
    """``gpus = 2`` on the CPU: torchrun with two gloo processes, then read back."""
    config = {"model": "vit-tiny", "data": "digits", "steps": 4, "batch_size": 16,
              "warmup": 1, "eval_every": 0, "final_eval_batches": 2,
              "model_overrides": {"patch_size": 4, "d_model": 16}}
    run = tmp_path / "run"
    out = train_cell(str(run), config, geometry="classification", geometry_examples=16,
                     processes=2)
    assert out["device"] == "cpu x2 (DDP)" and out["step"] == 4
    assert "within_sequence_share" in out["geometry"]
    import json

    assert json.loads((run / "summary.json").read_text())["world_size"] == 2


# ---- on a CUDA device (make gpu-check)

@pytest.mark.cuda
def test_a_tiny_gpu_cell_trains_on_cuda_in_bf16(tmp_path):
    from tokengeo.experiments.executors import execute_cell

    config = {"model": "vit-tiny", "data": "digits", "task": "image-classification",
              "task_options": {"crop_padding": 2, "hflip": True}, "steps": 4,
              "batch_size": 16, "warmup": 1, "eval_every": 0, "final_eval_batches": 2,
              "precision": "bf16", "model_overrides": {"patch_size": 4, "d_model": 12,
                                                       "n_heads": 6}}
    cell = pl.place(Cell("s", "k=0-s0", train_cell,
                         {"run_dir": str(tmp_path / "run"), "config": config,
                          "geometry": "classification", "geometry_examples": 16},
                         on_device=True), "cuda")
    value = execute_cell(cell).value
    assert value["device"].startswith("cuda") and value["device_name"]
    assert value["peak_memory_bytes"] > 0 and value["step_s"] > 0
    import json

    saved = json.loads((Path(cell.kwargs["run_dir"]) / "config.json").read_text())
    assert saved["device"] == "cuda" and saved["precision"] == "bf16"


@pytest.mark.cuda
def test_the_tiny_gpu_table_runs_on_cuda(tmp_path):
    cfg = rp.ReproduceConfig(out=tmp_path / "out", mode="gpu", only=("laplacian-images",),
                             config_dir=_tiny_conf(tmp_path), devices=pl.DeviceConfig("cuda"))
    path, _ = rp.reproduce(cfg, log=lambda m: None,
                           executor=ExecutorConfig("process", jobs=2))
    md = path.with_suffix(".md").read_text()
    assert "Where the cells ran: 6 on CUDA in bf16" in md
    cached = list((tmp_path / "out" / "cells" / "laplacian-images").glob("*@cuda-bf16-*"))
    assert len(cached) == 6
    import json

    value = json.loads(cached[0].read_text())["value"]  # geometry and smoothing on CUDA
    assert value["geometry"]["layers"] and len(value["smoothing"]) == 6


@pytest.mark.cuda
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA devices")
def test_a_ddp_cell_trains_under_torchrun_on_two_gpus(tmp_path):
    config = {"model": "vit-tiny", "data": "digits", "steps": 4, "batch_size": 16,
              "warmup": 1, "eval_every": 0, "final_eval_batches": 2, "device": "cuda",
              "precision": "bf16", "model_overrides": {"patch_size": 4, "d_model": 16}}
    out = train_cell(str(tmp_path / "run"), config, geometry="classification",
                     geometry_examples=16, processes=2)
    assert out["device"] == "cuda x2 (DDP)" and out["step"] == 4
