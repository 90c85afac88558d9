"""The run directory (``--out``): its layout, creation, resumption and atomic JSON writes.

::

    <out>/config.json        resolved TrainConfig (rewritten atomically)
    <out>/metrics.jsonl      one JSON record per line: train steps, evaluations
    <out>/checkpoints/       step-<N>/ directories (see tokengeo.train.checkpoint)
    <out>/summary.json       final metrics, parameter counts, wall time, config

Only rank 0 writes here.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from tokengeo.errors import CheckpointError, ConfigError
from tokengeo.io import (
    NOFOLLOW,
    NONBLOCK,
    append_text,
    parse_json,
    read_json,
    read_small,
    write_json,
    write_text,
)
from tokengeo.runlock import folder_entries
from tokengeo.train.config import RESUMABLE_CHANGES

# metrics.jsonl keys that measure wall-clock time (they differ between identical runs)
TIMING_KEYS = ("wall_s", "throughput")
CONFIG_LIMIT = 16 << 20  # a resolved config is a few kB
METRICS_LIMIT = 1 << 30  # one line per logged step


class RunDir:
    def __init__(self, out: str | Path) -> None:
        self.root = Path(out).expanduser()
        self.config = self.root / "config.json"
        self.metrics = self.root / "metrics.jsonl"
        self.checkpoints = self.root / "checkpoints"
        self.summary = self.root / "summary.json"

    def check_new(self) -> None:
        """Refuse to overwrite another run."""
        if self.root.exists() and (not self.root.is_dir() or folder_entries(self.root)):
            raise ConfigError(
                f"--out {str(self.root)!r} exists and is not empty; pass --resume to continue "
                "that run, or choose a new --out"
            )

    def check_resumable(self) -> dict[str, Any]:
        """The saved config of the run to resume (error when there is none)."""
        if not self.config.is_file():
            raise ConfigError(
                f"nothing to resume: {str(self.config)!r} does not exist; "
                "start the run without --resume"
            )
        try:
            return read_json(self.config, dict, limit=CONFIG_LIMIT)
        except ConfigError as exc:  # not JSON, not an object, a FIFO, absurdly large
            raise CheckpointError(str(exc)) from None

    def create(self, config: dict[str, Any]) -> None:
        write_json(self.config, config)  # first: a config JSON refuses leaves no checkpoints/
        self.checkpoints.mkdir(exist_ok=True)
        append_text(self.metrics, "")  # never through a link planted at metrics.jsonl

    def append(self, record: dict[str, Any]) -> None:
        append_text(self.metrics, json.dumps(record, allow_nan=True) + "\n")

    def sync_metrics(self) -> None:
        """Flush metrics.jsonl to disk (before a checkpoint that refers to it)."""
        if self.metrics.exists():
            fd = os.open(self.metrics, os.O_WRONLY | os.O_APPEND | NOFOLLOW | NONBLOCK)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def read_metrics(self) -> list[dict[str, Any]]:
        return list(_records(self.metrics))

    def truncate_metrics(self, step: int) -> None:
        """Keep the records of steps <= ``step`` (a resumed run rewrites the rest)."""
        kept = [r for r in _records(self.metrics) if r["step"] <= step and not r.get("final")]
        write_text(self.metrics, "".join(json.dumps(r) + "\n" for r in kept))


def _records(path: Path) -> Iterable[dict[str, Any]]:
    """Parsed lines of a JSONL file; a torn last line (a crash mid-write) is skipped."""
    if not path.exists():
        return
    try:
        text = read_small(path, METRICS_LIMIT).decode("utf-8")
    except (ConfigError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"{path} cannot be read as metrics: {exc}") from None
    lines = text.splitlines()
    for i, line in enumerate(lines):
        try:
            record = parse_json(line, f"{path} line {i + 1}", allow_nan=True)
        except ConfigError as exc:
            if "levels deep" in str(exc):
                raise CheckpointError(str(exc)) from None
            if i != len(lines) - 1:
                raise CheckpointError(f"{path} line {i + 1} is not valid JSON") from None
            continue
        if not isinstance(record, dict) or not isinstance(record.get("step"), int):
            raise CheckpointError(f"{path} line {i + 1} is not a metrics record (a JSON object "
                                  "with a whole-number step)")
        yield record


def config_changes(saved: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """Fields (other than ``RESUMABLE_CHANGES``) whose values differ, as ``k: old -> new``."""
    keys = sorted((set(saved) | set(current)) - set(RESUMABLE_CHANGES))
    return [f"{k}: {saved.get(k)!r} -> {current.get(k)!r}" for k in keys
            if saved.get(k) != current.get(k)]
