"""tokengeo.train: tasks, the trainer, checkpoints with exact resume, data parallelism.

    cfg = build_config("config.toml", sets=["lr=1e-3"])   # or TrainConfig(...)
    summary = train(cfg)                                   # writes cfg.out
    summary = train(cfg, resume=True)                      # continues from its checkpoint
"""

from tokengeo.train.checkpoint import Checkpoint, latest_checkpoint, load_checkpoint
from tokengeo.train.config import TrainConfig, build_config, parse_set
from tokengeo.train.distributed import DistEnv, init_distributed
from tokengeo.train.loading import load_model, load_run  # also: run folders resolve by name
from tokengeo.train.schedule import WarmupCosine
from tokengeo.train.tasks import (
    Batch,
    ImageClassification,
    LanguageModeling,
    Task,
    TextClassification,
    list_tasks,
    register_task,
    task_class,
)
from tokengeo.train.trainer import NonFiniteLossError, Trainer, train

__all__ = [
    "Batch", "Checkpoint", "DistEnv", "ImageClassification", "LanguageModeling",
    "NonFiniteLossError", "Task", "TextClassification", "TrainConfig", "Trainer",
    "WarmupCosine", "build_config", "init_distributed", "latest_checkpoint", "list_tasks",
    "load_checkpoint", "load_model", "load_run", "parse_set", "register_task", "task_class",
    "train",
]  # fmt: skip
