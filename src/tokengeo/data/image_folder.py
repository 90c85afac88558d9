"""ImageNet (or any image folder of photographs of mixed sizes), resized to one square size.

Layout: ``<root>/<class>/<image>`` with the split made here, or ``<root>/train/<class>/...``
beside ``<root>/val/<class>/...`` (ImageNet's layout once its validation images are sorted
into class folders; ``test/`` is read the same way), which is kept as the test split. Each
image is read with Pillow as RGB, its shorter side resized to ``image_size`` (bicubic) and
its centre cropped to ``image_size`` x ``image_size``, the usual evaluation transform.

Everything is held in memory as uint8: the estimate (``3 * image_size**2`` bytes per image)
is checked against this machine's memory before any image is read, and ``max_per_class``
keeps the first images of each class (in file-name order) to fit.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from tokengeo.data.bounded import load_image
from tokengeo.data.bundles import ImageClassificationData, ImageSplit
from tokengeo.data.images import image_bundle
from tokengeo.data.user import IMAGE_SUFFIXES, _classes, _pil
from tokengeo.errors import ConfigError, DataNotFoundError

HELD_OUT = ("val", "test")  # a folder beside train/ that is the test split


def center_square(im, size: int):
    """``im`` with its shorter side resized to ``size`` and its centre ``size`` x ``size``."""
    Image = _pil()
    w, h = im.size
    scale = size / min(w, h)
    w2, h2 = max(size, round(w * scale)), max(size, round(h * scale))
    im = im.resize((w2, h2), Image.Resampling.BICUBIC)
    left, top = (w2 - size) // 2, (h2 - size) // 2
    return im.crop((left, top, left + size, top + size))


def _files(folder: Path, classes: list[str], max_per_class: int | None) -> list[tuple[Path, int]]:
    files = []
    for k, cls in enumerate(classes):
        if not (folder / cls).is_dir():  # a held-out split may lack a class
            continue
        images = sorted(f for f in (folder / cls).iterdir()
                        if f.is_file() and f.suffix.lower() in IMAGE_SUFFIXES)
        files += [(f, k) for f in images[:max_per_class]]
    return files


def _read(files: list[tuple[Path, int]], size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Images (N, 3, size, size) uint8 and labels (N,) of ``files``."""
    Image = _pil()
    images = np.empty((len(files), size, size, 3), np.uint8)
    for i, (path, _) in enumerate(files):
        images[i] = np.asarray(center_square(load_image(Image, path, "RGB"), size))
    labels = torch.tensor([k for _, k in files], dtype=torch.long)
    return torch.from_numpy(images).permute(0, 3, 1, 2).contiguous(), labels


def _check_fits(root: Path, n: int, size: int) -> None:
    from tokengeo.checks import check_memory

    check_memory(f"{root}: {n:,} images of 3x{size}x{size}", 2.2 * n * 3 * size * size,
                 "set data_options max_per_class (images per class) or a smaller image_size")


def load_image_folder(root: str | None = None, image_size: int = 224,
                      max_per_class: int | None = None, val_fraction: float = 0.1,
                      test_fraction: float = 0.1, seed: int = 0) -> ImageClassificationData:
    """The image folder at ``root`` (see the module) as 3 x ``image_size`` x ``image_size``
    images; ``test_fraction`` is used only when the folder has no ``val/`` or ``test/``."""
    if root is None:
        raise DataNotFoundError("an image folder needs its path: --data imagenet:/path/to/"
                                "imagenet (train/<class>/*.JPEG and val/<class>/*.JPEG) or "
                                "--data image-folder:/path/to/<class>/*.png")
    path = Path(root).expanduser()
    if not path.exists():
        raise DataNotFoundError(f"{path} does not exist: give the image folder's path")
    if not path.is_dir():
        raise DataNotFoundError(f"{path} is not a folder: give a folder of class subfolders "
                                "(<class>/*.jpg), or train/ and val/ holding them")
    if max_per_class is not None and max_per_class < 1:
        raise ConfigError(f"max_per_class={max_per_class!r} must be a whole number >= 1")
    held_out = next((path / h for h in HELD_OUT if (path / h).is_dir()), None)
    train_dir = path / "train" if held_out is not None and (path / "train").is_dir() else path
    classes = _classes(train_dir)
    train = _files(train_dir, classes, max_per_class)
    test = _files(held_out, classes, max_per_class) if train_dir != path else []
    extra = sorted(set(_classes(held_out)) - set(classes)) if train_dir != path else []
    if extra:
        raise ConfigError(f"{held_out} has class folders {extra[:5]} that {train_dir} lacks; "
                          "every held-out class needs training images")
    if not train:
        raise DataNotFoundError(f"{train_dir} holds no image files ({', '.join(IMAGE_SUFFIXES)})"
                                f" in its class subfolders")
    _check_fits(path, len(train) + len(test), image_size)
    x, y = _read(train, image_size)
    if train_dir == path:
        return image_bundle(path.name, x, y, classes, (val_fraction, test_fraction), seed)
    if not test:
        raise DataNotFoundError(f"{held_out} holds no image files in the class subfolders of "
                                f"{train_dir} ({classes[:3]}...)")
    return image_bundle(path.name, x, y, classes, (val_fraction,), seed,
                        ImageSplit(*_read(test, image_size)))
