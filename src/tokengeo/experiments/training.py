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
        import json

        return json.loads(self.path.read_text()) if self.path.exists() else []

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
               smoothing_examples: int = 0, curve_every: int = 0) -> dict:
    """Train ``config`` in ``run_dir`` and return its final metrics (and geometry).

    ``smoothing_examples`` > 0: also every head's smoothing sign on that many held-out
    examples of ``geometry_split`` (:func:`smoothing_rows`), under ``"smoothing"``.
    ``curve_every`` > 0: the metrics and the final-layer geometry of ``geometry_examples``
    examples of ``geometry_split`` every that many steps and at the end, under ``"curve"``
    (a learning curve: :class:`CurveRecorder`; ``final`` keeps the whole split's metrics)."""
    trainer = open_trainer(Path(run_dir), config)
    recorder = CurveRecorder(Path(run_dir), geometry, geometry_split, geometry_examples)
    summary = trainer.fit(recorder if curve_every else None, curve_every)
    out = {"final": summary["final"], "parameters": summary["parameters"],
           "wall_time_s": summary["wall_time_s"], "step": summary["step"]}
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


def smoothing_rows(model, task, split: str, n_examples: int) -> list[dict]:
    """:func:`tokengeo.probes.smoothing.head_smoothing` of ``model`` on the first
    ``n_examples`` evaluation examples of ``split`` (one batch, one forward pass), as
    JSON rows ``{layer, head, kind, variance_derivative, rayleigh}``."""
    from tokengeo.probes.smoothing import head_smoothing

    batch = task.batch(split, task.eval_indices(split, n_examples))
    rows = head_smoothing(model, batch.inputs, attention_mask=batch.attention_mask)
    return [row.to_dict() for row in rows]
