"""``--task dino``: self-supervised pre-training of a ViT on an image dataset.

Training batches are DINO's multi-crop views of the training images (labels unused);
evaluation is the weighted k-NN accuracy of the teacher backbone's features on the
evaluated split, with ``knn_bank`` training images as the bank, plus the spread of the
features (a collapse check that becomes a warning in ``summary.json``).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from tokengeo.data.splits import evenly_spaced
from tokengeo.dino.augment import multi_crop
from tokengeo.dino.evaluate import (
    collapse_warning,
    embedding_spread,
    extract_features,
    knn_accuracy,
)
from tokengeo.dino.model import DINO, DINOConfig
from tokengeo.errors import ConfigError
from tokengeo.train.tasks import Batch, ImageClassification, register_task


def dino_config(options: dict, model_config: Any) -> DINOConfig:
    """``task_options`` resolved for a ViT config: global views default to the model's
    image size, and both crop sizes must be whole numbers of patches."""
    dino = DINOConfig.from_options(options)
    if dino.crops.global_size is None:  # global views at the model's image size
        dino.crops.global_size = model_config.image_size
    patch = model_config.patch_size
    for name in ("global_size", "local_size"):
        size = getattr(dino.crops, name)
        if size % patch:
            raise ConfigError(f"crops.{name}={size} is not a multiple of patch_size={patch}; "
                              f"pick e.g. {patch * (size // patch + 1)}")
    return dino


@register_task
class DINOTask(ImageClassification):
    name = "dino"
    families = ("vit",)
    stat_names = ()

    def __init__(self, data: Any, model_config: Any, options: dict | None = None) -> None:
        super().__init__(data, model_config)
        self.options = dict(options or {})
        self.dino = dino_config(self.options, model_config)

    @classmethod
    def check_options(cls, options: dict) -> None:
        DINOConfig.from_options(options)

    @classmethod
    def wrap(cls, model: nn.Module, options: dict, total_steps: int) -> nn.Module:
        return DINO(model, dino_config(options, model.config), total_steps)

    def batch(self, split: str, idx: torch.Tensor) -> Batch:
        images, labels = self.data.split(split)[idx]  # (B, C, H, W) uint8, (B,)
        if split != "train":
            return Batch(self.data.normalize(images), labels)
        globals_, locals_ = multi_crop(images.float() / 255, self.dino.crops)
        locals_ = None if locals_ is None else self.data.standardize(locals_)
        return Batch((self.data.standardize(globals_), locals_), labels)

    def loss(self, output: torch.Tensor, batch: Batch) -> torch.Tensor:
        return output  # DINO's forward returns its loss

    def before_update(self, model: DINO) -> None:
        model.cancel_last_layer_gradients()

    def after_update(self, model: DINO) -> None:
        model.update_teacher()

    def stats(self, logits, batch):  # evaluation is k-NN, see evaluate()
        raise NotImplementedError("the dino task evaluates with evaluate()")

    def metrics(self, sums, split):
        raise NotImplementedError("the dino task evaluates with evaluate()")

    @torch.no_grad()
    def evaluate(self, model: DINO, split: str, max_examples: int,
                 batch_size: int) -> dict[str, float]:
        """k-NN accuracy of the teacher backbone on ``split`` (computed whole on every rank)."""
        def feats(part: str, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            images, labels = self.data.split(part)[idx]
            x = self.data.normalize(images).to(model.center.device)
            return extract_features(model.teacher, x, batch_size).pooled.cpu(), labels

        bank, bank_y = feats("train", evenly_spaced(self.num_examples("train"),
                                                    self.dino.knn_bank))
        query, query_y = feats(split, self.eval_indices(split, max_examples))
        acc = knn_accuracy(bank, bank_y, query, query_y, self.data.num_classes,
                           self.dino.knn_k, self.dino.knn_temperature)
        return {"knn_accuracy": acc, "embedding_spread": embedding_spread(query),
                "examples": len(query_y)}

    def summary_extras(self, model: DINO, final: dict[str, dict]) -> dict[str, Any]:
        """The final test k-NN accuracy and a collapse warning when the features collapsed."""
        test = final.get("test", {})
        warning = collapse_warning(test.get("embedding_spread", float("nan")))
        warnings = [warning] if warning else []
        return {"knn_accuracy": test.get("knn_accuracy"), "warnings": warnings,
                "teacher_updates": int(model.updates)}
