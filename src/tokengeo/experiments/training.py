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
               geometry_split: str = "test", geometry_examples: int = 1000,
               smoothing_examples: int = 0) -> dict:
    """Train ``config`` in ``run_dir`` and return its final metrics (and geometry).

    ``smoothing_examples`` > 0: also every head's smoothing sign on that many held-out
    examples of ``geometry_split`` (:func:`smoothing_rows`), under ``"smoothing"``."""
    trainer = open_trainer(Path(run_dir), config)
    summary = trainer.fit()
    out = {"final": summary["final"], "parameters": summary["parameters"],
           "wall_time_s": summary["wall_time_s"], "step": summary["step"]}
    if geometry is not None:
        from tokengeo.probes.run_geometry import GEOMETRY

        out["geometry"] = GEOMETRY[geometry](trainer.model, trainer.task, geometry_split,
                                             geometry_examples)
    if smoothing_examples:
        out["smoothing"] = smoothing_rows(trainer.model, trainer.task, geometry_split,
                                          smoothing_examples)
    return out


def smoothing_rows(model, task, split: str, n_examples: int) -> list[dict]:
    """:func:`tokengeo.probes.smoothing.head_smoothing` of ``model`` on the first
    ``n_examples`` evaluation examples of ``split`` (one batch, one forward pass), as
    JSON rows ``{layer, head, kind, variance_derivative, rayleigh}``."""
    from tokengeo.probes.smoothing import head_smoothing

    batch = task.batch(split, task.eval_indices(split, n_examples))
    rows = head_smoothing(model, batch.inputs, attention_mask=batch.attention_mask)
    return [row.to_dict() for row in rows]
