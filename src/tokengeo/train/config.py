"""The training configuration: one dataclass, validated in one place, loadable from TOML.

Precedence when it is assembled (see :func:`build_config`): defaults < config file (TOML,
or the ``config.json`` a run wrote) <
explicit fields (the CLI flags) < ``--set key=value`` overrides. Nested options use dotted
keys: ``--set model_overrides.d_model=32`` or ``--set data_options.tokenizer=char``.
"""

from __future__ import annotations

import dataclasses
import json
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tokengeo.config import check_choice, check_positive, check_range, replace_checked
from tokengeo.errors import ConfigError
from tokengeo.train.loggers import check_loggers
from tokengeo.train.tasks import check_task_options

PRECISIONS = ("auto", "fp32", "bf16", "fp16")
DEVICES = ("auto", "cpu", "cuda")
# Fields that may differ between a run and its resumption (they change no numbers).
RESUMABLE_CHANGES = ("out", "log_every", "checkpoint_every", "keep_checkpoints", "device",
                     "loggers")


@dataclass
class TrainConfig:
    """Everything a training run depends on. The same config and seed give the same run.

    Optimisation: AdamW (decoupled ``weight_decay`` on weights with >= 2 dims), linear
    warmup over ``warmup`` steps to ``lr`` then cosine decay to ``min_lr`` at ``steps``;
    gradients clipped to global norm ``grad_clip`` (0 = off). ``batch_size`` is the global
    batch (split across data-parallel ranks). ``eval_every``/``checkpoint_every`` of 0 mean
    only at the end; ``eval_batches`` bounds periodic evaluation, ``final_eval_batches``
    the final one (0 = the whole split). ``loggers``: where metrics go besides
    ``metrics.jsonl`` (``tensorboard``, ``csv``, ``wandb``; see :mod:`tokengeo.train.loggers`).
    """

    model: str = "vit-tiny"
    data: str = "fashion-mnist"
    task: str = "auto"
    task_options: dict[str, Any] = field(default_factory=dict)
    n_laplacian: int = 0
    head_kind: str = "laplacian"
    model_overrides: dict[str, Any] = field(default_factory=dict)
    data_options: dict[str, Any] = field(default_factory=dict)
    steps: int = 1000
    batch_size: int = 64
    lr: float = 1e-3
    min_lr: float = 1e-4
    warmup: int = 100
    weight_decay: float = 0.05
    beta1: float = 0.9
    beta2: float = 0.99
    grad_clip: float = 1.0
    eval_every: int = 200
    eval_batches: int = 20
    final_eval_batches: int = 0
    checkpoint_every: int = 0
    keep_checkpoints: int = 2
    log_every: int = 1
    loggers: list[str] = field(default_factory=list)
    seed: int = 0
    precision: str = "auto"
    device: str = "auto"
    out: str = "runs/default"

    def validate(self) -> TrainConfig:
        check_task_options(self.task, self.task_options)  # also: an unknown task
        check_loggers(self.loggers)  # also: a logger whose package is missing
        check_choice("precision", self.precision, PRECISIONS)
        check_choice("device", self.device, DEVICES)
        for name in ("steps", "batch_size", "lr", "keep_checkpoints", "log_every"):
            check_positive(name, getattr(self, name))
        for name in ("warmup", "eval_every", "eval_batches", "final_eval_batches",
                     "checkpoint_every", "min_lr", "weight_decay", "grad_clip"):
            check_positive(name, getattr(self, name), allow_zero=True)
        if self.min_lr > self.lr:
            raise ConfigError(f"min_lr={self.min_lr} must not exceed lr={self.lr}")
        check_range("beta1", self.beta1, 0.0, 0.999999)
        check_range("beta2", self.beta2, 0.0, 0.999999)
        for name in ("steps", "batch_size", "warmup", "eval_every", "checkpoint_every", "seed"):
            _check_int(name, getattr(self, name))
        if not self.out:
            raise ConfigError("out must name a run directory, e.g. --out runs/vit-l3")
        self.model_config()  # unknown model, bad override, n_laplacian > n_heads
        return self

    def model_config(self, **from_data: Any):
        """The resolved model config: registry defaults < data-derived sizes < overrides."""
        from tokengeo.models.registry import get_entry

        overrides = {**self.model_overrides, "n_laplacian": self.n_laplacian,
                     "head_kind": self.head_kind}
        clash = {k: (v, overrides[k]) for k, v in from_data.items()
                 if k in overrides and overrides[k] != v}
        if clash:
            detail = ", ".join(f"{k}={o!r} but the data needs {d!r}" for k, (d, o) in clash.items())
            raise ConfigError(f"model_overrides disagree with the data: {detail}; drop them")
        return get_entry(self.model).config(**{**from_data, **overrides})

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _check_int(name: str, value: Any) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ConfigError(f"{name}={value!r} must be an integer")


def load_config_file(path: str | Path) -> dict[str, Any]:
    """The key/values of a TOML config file (tables become nested dicts), or of a run's
    resolved ``config.json`` (a ``.json`` file), so a run can be repeated from its folder."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file {str(path)!r} does not exist; pass a TOML file path")
    if path.suffix.lower() == ".json":
        values = read_config_json(path)
        if not isinstance(values, dict):
            raise ConfigError(f"config file {str(path)!r} must hold a JSON object of settings")
        return values
    try:
        return tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {str(path)!r} is not valid TOML: {exc}; a run's "
                          "config.json is read as JSON when its name ends in .json") from None


def parse_set(assignments: Iterable[str]) -> dict[str, Any]:
    """``["lr=1e-3", "model_overrides.d_model=32"]`` -> nested dict of typed values.

    Values are read as TOML literals (numbers, booleans, quoted strings, arrays); anything
    else is kept as a bare string, so ``data=shakespeare`` needs no quotes.
    """
    out: dict[str, Any] = {}
    for item in assignments:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set expects key=value, got {item!r}")
        *parents, leaf = key.strip().split(".")
        node = out
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = _parse_value(raw.strip())
    return out


def _parse_value(raw: str) -> Any:
    try:
        return tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        return raw


def merge(base: Mapping[str, Any], update: Mapping[str, Any]) -> dict[str, Any]:
    """Recursive dict update: nested dicts (model_overrides, data_options) merge key-wise."""
    out = dict(base)
    for key, value in update.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


def config_from_dict(values: Mapping[str, Any]) -> TrainConfig:
    """A validated :class:`TrainConfig`; unknown keys fail with the list of valid ones."""
    values = dict(values)
    for name in ("model_overrides", "data_options"):
        if name in values and not isinstance(values[name], Mapping):
            raise ConfigError(f"{name} must be a table of key = value, got {values[name]!r}")
    return replace_checked(TrainConfig(), values, what="train config").validate()


def build_config(
    file: str | Path | None = None,
    fields: Mapping[str, Any] | None = None,
    sets: Iterable[str] = (),
    base: Mapping[str, Any] | None = None,
) -> TrainConfig:
    """defaults < ``base`` (a saved config.json) < ``file`` (TOML, or a run's config.json)
    < ``fields`` < ``sets``."""
    values: dict[str, Any] = dict(base or {})
    if file is not None:
        values = merge(values, load_config_file(file))
    values = merge(values, {k: v for k, v in (fields or {}).items() if v is not None})
    values = merge(values, parse_set(sets))
    return config_from_dict(values)


def read_config_json(path: str | Path) -> dict[str, Any]:
    try:
        return json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read the run config {str(path)!r}: {exc}") from None
