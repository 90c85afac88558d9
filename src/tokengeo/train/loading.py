"""Load a finished (or interrupted) run's model for analysis, without touching the run.

``load_model(run_dir)`` needs nothing but the run folder: the checkpoint's sidecar holds
the resolved model config, so no data set (nor any optional data package) is read.
``load_run(run_dir)`` also rebuilds the task on the run's data, for metrics that need it
(``tokengeo probe``).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from torch import nn

from tokengeo.errors import CheckpointError, ConfigError
from tokengeo.models.names import register_run_loader
from tokengeo.models.registry import build_model, model_from_config
from tokengeo.train import checkpoint as ckpt
from tokengeo.train.config import TrainConfig, config_from_dict, read_config_json
from tokengeo.train.tasks import Task, build_task, task_class
from tokengeo.train.trainer import load_data


@dataclass
class LoadedRun:
    config: TrainConfig
    model: nn.Module
    task: Task
    step: int


def _run_config(root: Path) -> TrainConfig:
    if not (root / "config.json").is_file():
        raise ConfigError(f"{str(root)!r} is not a tokengeo run directory (no config.json); "
                          "pass the --out folder of a `tokengeo train` run")
    return config_from_dict(read_config_json(root / "config.json"))


def _latest(root: Path) -> ckpt.Checkpoint:
    latest = ckpt.latest_checkpoint(root / "checkpoints")
    if latest is None:
        raise ConfigError(f"run {str(root)!r} has no checkpoint yet; train it first")
    return ckpt.load_checkpoint(latest)


def _saved_model(checkpoint: ckpt.Checkpoint) -> dict:
    saved = checkpoint.state.get("model")
    if not isinstance(saved, dict) or "config" not in saved:
        raise CheckpointError(f"checkpoint {checkpoint.path} records no model config; it is "
                              "not a training checkpoint of this version")
    return saved


def _model_from_checkpoint(cfg: TrainConfig, checkpoint: ckpt.Checkpoint, device: str,
                           model_config: Any = None) -> nn.Module:
    """The model of the sidecar's resolved config (or of ``model_config``, already built
    and equal to it), wrapped as it was trained, with the checkpoint's weights."""
    saved = _saved_model(checkpoint)
    name = saved.get("name", cfg.model)
    if model_config is None:
        model = model_from_config(name, saved["config"], device=device)
    else:
        model = build_model(name, model_config, device=device)
    if cfg.task != "auto":  # the supervised tasks ("auto") train the bare model
        model = task_class(cfg.task).wrap(model, cfg.task_options, cfg.steps)
    ckpt.restore_model(model, checkpoint)
    return model.eval()


def load_model(run_dir: str | Path, *, device: str = "cpu") -> nn.Module:
    """The trained model of ``run_dir`` (latest checkpoint), in eval mode.

    Built from ``config.json`` and the checkpoint alone: no data set is loaded. A DINO
    run gives the :class:`~tokengeo.dino.model.DINO` module (its ``.teacher`` is the
    backbone). Reads only: unlike ``--resume`` it never truncates metrics or writes.

    >>> model = tokengeo.load_model("runs/vit-l3")
    """
    root = Path(run_dir).expanduser()
    cfg = _run_config(root)
    return _model_from_checkpoint(cfg, _latest(root), device)


def load_run(run_dir: str | Path, *, device: str = "cpu") -> LoadedRun:
    """The model of ``run_dir`` (see :func:`load_model`) and its task on the run's data."""
    root = Path(run_dir).expanduser()
    cfg = _run_config(root)
    checkpoint = _latest(root)
    task = build_task(cfg, load_data(cfg))  # builds the model config from the run's data
    resolved = json.loads(json.dumps(asdict(task.model_config)))
    if _sizes(resolved) != _sizes(_saved_model(checkpoint)["config"]):
        raise ConfigError(f"the data of run {str(root)!r} now sizes the model differently than "
                          "when it was trained (e.g. another vocabulary); restore that data "
                          "or use tokengeo.load_model(run_dir)")
    model = _model_from_checkpoint(cfg, checkpoint, device, task.model_config)
    return LoadedRun(cfg, model, task, checkpoint.step)


def _sizes(config: dict) -> dict:
    """A model config without ``kernel``, which changes speed, not the model (a resume may
    switch it; a run saved before the field existed has none)."""
    return {k: v for k, v in config.items() if k != "kernel"}


register_run_loader(load_model)  # tokengeo.models.names resolves run folders to this
