"""Tasks bind a dataset bundle to the model families that fit it, a loss and its metrics.

The trainer knows nothing about images or text: it asks its task for batches, a loss,
per-batch sums of statistics (summed over batches and data-parallel ranks) and the
metrics computed from those sums.

=====================  ================  =============================================
task                   data bundle       metrics
=====================  ================  =============================================
image-classification   images, labels    loss (nats), accuracy
text-classification    token ids, mask   loss (nats), accuracy
language-modeling      token stream      loss (nats/token), perplexity = exp(loss),
                                         bits_per_token = loss / ln 2,
                                         bits_per_char = bits_per_token / (characters
                                         per token of the split's text)
dino                   images            k-NN accuracy, embedding spread (tokengeo.dino)
=====================  ================  =============================================

Tasks live in a registry (:func:`register_task`); the self-supervised ones register from
their own packages when those are imported (``import tokengeo.dino`` registers ``dino``;
the CLI and the suites import it), and this module never imports them (they import it).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
import torch.nn.functional as F

from tokengeo.data.samplers import EpochBatchSampler, RandomWindowSampler
from tokengeo.data.splits import evenly_spaced
from tokengeo.errors import ConfigError
from tokengeo.models.registry import get_entry, list_models


@dataclass
class Batch:
    inputs: Any  # (B, C, H, W) float images, (B, T) int64 token ids, or a tuple of views
    targets: torch.Tensor  # (B,) class ids or (B, T) next-token ids
    attention_mask: torch.Tensor | None = None  # (B, T), 1 = real token

    def to(self, device: torch.device) -> Batch:
        mask = None if self.attention_mask is None else self.attention_mask.to(device)
        if isinstance(self.inputs, tuple):  # several views (DINO), some possibly None
            inputs = tuple(None if x is None else x.to(device) for x in self.inputs)
        else:
            inputs = self.inputs.to(device)
        return Batch(inputs, self.targets.to(device), mask)

    def __len__(self) -> int:
        return self.targets.shape[0]


class Task(ABC):
    """A dataset bundle of one ``kind`` + the model ``families`` that fit it + loss/metrics.

    Hooks with do-nothing defaults let a task change the training step: ``wrap_model``
    (e.g. add a teacher), ``before_update`` (after backward and clipping),
    ``after_update`` (after the optimiser step), ``evaluate`` (its own evaluation instead
    of summed ``stats``) and ``summary_extras`` (fields added to ``summary.json``).
    """

    name: ClassVar[str]  # what --task selects; the data kind for the supervised tasks
    kind: ClassVar[str]
    families: ClassVar[tuple[str, ...]]
    unit: ClassVar[str]  # what throughput counts: examples or tokens
    stat_names: ClassVar[tuple[str, ...]]
    eval_splits: ClassVar[tuple[str, ...]] = ("val", "test")

    def __init__(self, data: Any, model_config: Any, options: dict | None = None) -> None:
        if options:
            self.check_options(options)
        if data.kind != self.kind:
            raise ConfigError(f"task {self.kind!r} cannot use {data.kind} data {data.name!r}")
        self.data = data
        self.model_config = model_config
        self.options = dict(options or {})

    @classmethod
    def check_options(cls, options: dict) -> None:
        """Refuse ``task_options`` the task does not understand (none by default)."""
        if options:
            raise ConfigError(f"task {cls.name!r} takes no task_options; drop {sorted(options)}")

    @classmethod
    def wrap(cls, model: Any, options: dict, total_steps: int) -> Any:
        """The module that is trained around the bare ``model`` (DINO: student + teacher).

        Needs no data, so a run's model can be rebuilt from its checkpoint alone
        (:func:`tokengeo.train.loading.load_model`)."""
        return model

    def wrap_model(self, model: Any, total_steps: int) -> Any:
        return type(self).wrap(model, self.options, total_steps)

    def before_update(self, model: Any) -> None:  # noqa: B027 (optional hook)
        """Called after backward and clipping, before the optimiser step."""

    def after_update(self, model: Any) -> None:  # noqa: B027 (optional hook)
        """Called after the optimiser step."""

    def evaluate(self, model: Any, split: str, max_examples: int,
                 batch_size: int) -> dict[str, float] | None:
        """Metrics of ``split`` computed by the task itself, or None for the trainer's
        sum of ``stats`` over batches."""
        return None

    def summary_extras(self, model: Any, final: dict[str, dict]) -> dict[str, Any]:
        return {}

    @staticmethod
    @abstractmethod
    def model_sizes(data: Any) -> dict[str, Any]:
        """Model config values the data dictates (classes, image size, vocabulary...)."""

    @classmethod
    def check_family(cls, model_name: str, family: str) -> None:
        if family not in cls.families:
            fits = [m for f in cls.families for m in list_models(f)]
            raise ConfigError(
                f"model {model_name!r} (family {family}) cannot do {cls.kind}; use one of {fits}"
            )

    @abstractmethod
    def num_examples(self, split: str) -> int:
        """Examples (or LM windows) in ``split``."""

    def sampler(self, batch_size: int, seed: int, rank: int = 0, world_size: int = 1):
        """Resumable infinite iterator of training index tensors (this rank's share)."""
        return EpochBatchSampler(self.num_examples("train"), batch_size, seed,
                                 rank=rank, world_size=world_size)

    def eval_indices(self, split: str, max_examples: int) -> torch.Tensor:
        """The fixed, seed-free evaluation examples of ``split`` (all when 0)."""
        return evenly_spaced(self.num_examples(split), max_examples)

    @abstractmethod
    def batch(self, split: str, idx: torch.Tensor) -> Batch:
        """The examples ``idx`` (B,) of ``split`` as model inputs and targets (on the CPU)."""

    def items(self, batch: Batch) -> int:
        return len(batch)

    @abstractmethod
    def loss(self, logits: torch.Tensor, batch: Batch) -> torch.Tensor:
        """Mean cross-entropy of the batch (the quantity that is optimised)."""

    @abstractmethod
    def stats(self, logits: torch.Tensor, batch: Batch) -> torch.Tensor:
        """Per-batch sums ``stat_names`` (float64, (S,)): add them over batches and ranks."""

    @abstractmethod
    def metrics(self, sums: torch.Tensor, split: str) -> dict[str, float]:
        """Metrics of ``split`` from the summed ``stats`` of its evaluated batches."""


# ---- the task registry -----------------------------------------------------------------

_REGISTRY: dict[str, type[Task]] = {}


def register_task(cls: type[Task]) -> type[Task]:
    """Register ``cls`` under ``cls.name`` (usable as a class decorator)."""
    known = _REGISTRY.get(cls.name)
    if known is not None and known is not cls:
        raise ConfigError(f"task {cls.name!r} is already registered by {known.__module__}")
    _REGISTRY[cls.name] = cls
    return cls


class _Classification(Task):
    unit = "ex"
    stat_names = ("loss_sum", "correct", "count")

    def num_examples(self, split: str) -> int:
        return len(self.data.split(split))

    def loss(self, logits: torch.Tensor, batch: Batch) -> torch.Tensor:
        return F.cross_entropy(logits.float(), batch.targets)  # logits (B, C)

    def stats(self, logits: torch.Tensor, batch: Batch) -> torch.Tensor:
        logits = logits.float()  # (B, C)
        loss_sum = F.cross_entropy(logits, batch.targets, reduction="sum")
        correct = (logits.argmax(dim=-1) == batch.targets).sum()
        n = torch.tensor(len(batch), device=logits.device)
        return torch.stack([loss_sum.double(), correct.double(), n.double()])

    def metrics(self, sums: torch.Tensor, split: str) -> dict[str, float]:
        loss_sum, correct, count = sums.tolist()
        return {"loss": loss_sum / count, "accuracy": correct / count, "examples": int(count)}


@register_task
class ImageClassification(_Classification):
    name = kind = "image-classification"
    families = ("vit",)

    @staticmethod
    def model_sizes(data: Any) -> dict[str, Any]:
        c, h, w = data.image_shape
        if h != w:
            raise ConfigError(f"{data.name} images are {h}x{w}; the ViT needs square images")
        return {"num_classes": data.num_classes, "image_size": h, "in_chans": c}

    OPTIONS = {"crop_padding": "a whole number of pixels >= 0 (random crops of the image "
                               "zero-padded by it)",
               "hflip": "true or false (random horizontal flips)"}

    @classmethod
    def check_options(cls, options: dict) -> None:
        """Training augmentation (:mod:`tokengeo.data.augment`): ``crop_padding``, ``hflip``."""
        unknown = sorted(set(options) - set(cls.OPTIONS))
        if unknown:
            raise ConfigError(f"task {cls.name!r}: unknown task_options {unknown}; valid are "
                              f"{sorted(cls.OPTIONS)}")
        pad, flip = options.get("crop_padding", 0), options.get("hflip", False)
        if isinstance(pad, bool) or not isinstance(pad, int) or not 0 <= pad <= 1024:
            raise ConfigError(f"task_options.crop_padding={pad!r} must be "
                              f"{cls.OPTIONS['crop_padding']}, at most 1024")
        if not isinstance(flip, bool):
            raise ConfigError(f"task_options.hflip={flip!r} must be {cls.OPTIONS['hflip']}")

    def batch(self, split: str, idx: torch.Tensor) -> Batch:
        images, labels = self.data.split(split)[idx]  # (B, C, H, W) uint8, (B,)
        if split == "train" and self.options:  # evaluation never augments
            from tokengeo.data.augment import augment

            images = augment(images, self.options.get("crop_padding", 0),
                             self.options.get("hflip", False))
        return Batch(self.data.normalize(images), labels)


@register_task
class TextClassification(_Classification):
    name = kind = "text-classification"
    families = ("encoder", "ltransformer")

    @staticmethod
    def model_sizes(data: Any) -> dict[str, Any]:
        return {"num_classes": data.num_classes, "vocab_size": data.vocab_size,
                "max_len": data.max_len, "pad_id": data.pad_id}

    def batch(self, split: str, idx: torch.Tensor) -> Batch:
        ids, mask, labels = self.data.split(split)[idx]  # (B, L), (B, L), (B,)
        length = max(1, int(mask.sum(dim=1).max()))  # drop columns that are padding only
        return Batch(ids[:, :length], labels, mask[:, :length])


@register_task
class LanguageModeling(Task):
    name = kind = "language-modeling"
    families = ("gpt", "hf-lm")
    unit = "tok"
    stat_names = ("loss_sum", "tokens")
    eval_splits = ("val",)

    def __init__(self, data: Any, model_config: Any, options: dict | None = None) -> None:
        super().__init__(data, model_config, options)
        block = model_config.block_size
        self.windows = {s: data.windows(s, block) for s in ("train", "val")}

    @staticmethod
    def model_sizes(data: Any) -> dict[str, Any]:
        return {"vocab_size": data.vocab_size}

    def num_examples(self, split: str) -> int:
        return len(self.windows[split])

    def sampler(self, batch_size: int, seed: int, rank: int = 0, world_size: int = 1):
        return RandomWindowSampler(self.num_examples("train"), batch_size, seed,
                                   rank=rank, world_size=world_size)

    def eval_indices(self, split: str, max_examples: int) -> torch.Tensor:
        """Starts of non-overlapping windows, evenly thinned to ``max_examples``."""
        return self.windows[split].eval_starts(max_examples or None)

    def batch(self, split: str, idx: torch.Tensor) -> Batch:
        x, y = self.windows[split][idx]  # (B, T), (B, T)
        return Batch(x, y)

    def items(self, batch: Batch) -> int:
        return batch.targets.numel()

    def loss(self, logits: torch.Tensor, batch: Batch) -> torch.Tensor:
        return F.cross_entropy(logits.float().flatten(0, 1), batch.targets.flatten())

    def stats(self, logits: torch.Tensor, batch: Batch) -> torch.Tensor:
        targets = batch.targets.flatten()  # (B*T,)
        loss_sum = F.cross_entropy(logits.float().flatten(0, 1), targets, reduction="sum")
        n = torch.tensor(targets.numel(), device=targets.device)
        return torch.stack([loss_sum.double(), n.double()])

    def metrics(self, sums: torch.Tensor, split: str) -> dict[str, float]:
        """Bits per character divide bits per token by the split's characters per token
        (1 for a character tokenizer; for BPE, the ratio over the split's whole text)."""
        loss_sum, tokens = sums.tolist()
        loss = loss_sum / tokens
        bits_per_token = loss / math.log(2)
        return {
            "loss": loss,
            "perplexity": math.exp(min(loss, 700.0)),
            "bits_per_token": bits_per_token,
            "bits_per_char": bits_per_token / self.data.characters_per_token(split),
            "tokens": int(tokens),
        }


def list_tasks() -> list[str]:
    """Names of the registered tasks (what ``--task`` accepts besides ``auto``)."""
    return list(_REGISTRY)


def task_class(name: str, data_kind: str | None = None) -> type[Task]:
    """The task ``name`` (``auto``: the supervised task of the data kind)."""
    if name == "auto":
        if data_kind is None:
            raise ConfigError("task='auto' needs the data kind")
        name = data_kind
    if name not in _REGISTRY:
        raise ConfigError(f"unknown task {name!r}; choose one of {['auto', *_REGISTRY]} (a "
                          "package's tasks register when it is imported: `import "
                          "tokengeo.dino` for 'dino')")
    cls = _REGISTRY[name]
    if data_kind is not None and cls.kind != data_kind:
        raise ConfigError(f"task {name!r} needs {cls.kind} data, not {data_kind} "
                          "data; pick another --data or task='auto'")
    return cls


def check_task_options(name: str, options: dict) -> None:
    """Validate the task name and its ``task_options`` before anything is loaded."""
    if name == "auto":
        if options:
            raise ConfigError(f"task_options {sorted(options)} need an explicit --task")
        return
    task_class(name).check_options(options)


def data_options(cfg: Any) -> dict[str, Any]:
    """``cfg.data_options``, plus the tokenizer of a model that brings its own (``hf:``
    models): their text is encoded with the model's tokenizer, never another one."""
    from tokengeo.data import dataset_options

    options = dict(cfg.data_options)
    entry = get_entry(cfg.model)
    if entry.tokenizer is None:
        return options
    if "tokenizer" in options:
        raise ConfigError(f"model {cfg.model!r} brings its own tokenizer; drop "
                          f"data_options.tokenizer={options['tokenizer']!r}")
    if "tokenizer" not in dataset_options(cfg.data):
        raise ConfigError(f"model {cfg.model!r} encodes text with its own tokenizer, but data "
                          f"{cfg.data!r} takes no tokenizer option; use a text data set with "
                          "a free tokenizer (e.g. --data shakespeare, not shakespeare-char)")
    options["tokenizer"] = entry.tokenizer()
    return options


def build_task(cfg: Any, data: Any) -> Task:
    """The task of a validated :class:`~tokengeo.train.config.TrainConfig` on ``data``; its
    ``model_config`` is the model config, built here (the one build of a run) and sized
    from the data."""
    cls = task_class(cfg.task, data.kind)
    cls.check_family(cfg.model, get_entry(cfg.model).family)
    model_cfg = cfg.model_config(**cls.model_sizes(data))
    return cls(data, model_cfg, cfg.task_options)
