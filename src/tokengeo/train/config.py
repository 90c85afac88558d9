"""The training configuration: one dataclass, validated in one place, loadable from TOML.

Precedence when it is assembled (see :func:`build_config`): defaults < config file (TOML,
or the ``config.json`` a run wrote) <
explicit fields (the CLI flags) < ``--set key=value`` overrides. Nested options use dotted
keys: ``--set model_overrides.d_model=32`` or ``--set data_options.tokenizer=char``.
"""

from __future__ import annotations

import dataclasses
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tokengeo.checks import (
    MAX_SEED,
    check_choice,
    check_int,
    check_output_folder,
    check_positive,
    check_range,
    check_types,
    replace_checked,
)
from tokengeo.errors import ConfigError
from tokengeo.train.loggers import check_loggers
from tokengeo.train.tasks import check_task_options

PRECISIONS = ("auto", "fp32", "bf16", "fp16")
DEVICES = ("auto", "cpu", "cuda")
# Fields that may differ between a run and its resumption (they change no numbers).
RESUMABLE_CHANGES = ("out", "log_every", "checkpoint_every", "keep_checkpoints", "device",
                     "loggers", "compile", "kernel")
# Bounds on sizes no run can reach: refused with the reason instead of being started.
MAX_STEPS = 10**9  # a billion updates: years at any speed
MAX_BATCH = 2**24  # examples (or windows) in one global batch
MAX_LR = 10.0  # AdamW diverges at once far below this; 1e39 overflows float32
# Bytes per parameter while training: fp32 weights, gradients and AdamW's two moments.
TRAIN_BYTES_PER_PARAM = 16
# Top-level fields that set the model config field of the same name (the CLI has flags for
# them); ``model_overrides`` may repeat them only with the same value.
MODEL_FIELDS = ("n_laplacian", "head_kind", "kernel")


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
    ``compile``: train through ``torch.compile`` (the same weights and checkpoints; it only
    changes speed, so a run may be resumed with it switched); ``kernel``: the model's
    attention kernel (its config field of that name; also speed only, so also switchable).
    """

    model: str = "vit-tiny"
    data: str = "fashion-mnist"
    task: str = "auto"
    task_options: dict[str, Any] = field(default_factory=dict)
    n_laplacian: int = 0
    head_kind: str = "laplacian"
    kernel: str = "auto"
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
    compile: bool = False
    device: str = "auto"
    out: str = "runs/default"

    def validate(self) -> TrainConfig:
        """Types, ranges and sizes of every field, before anything is loaded or created."""
        check_loggers(self.loggers)  # also: a logger whose package is missing
        check_types(self)  # a string where a number belongs, inf/nan, a table for a list
        check_task_options(self.task, self.task_options)  # also: an unknown task
        check_choice("precision", self.precision, PRECISIONS)
        check_choice("device", self.device, DEVICES)
        for name in ("steps", "batch_size", "lr", "keep_checkpoints", "log_every"):
            check_positive(name, getattr(self, name))
        for name in ("warmup", "eval_every", "eval_batches", "final_eval_batches",
                     "checkpoint_every", "min_lr", "weight_decay", "grad_clip"):
            check_positive(name, getattr(self, name), allow_zero=True)
        check_int("steps", self.steps, 1, MAX_STEPS)
        check_int("batch_size", self.batch_size, 1, MAX_BATCH)
        check_int("seed", self.seed, 0, MAX_SEED)
        check_range("lr", self.lr, 0.0, MAX_LR)
        if self.min_lr > self.lr:
            raise ConfigError(f"min_lr={self.min_lr} must not exceed lr={self.lr}")
        check_range("beta1", self.beta1, 0.0, 0.999999)
        check_range("beta2", self.beta2, 0.0, 0.999999)
        if not self.out:
            raise ConfigError("out must name a run directory, e.g. --out runs/vit-l3")
        self._check_data_options()
        self._check_overrides_agree()
        # unknown model, bad override, n_laplacian > n_heads: refused before the data loads
        # (the sizes the data sets come later; the config that is used is built then)
        self.model_config(**self._pre_data_sizes())
        self._validated_as = self.to_dict()
        return self

    def validated(self) -> TrainConfig:
        """``self``, validated: :meth:`validate` runs only if it has not run on these values."""
        if getattr(self, "_validated_as", None) != self.to_dict():
            self.validate()
        return self

    def _check_data_options(self) -> None:
        """Unknown or ill-typed ``data_options`` of a registered data set, before loading."""
        from tokengeo.data.registry import check_options, dataset_info, list_datasets

        if self.data in list_datasets():
            check_options(dataset_info(self.data), self.data_options)

    def _check_overrides_agree(self) -> None:
        """``model_overrides`` cannot contradict a top-level field that sets the same model
        field: which one wins would be a guess, so neither does."""
        for name in MODEL_FIELDS:
            if name in self.model_overrides and self.model_overrides[name] != getattr(self, name):
                value = self.model_overrides[name]
                raise ConfigError(
                    f"model_overrides.{name}={value!r} contradicts {name}="
                    f"{getattr(self, name)!r}; set {name} alone (--set {name}={value!r}) and "
                    f"drop model_overrides.{name}")

    def _pre_data_sizes(self) -> dict[str, Any]:
        """Sizes the data sets later, chosen here so that they cannot clash before it is
        loaded: a ViT's ``image_size`` is checked against ``patch_size`` on the data's."""
        from tokengeo.models.registry import get_entry

        entry = get_entry(self.model)
        fields = {f.name for f in dataclasses.fields(entry.config_cls)}
        if "image_size" not in fields or "image_size" in self.model_overrides:
            return {}
        patch = self.model_overrides.get("patch_size", entry.defaults.get(
            "patch_size", entry.config_cls.patch_size))
        ok = isinstance(patch, int) and not isinstance(patch, bool) and patch > 0
        return {"image_size": patch} if ok else {}

    def model_config(self, **from_data: Any):
        """The model config, built and validated: registry defaults < data-derived sizes <
        overrides (which may not contradict the data). Called once for the check before the
        data loads and once by :func:`tokengeo.train.tasks.build_task`; the task, the
        registry and the trainer use the config that call returns."""
        from tokengeo.models.registry import get_entry

        entry = get_entry(self.model)
        overrides = {**self.model_overrides,
                     **{name: getattr(self, name) for name in self._model_fields(entry)}}
        clash = {k: (v, overrides[k]) for k, v in from_data.items()
                 if k in overrides and overrides[k] != v}
        if clash:
            detail = ", ".join(f"{k}={o!r} but the data needs {d!r}" for k, (d, o) in clash.items())
            raise ConfigError(f"model_overrides disagree with the data: {detail}; drop them")
        return entry.config(**{**from_data, **overrides})

    def _model_fields(self, entry) -> tuple[str, ...]:
        """The :data:`MODEL_FIELDS` this model's config has. ``kernel`` is a field of
        tokengeo's own models only: a Hugging Face model keeps its ``attn_implementation``,
        so a kernel other than ``auto`` is refused for it rather than ignored."""
        fields = {f.name for f in dataclasses.fields(entry.config_cls)}
        if "kernel" not in fields and self.kernel != "auto":
            raise ConfigError(f"kernel={self.kernel!r} sets the attention kernel of tokengeo's "
                              f"own models; {self.model} has none (its attention is the "
                              "Hugging Face attn_implementation): drop --kernel")
        return tuple(name for name in MODEL_FIELDS if name != "kernel" or name in fields)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def check_out_folder(out: str | Path) -> None:
    """Refuse an ``--out`` that cannot be created, before anything is read or written (the
    one rule of :func:`tokengeo.checks.check_output_folder`)."""
    check_output_folder("--out", Path(out).expanduser())


def load_config_file(path: str | Path) -> dict[str, Any]:
    """The key/values of a TOML config file (tables become nested dicts), or of a run's
    resolved ``config.json`` (a ``.json`` file), so a run can be repeated from its folder."""
    path = Path(path)
    if path.is_dir():
        raise ConfigError(f"config file {str(path)!r} is a folder; pass a TOML file path")
    if not path.is_file():
        raise ConfigError(f"config file {str(path)!r} does not exist; pass a TOML file path")
    if path.suffix.lower() == ".json":
        values = read_config_json(path)
        if not isinstance(values, dict):
            raise ConfigError(f"config file {str(path)!r} must hold a JSON object of settings")
        return values
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"config file {str(path)!r} is not UTF-8 text; pass a TOML file "
                          "path") from None
    except OSError as exc:
        raise ConfigError(f"cannot read config file {str(path)!r}: {exc.strerror}") from None
    try:
        return tomllib.loads(text)
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
        *parents, leaf = parts = key.strip().split(".")
        if not all(p.strip() for p in parts):
            raise ConfigError(f"--set key {key.strip()!r} has an empty part; write "
                              "key=value or table.key=value")
        node = out
        for depth, p in enumerate(parents):
            node = node.setdefault(p, {})
            if not isinstance(node, dict):
                table = ".".join(parents[: depth + 1])
                raise ConfigError(f"--set {item}: {table} is not a table (it was set to "
                                  f"{node!r}); drop one of the two")
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
            raise ConfigError(f"{name}={values[name]!r} must be a table of key = value")
    return replace_checked(TrainConfig(), values, what="train config").validate()


def check_training_memory(cfg: TrainConfig, model_config: Any) -> None:
    """The one memory check of a training run: weights, gradients and AdamW's moments of
    the model ``model_config`` (sized from the data) fit in this machine's memory."""
    from tokengeo.models.registry import check_model_memory

    check_model_memory(cfg.model, model_config, TRAIN_BYTES_PER_PARAM,
                       "training (weights, gradients and AdamW moments)")


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
    from tokengeo.io import read_json  # bounded, never blocks on a FIFO, an object

    try:
        values = read_json(path, object, limit=16 << 20)
    except ConfigError as exc:
        raise ConfigError(f"cannot read the run config: {exc}") from None
    if not isinstance(values, dict):
        raise ConfigError(f"config file {str(path)!r} must hold a JSON object of settings")
    return values
