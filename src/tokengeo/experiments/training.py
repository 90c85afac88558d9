"""Cells that train a model with :mod:`tokengeo.train` and measure its token geometry.

A cell trains in its own run directory (resuming from its last checkpoint if an earlier
``reproduce`` was interrupted), then measures the final-layer token geometry of fixed
evaluation examples with :mod:`tokengeo.probes.run_geometry`. Every training cell takes a
``run_dir`` and a ``config`` (TrainConfig fields); the config's ``device`` (set by
:mod:`tokengeo.experiments.placement`, default the CPU) says where it trains. With
``processes`` > 1 the training runs under ``torchrun`` (``tokengeo train``'s DDP support),
one process per GPU of this node (gloo processes on the CPU), and the cell then reads the
finished run back.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any


def open_trainer(run_dir: Path, config: dict[str, Any]):
    """A :class:`~tokengeo.train.Trainer` of ``config`` in ``run_dir`` on the config's device
    (default the CPU), resuming from its last checkpoint (a run folder without one is
    started afresh): what every training cell of a suite opens."""
    from tokengeo.outmarker import write_marker
    from tokengeo.train import TrainConfig, Trainer, latest_checkpoint

    run_dir = Path(run_dir)
    ckpts = run_dir / "checkpoints"
    resume = run_dir.exists() and latest_checkpoint(ckpts) is not None
    if run_dir.exists() and not resume:
        shutil.rmtree(run_dir)  # a run that died before its first checkpoint
    run_dir.mkdir(parents=True, exist_ok=True)
    write_marker(run_dir, "train")  # what makes its files reproduce's (tokengeo.outmarker)
    cfg = TrainConfig(**{"device": "cpu", **config, "out": str(run_dir)})
    return Trainer(cfg, resume=resume, progress=False)


TRAIN_FIELDS = ("final", "parameters", "wall_time_s", "step")  # what train_cell returns


class CurveRecorder:
    """A trainer callback (:meth:`tokengeo.train.Trainer.fit`) recording, at its steps, the
    task's metrics and the final-layer token geometry (per-block numbers left out) of the
    same ``examples`` examples of ``split``, as ``{"step", "metrics", "geometry"}`` points.
    The points are kept in ``run_dir/curve.json`` as they come, so a run resumed from a
    checkpoint keeps the points before it."""

    def __init__(self, run_dir: Path, geometry: str | None, split: str, examples: int):
        self.path = run_dir / "curve.json"
        self.geometry, self.split, self.examples = geometry, split, examples

    def points(self) -> list[dict]:
        from tokengeo.io import read_json

        return read_json(self.path, list, allow_nan=True) if self.path.exists() else []

    def _write(self, point: dict) -> list[dict]:
        from tokengeo.io import write_json

        points = [p for p in self.points() if p["step"] < point["step"]] + [point]
        write_json(self.path, points)
        return points

    def _geometry(self, model, task) -> dict | None:
        if self.geometry is None:
            return None
        from tokengeo.probes.run_geometry import GEOMETRY

        geo = GEOMETRY[self.geometry](model, task, self.split, self.examples)
        return {k: v for k, v in geo.items() if k != "layers"}

    def __call__(self, trainer) -> None:
        metrics = trainer.evaluate(self.split, self.examples)
        self._write({"step": trainer.step, "metrics": metrics,
                     "geometry": self._geometry(trainer.model, trainer.task)})

    def finish(self, trainer, geometry: dict | None) -> list[dict]:
        """The last point (the trained model's metrics; ``geometry``: its final geometry,
        already measured on the same examples); returns every point."""
        final = None if geometry is None else {k: v for k, v in geometry.items()
                                               if k != "layers"}
        metrics = trainer.evaluate(self.split, self.examples)
        return self._write({"step": trainer.step, "metrics": metrics, "geometry": final})


def train_cell(run_dir: str, config: dict[str, Any], geometry: str | None = None,
               geometry_split: str = "test", geometry_examples: int = 1000,
               smoothing_examples: int = 0, curve_every: int = 0,
               processes: int = 1) -> dict:
    """Train ``config`` in ``run_dir`` and return its final metrics (and geometry), the
    device it trained on, its median step time and (on CUDA, in this process) its peak
    CUDA memory.

    ``smoothing_examples`` > 0: also every head's smoothing sign on that many held-out
    examples of ``geometry_split`` (:func:`smoothing_rows`), under ``"smoothing"``.
    ``curve_every`` > 0: the metrics and the final-layer geometry of ``geometry_examples``
    examples of ``geometry_split`` every that many steps and at the end, under ``"curve"``
    (a learning curve: :class:`CurveRecorder`; ``final`` keeps the whole split's metrics).
    ``processes`` > 1: trained under torchrun (no learning curve or smoothing there)."""
    if processes > 1:
        if smoothing_examples or curve_every:
            raise ValueError(f"{run_dir}: a cell on {processes} processes (torchrun) records "
                             "no learning curve or smoothing signs; set gpus = 1 for "
                             "curve_every / smoothing_examples")
        return _distributed_cell(Path(run_dir), config, geometry, geometry_split,
                                 geometry_examples, processes)
    trainer = open_trainer(Path(run_dir), config)
    device = trainer.env.device
    if device.type == "cuda":
        import torch

        torch.cuda.reset_peak_memory_stats(device)
    recorder = CurveRecorder(Path(run_dir), geometry, geometry_split, geometry_examples)
    summary = trainer.fit(recorder if curve_every else None, curve_every)
    out = {"final": summary["final"], "parameters": summary["parameters"],
           "wall_time_s": summary["wall_time_s"], "step": summary["step"],
           **device_record(device), "step_s": median_step_s(trainer.run.read_metrics())}
    alpha = learned_alpha(trainer.model, trainer.optimizer, trainer.cfg.lr)
    if alpha is not None:
        out["learned_alpha"] = alpha
    if geometry is not None:
        from tokengeo.probes.run_geometry import GEOMETRY

        out["geometry"] = GEOMETRY[geometry](trainer.model, trainer.task, geometry_split,
                                             geometry_examples)
    if curve_every:
        out["curve"] = recorder.finish(trainer, out.get("geometry"))
    if smoothing_examples:
        out["smoothing"] = smoothing_rows(trainer.model, trainer.task, geometry_split,
                                          smoothing_examples)
    return out


def learned_alpha(model, optimizer, peak_lr: float) -> dict[str, Any] | None:
    """The trained slice-position scales of an L-Transformer with ``alpha = "learnable"``
    (El Ichi et al., arXiv 2603.05727, slice-aware positional encoding: α_k = exp(β_k), β
    learnt from 0), and the proof that they were trained: the index of the optimizer's
    parameter group holding β, its weight decay and the schedule's peak learning rate
    ``peak_lr``. None for a model without a learnable α. A learnable α in no group, or in
    one at a zero rate, raises: it would be a constant calling itself learnable."""
    pos = getattr(model, "pos_enc", None)
    beta = getattr(pos, "log_alpha", None)
    if beta is None:
        return None
    groups = [i for i, g in enumerate(optimizer.param_groups)
              if any(p is beta for p in g["params"])]
    if not groups or not beta.requires_grad or not peak_lr > 0:
        raise RuntimeError(f"the learnable α is not trained: optimizer groups {groups}, "
                           f"requires_grad={beta.requires_grad}, peak lr {peak_lr}")
    group = optimizer.param_groups[groups[0]]
    return {"alpha": [float(a) for a in beta.detach().exp().cpu()], "group": groups[0],
            "lr": float(peak_lr), "weight_decay": float(group["weight_decay"])}


def smoothing_rows(model, task, split: str, n_examples: int) -> list[dict]:
    """:func:`tokengeo.probes.smoothing.head_smoothing` of ``model`` on the first
    ``n_examples`` evaluation examples of ``split`` (one batch, one forward pass), as
    JSON rows ``{layer, head, kind, variance_derivative, rayleigh}``."""
    from tokengeo.probes.smoothing import head_smoothing

    device = next(model.parameters()).device  # a model trained on CUDA stays there
    batch = task.batch(split, task.eval_indices(split, n_examples)).to(device)
    rows = head_smoothing(model, batch.inputs, attention_mask=batch.attention_mask)
    return [row.to_dict() for row in rows]


def device_record(device) -> dict[str, Any]:
    """Where a cell trained: the device, and on CUDA its name and peak allocated memory."""
    out: dict[str, Any] = {"device": str(device)}
    if device.type == "cuda":
        import torch

        out["device_name"] = torch.cuda.get_device_name(device)
        out["peak_memory_bytes"] = int(torch.cuda.max_memory_allocated(device))
    return out


def median_step_s(records: list[dict]) -> float | None:
    """The median wall seconds of one training step, from a run's ``metrics.jsonl`` records
    (differences of ``wall_s`` between consecutive train records, per step; the median
    ignores the first step's compilation and evaluation pauses)."""
    train = [(r["step"], r["wall_s"]) for r in records
             if r.get("split") == "train" and isinstance(r.get("wall_s"), int | float)]
    per_step = [(w1 - w0) / (s1 - s0)
                for (s0, w0), (s1, w1) in zip(train, train[1:], strict=False)
                if s1 > s0 and w1 >= w0]
    return round(statistics.median(per_step), 6) if per_step else None


def torchrun_command(config_file: Path, run_dir: Path, processes: int,
                     resume: bool) -> list[str]:
    """``torchrun --standalone --nproc_per_node N -m tokengeo train CONFIG --out RUN``."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
           f"--nproc_per_node={processes}", "-m", "tokengeo", "train", str(config_file),
           "--out", str(run_dir), "--quiet"]
    return cmd + (["--resume"] if resume else [])


def _distributed_cell(run_dir: Path, config: dict[str, Any], geometry: str | None,
                      geometry_split: str, geometry_examples: int, processes: int) -> dict:
    """Train under torchrun on ``processes`` GPUs (all of this node's visible ones are
    offered to it), then measure the finished run in this process."""
    from tokengeo.train import latest_checkpoint
    from tokengeo.train.loading import load_run
    from tokengeo.train.rundir import RunDir
    from tokengeo.train.trainer import build_optimizer

    resume = run_dir.exists() and latest_checkpoint(run_dir / "checkpoints") is not None
    if run_dir.exists() and not resume:
        shutil.rmtree(run_dir)
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    config = {"device": "cpu", **config}
    with tempfile.TemporaryDirectory(prefix="tokengeo-ddp-") as tmp:
        config_file = Path(tmp) / "config.json"
        config_file.write_text(json.dumps({k: v for k, v in config.items() if k != "out"}))
        env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
        env.update(_node_gpus_env())
        from tokengeo.lifetime import die_with_parent

        done = subprocess.run(torchrun_command(config_file, run_dir, processes, resume),
                              env=env, capture_output=True, text=True,
                              preexec_fn=die_with_parent)  # dies with the worker
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-5:]
        raise RuntimeError(f"torchrun training of {run_dir} on {processes} processes failed "
                           f"(exit {done.returncode}): {' | '.join(tail)}")
    run = RunDir(run_dir)
    from tokengeo.io import read_json

    summary = read_json(run.summary, dict, allow_nan=True)
    out = {"final": summary["final"], "parameters": summary["parameters"],
           "wall_time_s": summary["wall_time_s"], "step": summary["step"],
           "device": f"{config['device']} x{processes} (DDP)",
           "step_s": median_step_s(run.read_metrics())}
    if geometry is None and config.get("model_overrides", {}).get("alpha") != "learnable":
        return out
    loaded = load_run(run_dir, device="cuda" if config["device"] == "cuda" else "cpu")
    alpha = learned_alpha(loaded.model, build_optimizer(loaded.model, loaded.config),
                          loaded.config.lr)
    if alpha is not None:
        out["learned_alpha"] = alpha
    if geometry is not None:
        from tokengeo.probes.run_geometry import GEOMETRY

        out["geometry"] = GEOMETRY[geometry](loaded.model, loaded.task, geometry_split,
                                             geometry_examples)
    return out


NODE_GPUS = "TOKENGEO_NODE_GPUS"  # the node's GPUs, set by a worker that narrowed its own


def _node_gpus_env() -> dict[str, str]:
    """``CUDA_VISIBLE_DEVICES`` for a torchrun child: the node's GPUs a local worker was
    narrowed from (:mod:`tokengeo.experiments.executors`), else the worker's own (Ray's
    grant of N GPUs), else none set (every GPU)."""
    node = os.environ.get(NODE_GPUS)
    if node is not None:
        return {"CUDA_VISIBLE_DEVICES": node}
    own = os.environ.get("CUDA_VISIBLE_DEVICES")
    return {} if own is None else {"CUDA_VISIBLE_DEVICES": own}
