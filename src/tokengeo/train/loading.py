"""Load a finished (or interrupted) run's model for analysis, without touching the run."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torch import nn

from tokengeo.errors import ConfigError


@dataclass
class LoadedRun:
    config: Any  # TrainConfig
    model: nn.Module
    task: Any  # Task
    step: int


def load_run(run_dir: str | Path, *, device: str = "cpu") -> LoadedRun:
    """Rebuild the model of ``run_dir`` from ``config.json`` and its latest checkpoint.

    Reads only: unlike ``--resume`` it never truncates metrics or writes checkpoints.
    """
    from tokengeo.train import checkpoint as ckpt
    from tokengeo.train.config import config_from_dict, read_config_json
    from tokengeo.train.tasks import build_task_and_model
    from tokengeo.train.trainer import load_data

    root = Path(run_dir).expanduser()
    if not (root / "config.json").is_file():
        raise ConfigError(f"{str(root)!r} is not a tokengeo run directory (no config.json); "
                          "pass the --out folder of a `tokengeo train` run")
    cfg = config_from_dict(read_config_json(root / "config.json"))
    latest = ckpt.latest_checkpoint(root / "checkpoints")
    if latest is None:
        raise ConfigError(f"run {str(root)!r} has no checkpoint yet; train it first")
    data = load_data(cfg)
    task, model = build_task_and_model(cfg, data, device)
    checkpoint = ckpt.load_checkpoint(latest)
    ckpt.restore_model(model, checkpoint)
    return LoadedRun(cfg, model.eval(), task, int(checkpoint.state["step"]))
