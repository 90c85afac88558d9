"""Metric loggers besides ``metrics.jsonl`` (always written): the ``loggers`` setting.

====================  ===============================================  =======================
name                  writes                                           needs
====================  ===============================================  =======================
``tensorboard``       event files in ``<out>/tensorboard/``            ``pip install
                      (``tensorboard --logdir <out>``)                 'tokengeo[log]'``
``csv``               ``<out>/metrics.csv``: ``step,split,metric,      nothing
                      value``, one row per logged number
``wandb``             an offline Weights & Biases run in               ``pip install wandb``
                      ``<out>/wandb/`` (``wandb sync`` uploads it)
====================  ===============================================  =======================

Every numeric field of a ``metrics.jsonl`` record is logged as ``<split>/<field>`` (e.g.
``train/loss``, ``val/accuracy``) at its step. Only rank 0 logs. A resumed run drops what
its loggers recorded after the checkpoint it continues from, as ``metrics.jsonl`` does.
"""

from __future__ import annotations

import csv
import importlib
import importlib.util
from abc import ABC, abstractmethod
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from tokengeo.errors import ConfigError, MissingDependencyError

LOGGERS = ("tensorboard", "csv", "wandb")
# logger -> (import name, install command)
_PACKAGES = {"tensorboard": ("tensorboard", "pip install 'tokengeo[log]'"),
             "wandb": ("wandb", "pip install wandb")}


def check_loggers(names: Any) -> None:
    """Known names, no repeats, and their packages installed (refused before training)."""
    if not isinstance(names, list | tuple) or not all(isinstance(n, str) for n in names):
        raise ConfigError(f"loggers={names!r} must be a list of names, e.g. "
                          "--set 'loggers=[\"tensorboard\", \"csv\"]'; choose from "
                          f"{list(LOGGERS)}")
    unknown = [n for n in names if n not in LOGGERS]
    if unknown:
        raise ConfigError(f"unknown logger(s) {unknown}; choose from {list(LOGGERS)} "
                          "(metrics.jsonl is always written)")
    if len(set(names)) != len(names):
        raise ConfigError(f"loggers={list(names)} names a logger twice")
    for name in names:
        if name in _PACKAGES:
            package, install = _PACKAGES[name]
            if importlib.util.find_spec(package) is None:
                raise MissingDependencyError(f"logger {name!r} needs the '{package}' package, "
                                             f"which is not installed; install it with: "
                                             f"{install}, or drop it from loggers")


def scalars(record: dict[str, Any]) -> dict[str, float]:
    """``{"<split>/<field>": value}`` of a metrics record's numbers (not step/flags)."""
    split = record.get("split", "train")
    return {f"{split}/{k}": float(v) for k, v in record.items()
            if k != "step" and isinstance(v, int | float) and not isinstance(v, bool)}


class MetricLogger(ABC):
    @abstractmethod
    def log(self, record: dict[str, Any]) -> None:
        """One ``metrics.jsonl`` record (it has ``step`` and ``split``)."""

    def close(self) -> None:  # noqa: B027 (optional hook)
        """Flush and release files at the end of the run (also after an error)."""


class CSVLogger(MetricLogger):
    """``metrics.csv`` in long form, rewritten from the kept records when a run resumes."""

    HEADER = ("step", "split", "metric", "value")

    def __init__(self, root: Path, past: Iterable[dict[str, Any]]) -> None:
        self.path = root / "metrics.csv"
        self.file = open(self.path, "w", newline="")  # closed by close()
        self.writer = csv.writer(self.file)
        self.writer.writerow(self.HEADER)
        for record in past:
            self.log(record)

    def log(self, record: dict[str, Any]) -> None:
        for tag, value in scalars(record).items():
            split, metric = tag.split("/", 1)
            self.writer.writerow((record["step"], split, metric, repr(value)))
        self.file.flush()

    def close(self) -> None:
        self.file.close()


class TensorBoardLogger(MetricLogger):
    """Scalars ``<split>/<field>`` in ``<out>/tensorboard``; a resumed run purges the events
    after its checkpoint step."""

    def __init__(self, root: Path, step: int) -> None:
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError as exc:
            raise MissingDependencyError(f"logger 'tensorboard' cannot start ({exc}); install "
                                         "it with: pip install 'tokengeo[log]'") from exc
        purge = {"purge_step": step + 1} if step else {}
        self.writer = SummaryWriter(log_dir=str(root / "tensorboard"), **purge)

    def log(self, record: dict[str, Any]) -> None:
        for tag, value in scalars(record).items():
            self.writer.add_scalar(tag, value, record["step"])

    def close(self) -> None:
        self.writer.close()


class WandbLogger(MetricLogger):
    """An offline Weights & Biases run in ``<out>/wandb`` (``wandb`` is imported here)."""

    def __init__(self, root: Path, config: dict[str, Any]) -> None:
        try:
            wandb = importlib.import_module("wandb")
        except ImportError as exc:
            raise MissingDependencyError(f"logger 'wandb' needs the 'wandb' package ({exc}); "
                                         "install it with: pip install wandb") from exc
        self.run = wandb.init(mode="offline", dir=str(root), project="tokengeo",
                              name=root.name, config=config)

    def log(self, record: dict[str, Any]) -> None:
        self.run.log(scalars(record), step=record["step"])

    def close(self) -> None:
        self.run.finish()


def open_loggers(names: Iterable[str], root: Path, config: dict[str, Any],
                 past: list[dict[str, Any]], step: int) -> list[MetricLogger]:
    """The loggers ``names`` for the run in ``root``, continuing after ``step`` (0: new)
    with the ``past`` records it kept."""
    loggers: list[MetricLogger] = []
    try:
        for name in names:
            if name == "csv":
                loggers.append(CSVLogger(root, past))
            elif name == "tensorboard":
                loggers.append(TensorBoardLogger(root, step))
            elif name == "wandb":
                loggers.append(WandbLogger(root, config))
    except BaseException:
        close_loggers(loggers)
        raise
    return loggers


def close_loggers(loggers: Iterable[MetricLogger]) -> None:
    for logger in loggers:
        logger.close()
