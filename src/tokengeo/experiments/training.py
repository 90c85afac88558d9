"""Cells that train a model with :mod:`tokengeo.train` and measure its token geometry.

A cell trains in its own run directory (resuming from its last checkpoint if an earlier
``reproduce`` was interrupted), then measures the final-layer token geometry of fixed
evaluation examples with :mod:`tokengeo.probes.run_geometry`.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any


def open_trainer(run_dir: Path, config: dict[str, Any]):
    """A :class:`~tokengeo.train.Trainer` of ``config`` in ``run_dir`` on the CPU, resuming
    from its last checkpoint (a run folder without one is started afresh): what every
    training cell of a suite opens."""
    from tokengeo.train import TrainConfig, Trainer, latest_checkpoint

    run_dir = Path(run_dir)
    ckpts = run_dir / "checkpoints"
    resume = run_dir.exists() and latest_checkpoint(ckpts) is not None
    if run_dir.exists() and not resume:
        shutil.rmtree(run_dir)  # a run that died before its first checkpoint
    cfg = TrainConfig(**config, out=str(run_dir), device="cpu")
    return Trainer(cfg, resume=resume, progress=False)


TRAIN_FIELDS = ("final", "parameters", "wall_time_s", "step")  # what train_cell returns


def train_cell(run_dir: str, config: dict[str, Any], geometry: str | None = None,
               geometry_split: str = "test", geometry_examples: int = 1000) -> dict:
    """Train ``config`` in ``run_dir`` and return its final metrics (and geometry)."""
    trainer = open_trainer(Path(run_dir), config)
    summary = trainer.fit()
    out = {"final": summary["final"], "parameters": summary["parameters"],
           "wall_time_s": summary["wall_time_s"], "step": summary["step"]}
    if geometry is not None:
        from tokengeo.probes.run_geometry import GEOMETRY

        out["geometry"] = GEOMETRY[geometry](trainer.model, trainer.task, geometry_split,
                                             geometry_examples)
    return out
