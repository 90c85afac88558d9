"""Random crop / flip augmentation: equal to a per-image reference, and only in training."""

import pytest
import torch
import torch.nn.functional as F

from tokengeo.data.augment import augment, random_crop, random_hflip
from tokengeo.errors import ConfigError
from tokengeo.train import TrainConfig, Trainer


def _reference_crop(images, padding, dy, dx):
    """One image at a time: pad, then slice at (dy, dx)."""
    h, w = images.shape[-2:]
    out = []
    for img, y, x in zip(images, dy.tolist(), dx.tolist(), strict=True):
        padded = F.pad(img, (padding,) * 4)
        out.append(padded[:, y:y + h, x:x + w])
    return torch.stack(out)


@pytest.mark.parametrize("padding", [1, 3, 4])
def test_random_crop_equals_the_per_image_reference(padding):
    images = torch.randint(1, 256, (9, 3, 7, 7), dtype=torch.uint8)
    g1, g2 = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    got = random_crop(images, padding, g1)
    dy = torch.randint(0, 2 * padding + 1, (9,), generator=g2)
    dx = torch.randint(0, 2 * padding + 1, (9,), generator=g2)
    assert got.dtype == images.dtype and got.shape == images.shape
    assert torch.equal(got, _reference_crop(images, padding, dy, dx))


def test_random_crop_keeps_every_pixel_in_range_and_draws_every_offset():
    images = torch.randint(1, 256, (400, 1, 5, 5), dtype=torch.uint8)  # no zero pixel
    out = random_crop(images, 2, torch.Generator().manual_seed(0))
    zeros = (out == 0).flatten(1).sum(1)  # padding pixels brought in per image
    assert zeros.max() <= 5 * 5 - 3 * 3  # an offset of at most 2 keeps a 3x3 core
    assert (zeros == 0).any() and (zeros == 16).any()  # the centre and a far corner drawn


def test_random_hflip_mirrors_about_half_the_images_exactly():
    images = torch.randn(2000, 1, 4, 6)
    out = random_hflip(images, torch.Generator().manual_seed(1))
    flipped = (out == images.flip(-1)).flatten(1).all(1)
    kept = (out == images).flatten(1).all(1)
    assert bool((flipped ^ kept).all())  # every image either mirrored or left alone
    assert 900 < int(flipped.sum()) < 1100


def test_no_options_is_the_identity():
    images = torch.randn(3, 1, 4, 4)
    assert torch.equal(augment(images), images)


def _cfg(tmp_path, name, **options):
    return TrainConfig(model="vit-tiny", data="digits", task="image-classification",
                       task_options=options, steps=1, batch_size=8, eval_every=0,
                       out=str(tmp_path / name), device="cpu",
                       model_overrides={"patch_size": 2, "d_model": 16})


def test_the_task_augments_training_batches_only(tmp_path):
    trainer = Trainer(_cfg(tmp_path, "aug", crop_padding=2, hflip=True), progress=False)
    idx = torch.arange(16)
    torch.manual_seed(0)
    a = trainer.task.batch("train", idx).inputs
    torch.manual_seed(1)
    b = trainer.task.batch("train", idx).inputs
    assert not torch.equal(a, b)  # the draws differ
    assert torch.equal(trainer.task.batch("test", idx).inputs,
                       trainer.task.batch("test", idx).inputs)
    plain = Trainer(_cfg(tmp_path, "plain"), progress=False)
    assert torch.equal(plain.task.batch("test", idx).inputs,
                       trainer.task.batch("test", idx).inputs)


@pytest.mark.parametrize("options, word", [({"crop_padding": -1}, "crop_padding"),
                                           ({"crop_padding": 2.5}, "crop_padding"),
                                           ({"hflip": "yes"}, "hflip"),
                                           ({"rotate": 10}, "rotate")])
def test_bad_augmentation_options_are_refused_before_training(tmp_path, options, word):
    with pytest.raises(ConfigError, match=word):
        _cfg(tmp_path, "bad", **options).validate()
