"""Data parallelism: 2 CPU processes (gloo) against one process with the same global batch."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.multiprocessing as mp
from safetensors.torch import load_file, save_file

from tokengeo.data import load_dataset
from tokengeo.models.registry import create_model
from tokengeo.train import checkpoint as ckpt
from tokengeo.train.config import TrainConfig
from tokengeo.train.tasks import ImageClassification
from tokengeo.train.trainer import Trainer

SRC = Path(__file__).resolve().parents[2] / "src"
CONFIG = dict(model="vit-tiny", data="digits", steps=4, batch_size=32, warmup=1,
              eval_every=2, eval_batches=2, checkpoint_every=2,
              model_overrides={"d_model": 32, "n_layers": 2, "mlp_ratio": 2.0})


pytestmark = pytest.mark.usefixtures("one_thread")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank: int, world: int, port: int, cfg: dict, weights_dir: str) -> None:
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world),
                      MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    import tokengeo.dino  # noqa: F401 (registers --task dino in the spawned process)
    from tokengeo.train.distributed import init_distributed, shutdown

    env = init_distributed("cpu")
    try:
        trainer = Trainer(TrainConfig(**cfg), env=env, progress=False)
        trainer.fit()
        weights, _ = ckpt.unique_state_dict(trainer.model)
        save_file(weights, Path(weights_dir) / f"rank{rank}.safetensors")
    finally:
        shutdown(env)


def _records(out: Path, split: str) -> list[dict]:
    lines = (out / "metrics.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["split"] == split]


def _assert_close_to_single(tmp_path: Path, ddp_out: Path, ranks: list[dict]) -> None:
    single = Trainer(TrainConfig(**CONFIG, out=str(tmp_path / "single")), progress=False)
    single.fit()
    reference, _ = ckpt.unique_state_dict(single.model)
    for name, tensor in reference.items():
        assert torch.equal(ranks[0][name], ranks[1][name]), f"ranks differ in {name}"
        torch.testing.assert_close(ranks[0][name], tensor, rtol=1e-4, atol=1e-5)
    ddp_train, single_train = _records(ddp_out, "train"), _records(tmp_path / "single", "train")
    assert [r["step"] for r in ddp_train] == [1, 2, 3, 4]  # rank 0 alone writes the log
    for a, b in zip(ddp_train, single_train, strict=True):
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-5)
    ddp_test, single_test = _records(ddp_out, "test")[0], _records(tmp_path / "single", "test")[0]
    assert ddp_test["examples"] == single_test["examples"]  # shards cover the split once
    assert ddp_test["loss"] == pytest.approx(single_test["loss"], rel=1e-4)


@pytest.mark.slow  # ~12 s of CPU: two fresh interpreters import torch
def test_two_process_ddp_matches_single_process(tmp_path):
    os.environ["PYTHONPATH"] = f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"
    cfg = {**CONFIG, "out": str(tmp_path / "ddp")}
    mp.spawn(_worker, args=(2, _free_port(), cfg, str(tmp_path)), nprocs=2, join=True)
    ranks = [load_file(tmp_path / f"rank{r}.safetensors") for r in range(2)]
    summary = json.loads((tmp_path / "ddp" / "summary.json").read_text())
    assert summary["world_size"] == 2
    _assert_close_to_single(tmp_path, tmp_path / "ddp", ranks)


@pytest.mark.slow
def test_torchrun_cli_matches_single_process(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(SRC), "OMP_NUM_THREADS": "1", "CI": "1"}
    args = ["--model", "vit-tiny", "--data", "digits", "--steps", "4", "--batch-size", "32",
            "--eval-every", "2", "--checkpoint-every", "2", "--out", str(tmp_path / "ddp"),
            "--set", "warmup=1", "--set", "eval_batches=2", "--set", "model_overrides.d_model=32",
            "--set", "model_overrides.n_layers=2", "--set", "model_overrides.mlp_ratio=2.0"]
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
           "--master_port", str(_free_port()), "-m", "tokengeo", "train", *args]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    final = ckpt.load_checkpoint(ckpt.latest_checkpoint(tmp_path / "ddp" / "checkpoints"))
    assert final.step == 4 and final.state["world_size"] == 2 and len(final.state["rng"]) == 2
    weights = final.model_tensors
    _assert_close_to_single(tmp_path, tmp_path / "ddp", [weights, weights])


def test_rank_shards_make_the_global_batch_and_its_mean_gradient():
    """What DDP relies on: the ranks' shards of a step are the single-process batch, and
    the mean of the ranks' mean-loss gradients (DDP's all-reduce) is its gradient."""
    data = load_dataset("digits")
    model = create_model("vit-tiny", image_size=8, d_model=32, n_layers=1)
    task = ImageClassification(data, model.config)
    single = task.sampler(32, seed=3)
    shards = [task.sampler(32, seed=3, rank=r, world_size=2) for r in range(2)]
    for _ in range(60):  # beyond one epoch of 1437 examples / 32
        idx = next(single)
        parts = [next(s) for s in shards]
        assert torch.equal(torch.cat(parts), idx) and len(parts[0]) == len(parts[1]) == 16

    def grads(idx):
        model.zero_grad()
        batch = task.batch("train", idx)
        task.loss(model(batch.inputs), batch).backward()
        return [p.grad.clone() for p in model.parameters()]

    full = grads(idx)
    mean = [(a + b) / 2 for a, b in zip(grads(parts[0]), grads(parts[1]), strict=True)]
    for a, b in zip(full, mean, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)


@pytest.mark.slow
def test_two_process_dino_keeps_student_teacher_and_centre_identical(tmp_path):
    # Each rank crops its own shard, so only rank agreement is exact: DDP averages the
    # student's gradients, each rank moves its teacher by the same EMA, and the centre is
    # the mean teacher output over both ranks' batches (all-reduced).
    os.environ["PYTHONPATH"] = f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"
    cfg = {**CONFIG, "task": "dino", "batch_size": 16, "out": str(tmp_path / "ddp"),
           "task_options": {"out_dim": 32, "hidden_dim": 32, "bottleneck_dim": 16,
                            "knn_bank": 200, "crops": {"local_size": 4}}}
    mp.spawn(_worker, args=(2, _free_port(), cfg, str(tmp_path)), nprocs=2, join=True)
    ranks = [load_file(tmp_path / f"rank{r}.safetensors") for r in range(2)]
    assert any(k.startswith("teacher.") for k in ranks[0]) and "center" in ranks[0]
    assert not torch.equal(ranks[0]["center"], torch.zeros_like(ranks[0]["center"]))
    for name, tensor in ranks[0].items():
        assert torch.equal(tensor, ranks[1][name]), f"ranks differ in {name}"
    summary = json.loads((tmp_path / "ddp" / "summary.json").read_text())
    assert summary["world_size"] == 2 and summary["teacher_updates"] == 4
