"""ImageNet-style image folders of mixed-size photographs (made here with Pillow)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tokengeo.data import load_dataset
from tokengeo.data.image_folder import center_square, load_image_folder
from tokengeo.errors import ConfigError, DataNotFoundError

Image = pytest.importorskip("PIL.Image", reason="image folders are read with Pillow")


def _photo(path, w: int, h: int, seed: int) -> np.ndarray:
    pixels = np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(path)
    return pixels


@pytest.fixture
def imagenet(tmp_path):
    """train/ and val/ of two classes (wnid-like names), JPEG-named PNGs of mixed sizes."""
    root = tmp_path / "imagenet"
    sizes = [(40, 30), (30, 50), (64, 64), (33, 20)]
    for split, n in (("train", 4), ("val", 2)):
        for k, wnid in enumerate(("n01440764", "n01443537")):
            (root / split / wnid).mkdir(parents=True)
            for i in range(n):
                w, h = sizes[i]
                _photo(root / split / wnid / f"{wnid}_{i}.png", w, h, 10 * k + i)
    return root


def test_center_square_matches_a_slow_reference():
    pixels = np.random.default_rng(0).integers(0, 256, (30, 50, 3), dtype=np.uint8)
    im = Image.fromarray(pixels)
    out = np.asarray(center_square(im, 16))
    # reference: shorter side 30 -> 16, longer 50 -> round(50 * 16 / 30) = 27, centre crop
    resized = np.asarray(im.resize((27, 16), Image.Resampling.BICUBIC))
    assert out.shape == (16, 16, 3) and np.array_equal(out, resized[:, 5:21])


def test_imagenet_layout_keeps_val_as_the_test_split(imagenet):
    data = load_dataset(f"imagenet:{imagenet}", image_size=16, val_fraction=0.25)
    assert data.image_shape == (3, 16, 16) and data.class_names == ["n01440764", "n01443537"]
    assert len(data.test) == 4 and sorted(data.test.labels.tolist()) == [0, 0, 1, 1]
    assert len(data.train) + len(data.val) == 8
    first = Image.open(imagenet / "val" / "n01440764" / "n01440764_0.png").convert("RGB")
    expected = torch.from_numpy(np.array(center_square(first, 16))).permute(2, 0, 1)
    assert torch.equal(data.test.images[0], expected)  # file-name order, class by class


def test_max_per_class_keeps_the_first_files(imagenet):
    data = load_image_folder(str(imagenet), image_size=8, max_per_class=2, val_fraction=0.5)
    assert len(data.train) + len(data.val) == 4 and len(data.test) == 4
    with pytest.raises(ConfigError, match="max_per_class=0"):
        load_dataset(f"image-folder:{imagenet}", max_per_class=0)


def test_a_flat_folder_is_split_here(imagenet):
    data = load_dataset(f"image-folder:{imagenet / 'train'}", image_size=8,
                        val_fraction=0.25, test_fraction=0.25)
    assert len(data.train) + len(data.val) + len(data.test) == 8


@pytest.mark.parametrize("make, message", [
    (lambda root: root, "does not exist"),
    (lambda root: (root.mkdir(), root)[1], "has no class subfolders"),
    (lambda root: (root.parent.joinpath("f.txt").write_text("x"), root.parent / "f.txt")[1],
     "is not a folder"),
])
def test_missing_or_empty_folders_are_refused(tmp_path, make, message):
    path = make(tmp_path / "root")
    with pytest.raises((ConfigError, DataNotFoundError), match=message):
        load_dataset(f"imagenet:{path}")


def test_a_corrupt_image_and_a_foreign_val_class_are_refused(imagenet):
    bad = imagenet / "train" / "n01443537" / "n01443537_9.jpg"
    bad.write_bytes(b"\xff\xd8 not really a jpeg")
    with pytest.raises(ConfigError, match="cannot read the image .*n01443537_9.jpg"):
        load_image_folder(str(imagenet), image_size=8)
    bad.unlink()
    (imagenet / "val" / "n99999999").mkdir()
    with pytest.raises(ConfigError, match=r"class folders \['n99999999'\]"):
        load_image_folder(str(imagenet), image_size=8)


def test_an_image_folder_too_large_for_memory_is_refused_before_reading(imagenet,
                                                                         monkeypatch):
    import tokengeo.checks as checks

    monkeypatch.setattr(checks, "available_memory", lambda: 10_000)
    with pytest.raises(ConfigError, match="12 images of 3x224x224 needs about .*max_per_class"):
        load_image_folder(str(imagenet))
