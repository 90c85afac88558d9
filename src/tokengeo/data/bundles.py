"""Dataset bundles: what ``load_dataset`` returns, one dataclass per kind of task.

``bundle.kind`` says which task a bundle fits: ``"image-classification"``,
``"text-classification"`` or ``"language-modeling"``. Splits are torch-``Dataset``-like:
``len(split)`` and ``split[idx]`` with an int, slice or index tensor.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import torch

from tokengeo.checks import check_choice
from tokengeo.data.tokenizer import Tokenizer
from tokengeo.data.windows import TokenWindows
from tokengeo.errors import ConfigError


@dataclass
class ImageSplit:
    images: torch.Tensor  # (N, C, H, W) uint8 in [0, 255]
    labels: torch.Tensor  # (N,) int64 in [0, num_classes)

    def __len__(self) -> int:
        return self.labels.shape[0]

    def __getitem__(self, idx) -> tuple[torch.Tensor, torch.Tensor]:
        return self.images[idx], self.labels[idx]


@dataclass
class TextSplit:
    input_ids: torch.Tensor  # (N, L) int64, right-padded with pad_id
    attention_mask: torch.Tensor  # (N, L) int64: 1 = real token, 0 = padding
    labels: torch.Tensor  # (N,) int64 in [0, num_classes)
    texts: list[str]  # (N,) the raw texts, row i encoded as input_ids[i]

    def __len__(self) -> int:
        return self.labels.shape[0]

    def __getitem__(self, idx) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return self.input_ids[idx], self.attention_mask[idx], self.labels[idx]


@dataclass
class ImageClassificationData:
    name: str
    train: ImageSplit
    val: ImageSplit
    test: ImageSplit
    num_classes: int
    class_names: list[str]
    image_shape: tuple[int, int, int]  # (C, H, W)
    mean: tuple[float, ...] = field(init=False)  # per channel, of train images / 255
    std: tuple[float, ...] = field(init=False)
    kind: ClassVar[str] = "image-classification"

    def __post_init__(self) -> None:
        x = self.train.images.to(torch.float64) / 255.0  # (N, C, H, W)
        self.mean = tuple(x.mean(dim=(0, 2, 3)).tolist())
        self.std = tuple(x.std(dim=(0, 2, 3)).tolist())
        images = self.train.images  # (N, C, H, W) uint8
        lo, hi = images.amin(dim=(0, 2, 3)), images.amax(dim=(0, 2, 3))  # (C,) each
        flat = (lo == hi).tolist()
        if all(flat):
            raise ConfigError(
                f"{self.name}: every pixel of the training images has the same value "
                f"({int(lo[0])}), so they cannot be normalised (std 0) and carry nothing to "
                "learn; check the images"
            )
        # A constant channel among varying ones normalises to 0 (std 1 instead of 0).
        self.std = tuple(1.0 if f else s for f, s in zip(flat, self.std, strict=True))

    def split(self, name: str) -> ImageSplit:
        check_choice("split", name, ["train", "val", "test"])
        return getattr(self, name)

    def normalize(self, images: torch.Tensor) -> torch.Tensor:
        """uint8 images (B, C, H, W) -> float32 ``(x / 255 - mean) / std`` per channel."""
        return self.standardize(images.to(torch.float32) / 255.0)

    def standardize(self, x: torch.Tensor) -> torch.Tensor:
        """Float images in [0, 1] (B, C, H, W) -> ``(x - mean) / std`` per channel."""
        mean = torch.tensor(self.mean, dtype=x.dtype, device=x.device)
        std = torch.tensor(self.std, dtype=x.dtype, device=x.device)
        return (x - mean[:, None, None]) / std[:, None, None]


@dataclass
class TextClassificationData:
    name: str
    train: TextSplit
    val: TextSplit
    test: TextSplit
    num_classes: int
    class_names: list[str]
    tokenizer: Tokenizer
    vocab_size: int
    max_len: int
    pad_id: int
    kind: ClassVar[str] = "text-classification"

    def split(self, name: str) -> TextSplit:
        check_choice("split", name, ["train", "val", "test"])
        return getattr(self, name)


@dataclass
class LanguageModelData:
    name: str
    train_tokens: torch.Tensor  # (N_train,) int64, documents joined in order
    val_tokens: torch.Tensor  # (N_val,) int64
    vocab_size: int
    tokenizer: Tokenizer
    train_documents: list[str]  # names of the documents (works, files) in each split
    val_documents: list[str]
    train_characters: int  # characters of text behind each stream (for bits per character)
    val_characters: int
    kind: ClassVar[str] = "language-modeling"

    def tokens(self, split: str) -> torch.Tensor:
        check_choice("split", split, ["train", "val"])
        return self.train_tokens if split == "train" else self.val_tokens

    def characters_per_token(self, split: str) -> float:
        """Bits per character = (mean token loss in nats) / ln 2 / characters_per_token."""
        n_chars = self.train_characters if split == "train" else self.val_characters
        return n_chars / self.tokens(split).shape[0]

    def windows(self, split: str, block_size: int) -> TokenWindows:
        """(x, y) windows of ``block_size`` over a split's token stream."""
        return TokenWindows(self.tokens(split), block_size)
