"""Image classification sources: Fashion-MNIST, scikit-learn digits, Animal-MNIST.

Images come back as uint8 (N, C, H, W) in [0, 255] with int64 labels. Validation is a
seeded stratified cut of the training data; the test set is the official one where the
source has one (Fashion-MNIST) and a seeded stratified cut otherwise.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch

from tokengeo._deps import require
from tokengeo.data import sources
from tokengeo.data.bounded import BoundedReader, corrupt, read_bounded
from tokengeo.data.bundles import ImageClassificationData, ImageSplit
from tokengeo.data.safe_pickle import load_array
from tokengeo.data.splits import stratified_split
from tokengeo.errors import ConfigError, DataNotFoundError

FASHION_CLASSES = [
    "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
    "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot",
]  # fmt: skip
# The animal-mnist README lists the classes alphabetically but states no label -> name map;
# this one was checked by eye on a grid of 8 training images per label (all matched).
ANIMAL_CLASSES = [
    "bear", "bird", "cat", "cow", "dog", "elephant", "giraffe", "horse", "sheep", "zebra",
]  # fmt: skip
# The most bytes each file can hold (decompressed): reads stop there (tokengeo.data.bounded).
FASHION_BYTES = {
    "train-images-idx3-ubyte.gz": 60000 * 28 * 28, "train-labels-idx1-ubyte.gz": 60000,
    "t10k-images-idx3-ubyte.gz": 10000 * 28 * 28, "t10k-labels-idx1-ubyte.gz": 10000,
}  # fmt: skip
ANIMAL_BYTES = {"animal_data_version_3.gz": 10000 * 28 * 28,  # uint8 images
                "animal_label_version_3.gz": 10000 * 8}  # int64 labels
PICKLE_OVERHEAD = 4096  # opcodes around a pickled array's bytes (~170 in the real files)


def read_idx(path: Path, max_bytes: int = max(FASHION_BYTES.values())) -> np.ndarray:
    """An idx file (optionally gzip'd): magic ``0x00 0x00 dtype ndim``, ndim big-endian
    uint32 sizes, then ``prod(sizes)`` bytes. Only unsigned-byte (0x08) payloads are
    supported; a header declaring more than ``max_bytes`` is refused before reading on, and
    so is a file holding more (or less) data than its header declares."""
    path = Path(path)
    with BoundedReader(path) as f:
        magic = f.read(4)
        if len(magic) < 4 or magic[:2] != b"\x00\x00" or magic[2] != 0x08:
            raise corrupt(path, f"is not a uint8 idx file (header {magic.hex()})")
        ndim = magic[3]
        shape = tuple(int(s) for s in np.frombuffer(f.read_exactly(4 * ndim, "the header"),
                                                    ">u4"))
        size = math.prod(shape)
        if size > max_bytes:
            raise corrupt(path, f"declares shape {shape} ({size:,} bytes), more than the "
                          f"{max_bytes:,} bytes the data set can hold")
        data = f.read_exactly(size, f"shape {shape}")
        if f.read(1):
            raise corrupt(path, f"holds more data than its header's shape {shape}")
    return np.frombuffer(data, np.uint8).reshape(shape)


def _idx(path: Path, max_bytes: int) -> np.ndarray:
    """:func:`read_idx`, with a corrupt or unreadable file refused in one line naming it."""
    try:
        return read_idx(path, max_bytes)
    except (OSError, EOFError, IndexError) as exc:  # gzip.BadGzipFile is an OSError
        raise DataNotFoundError(f"{path} cannot be read ({type(exc).__name__}: {exc}); "
                                f"reinstall it: {sources.FASHION_MNIST.install}") from None


def _split(images: torch.Tensor, labels: torch.Tensor, idx: torch.Tensor) -> ImageSplit:
    return ImageSplit(images[idx].contiguous(), labels[idx].contiguous())


def image_bundle(
    name: str,
    images: torch.Tensor,
    labels: torch.Tensor,
    class_names: list[str],
    fractions: tuple[float, ...],
    seed: int,
    test: ImageSplit | None = None,
) -> ImageClassificationData:
    """Cut (train, val[, test]) from ``images`` (N, C, H, W) uint8 and ``labels`` (N,) by
    :func:`stratified_split` with ``fractions`` = (val[, test]); ``test`` if given is kept."""
    parts = stratified_split(labels, fractions, seed)
    for split, idx in zip(("train", "val", "test"), parts, strict=False):
        if len(idx) == 0:
            raise ConfigError(
                f"{name}: the {split} split is empty ({len(labels)} examples in "
                f"{len(torch.unique(labels))} classes, fractions {fractions}): each class "
                "needs enough examples for every split; add examples or merge classes"
            )
    splits = [_split(images, labels, idx) for idx in parts]
    train, val, test = (*splits, test) if test is not None else splits
    return ImageClassificationData(
        name, train, val, test, len(class_names), list(class_names), tuple(images.shape[1:])
    )


def load_fashion_mnist(
    root: str | None = None, val_fraction: float = 0.1, seed: int = 0
) -> ImageClassificationData:
    """Fashion-MNIST: 60000 train (minus ``val_fraction`` for val) / 10000 test, 1x28x28."""
    d = sources.FASHION_MNIST.locate(root)

    def idx(name: str) -> np.ndarray:
        return _idx(d / name, FASHION_BYTES[name])

    x_train = torch.from_numpy(idx("train-images-idx3-ubyte.gz").copy())
    y_train = torch.from_numpy(idx("train-labels-idx1-ubyte.gz").astype(np.int64))
    x_test = torch.from_numpy(idx("t10k-images-idx3-ubyte.gz").copy())
    y_test = torch.from_numpy(idx("t10k-labels-idx1-ubyte.gz").astype(np.int64))
    test = ImageSplit(x_test.unsqueeze(1), y_test)  # (10000, 1, 28, 28)
    return image_bundle(
        "fashion-mnist", x_train.unsqueeze(1), y_train, FASHION_CLASSES,
        (val_fraction,), seed, test,
    )  # fmt: skip


def load_digits(
    val_fraction: float = 0.1, test_fraction: float = 0.2, seed: int = 0
) -> ImageClassificationData:
    """scikit-learn's 1797 8x8 digits; values 0..16 are rescaled to uint8 ``round(v*255/16)``."""
    datasets = require("sklearn.datasets")
    raw = datasets.load_digits()
    values = torch.from_numpy(raw.images)  # (1797, 8, 8) float64 in [0, 16]
    images = (values * 255.0 / 16.0).round().to(torch.uint8).unsqueeze(1)  # (N, 1, 8, 8)
    labels = torch.from_numpy(raw.target.astype(np.int64))
    names = [str(int(c)) for c in raw.target_names]
    return image_bundle("digits", images, labels, names, (val_fraction, test_fraction), seed)


def load_animal_mnist(
    root: str | None = None, val_fraction: float = 0.1, test_fraction: float = 0.2, seed: int = 0
) -> ImageClassificationData:
    """Animal-MNIST: 10000 28x28 grayscale animal shapes, 10 classes of 1000.

    Its files are gzip'd pickles; they are read with a restricted unpickler that only
    rebuilds numpy arrays (see :mod:`tokengeo.data.safe_pickle`), no larger than the data
    set (decompression stops there too)."""
    d = sources.ANIMAL_MNIST.locate(root)

    def array(name: str) -> np.ndarray:
        raw = read_bounded(d / name, ANIMAL_BYTES[name] + PICKLE_OVERHEAD)
        return load_array(raw, max_bytes=ANIMAL_BYTES[name], what=str(d / name))

    data, label = array("animal_data_version_3.gz"), array("animal_label_version_3.gz")
    images = torch.from_numpy(np.ascontiguousarray(data, dtype=np.uint8)).reshape(-1, 1, 28, 28)
    labels = torch.from_numpy(label.astype(np.int64)).flatten()
    fractions = (val_fraction, test_fraction)
    return image_bundle("animal-mnist", images, labels, ANIMAL_CLASSES, fractions, seed)
