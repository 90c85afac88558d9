"""Training-time image augmentation: random crops of a zero-padded image and horizontal flips.

The standard augmentation of small-image classifiers (He et al. 2016, "Deep Residual Learning
for Image Recognition", Sec. 4.2: "4 pixels are padded on each side, and a 32×32 crop is
randomly sampled from the padded image or its horizontal flip"; torchvision's
``RandomCrop(size, padding)`` + ``RandomHorizontalFlip()``), applied to a whole batch at
once. Draws come from ``generator`` (default: torch's global generator, which a
:class:`~tokengeo.train.Trainer` seeds and saves in its checkpoints, so a resumed run draws
the same crops as an uninterrupted one).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def random_crop(images: torch.Tensor, padding: int,
                generator: torch.Generator | None = None) -> torch.Tensor:
    """Each image of ``images`` (B, C, H, W) zero-padded by ``padding`` on every side, then
    cropped back to H×W at a uniformly drawn offset (dy, dx) ∈ {0 … 2·padding}²."""
    if padding == 0:
        return images
    b, c, h, w = images.shape
    padded = F.pad(images, (padding, padding, padding, padding))  # (B, C, H+2p, W+2p)
    dy = torch.randint(0, 2 * padding + 1, (b,), generator=generator)  # (B,)
    dx = torch.randint(0, 2 * padding + 1, (b,), generator=generator)  # (B,)
    rows = (dy[:, None] + torch.arange(h))[:, None, :, None]  # (B, 1, H, 1)
    cols = (dx[:, None] + torch.arange(w))[:, None, None, :]  # (B, 1, 1, W)
    batch = torch.arange(b)[:, None, None, None]  # (B, 1, 1, 1)
    chans = torch.arange(c)[None, :, None, None]  # (1, C, 1, 1)
    return padded[batch, chans, rows, cols]  # (B, C, H, W)


def random_hflip(images: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """Each image of ``images`` (B, C, H, W) mirrored left-right with probability 1/2."""
    flip = torch.rand(images.shape[0], generator=generator) < 0.5  # (B,)
    return torch.where(flip[:, None, None, None], images.flip(-1), images)


def augment(images: torch.Tensor, crop_padding: int = 0, hflip: bool = False,
            generator: torch.Generator | None = None) -> torch.Tensor:
    """:func:`random_crop` (when ``crop_padding`` > 0), then :func:`random_hflip` (when
    ``hflip``), of a batch (B, C, H, W)."""
    images = random_crop(images, crop_padding, generator)
    return random_hflip(images, generator) if hflip else images
