"""DINO's multi-crop augmentation, batched and written with torch ops only (no torchvision).

Caron et al., "Emerging Properties in Self-Supervised Vision Transformers", ICCV 2021,
Sec. 3.1 and Appendix: two global crops (area scale in ``global_scale``) and several local
crops (``local_scale``), each randomly resized-cropped, flipped, intensity-jittered with
probability 0.8, Gaussian-blurred (global 1 always, global 2 with p = 0.1, locals with
p = 0.5) and, on global 2 only, solarised with p = 0.2.

Every random draw uses torch's global generator, so a seeded run is reproducible and a
resumed run (whose checkpoint holds the RNG state) continues with the same crops.
Images are floats in [0, 1] throughout; they stay in [0, 1] after every operation.
Our images are 28 x 28, so blur widths are in pixels of the crop (``blur_sigma``) rather
than DINO's 0.1-2.0 at 224 px, and colour jitter is brightness + contrast (+ saturation
for colour images); hue jitter and grey-scale conversion are left out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from tokengeo.checks import check_positive, check_range
from tokengeo.errors import ConfigError


@dataclass
class CropConfig:
    """Sizes and strengths of the multi-crop views at 28 px. Milder than DINO's 224-px
    defaults (global 0.4-1, local 0.05-0.4, 6 locals, blur 0.1-2 px of 224): a 28-px
    Fashion-MNIST crop of 5% of the area is a patch of background or texture; two local
    crops instead of six also make a step ~1.4x cheaper (README, "Self-supervised DINO")."""

    global_size: int | None = None  # None: the model's image size
    local_size: int = 16
    n_local: int = 2
    global_scale: tuple[float, float] = (0.6, 1.0)
    local_scale: tuple[float, float] = (0.25, 0.6)
    ratio: tuple[float, float] = (3 / 4, 4 / 3)
    jitter_p: float = 0.8
    brightness: float = 0.4
    contrast: float = 0.4
    saturation: float = 0.2
    blur_sigma: tuple[float, float] = (0.1, 0.5)
    solarize_p: float = 0.2

    def validate(self) -> CropConfig:
        if self.global_size is not None:
            check_positive("global_size", self.global_size)
        check_positive("local_size", self.local_size)
        check_positive("n_local", self.n_local, allow_zero=True)
        for name in ("global_scale", "local_scale", "ratio", "blur_sigma"):
            lo, hi = getattr(self, name)
            if not 0 < lo <= hi:
                raise ConfigError(f"{name}={(lo, hi)} must be an increasing positive pair")
        if self.global_scale[1] > 1 or self.local_scale[1] > 1:
            raise ConfigError("crop scales are fractions of the image area; keep them <= 1")
        for name in ("jitter_p", "solarize_p"):
            check_range(name, getattr(self, name), 0.0, 1.0)
        for name in ("brightness", "contrast", "saturation"):
            check_range(name, getattr(self, name), 0.0, 1.0)
        return self


def random_resized_crop(images: Tensor, size: int, scale: tuple[float, float],
                        ratio: tuple[float, float], flip: bool = True) -> Tensor:
    """A random box of area fraction in ``scale`` and aspect in ``ratio`` per image, resized
    to ``size`` x ``size`` (bilinear), mirrored left-right with p = 0.5.

    images (B, C, H, W) -> (B, C, size, size). Boxes too wide for the image are clipped to
    it (torchvision retries, then falls back to a centre crop; clipping keeps it batched).
    """
    B, _, H, W = images.shape
    area = torch.empty(B).uniform_(*scale)  # fraction of H * W
    log_r = torch.empty(B).uniform_(math.log(ratio[0]), math.log(ratio[1]))
    aspect = log_r.exp()  # width / height
    w = (area * aspect * H / W).sqrt().clamp(max=1.0)  # fraction of W
    h = (area / aspect * W / H).sqrt().clamp(max=1.0)  # fraction of H
    cx = (torch.rand(B) * (1 - w) + w / 2) * 2 - 1  # box centre in [-1, 1]
    cy = (torch.rand(B) * (1 - h) + h / 2) * 2 - 1
    sign = torch.where(torch.rand(B) < 0.5, -1.0, 1.0) if flip else torch.ones(B)
    theta = torch.zeros(B, 2, 3)
    theta[:, 0, 0], theta[:, 0, 2] = w * sign, cx
    theta[:, 1, 1], theta[:, 1, 2] = h, cy
    grid = F.affine_grid(theta.to(images), (B, images.shape[1], size, size),
                         align_corners=False)
    return F.grid_sample(images, grid, mode="bilinear", padding_mode="border",
                         align_corners=False)


def intensity_jitter(images: Tensor, p: float, brightness: float, contrast: float,
                     saturation: float) -> Tensor:
    """With probability ``p`` per image: x * b, then (x - mean) * c + mean, then (colour
    only) blend with the grey image by s; b, c, s uniform in [1 - strength, 1 + strength]."""
    B = images.shape[0]
    apply = (torch.rand(B) < p).to(images)[:, None, None, None]

    def factor(strength: float) -> Tensor:
        f = torch.empty(B).uniform_(1 - strength, 1 + strength).to(images)
        return 1 + apply * (f[:, None, None, None] - 1)  # 1 where not applied

    x = (images * factor(brightness)).clamp(0, 1)
    mean = x.mean(dim=(1, 2, 3), keepdim=True)
    x = ((x - mean) * factor(contrast) + mean).clamp(0, 1)
    if x.shape[1] == 3:
        grey = (x * x.new_tensor([0.299, 0.587, 0.114])[:, None, None]).sum(1, keepdim=True)
        x = ((x - grey) * factor(saturation) + grey).clamp(0, 1)
    return x


def gaussian_blur(images: Tensor, p: float, sigma: tuple[float, float]) -> Tensor:
    """With probability ``p`` per image, a separable Gaussian blur of random width in
    ``sigma`` (pixels), kernel radius ceil(3 sigma_max), reflect padding."""
    B, C, H, W = images.shape
    radius = max(1, math.ceil(3 * sigma[1]))
    s = torch.empty(B).uniform_(*sigma)
    offsets = torch.arange(-radius, radius + 1, dtype=torch.float32)
    kernel = torch.exp(-offsets[None] ** 2 / (2 * s[:, None] ** 2))  # (B, K)
    kernel = kernel / kernel.sum(1, keepdim=True)
    identity = (offsets == 0).float()[None].expand(B, -1)
    apply = (torch.rand(B) < p)[:, None]
    kernel = torch.where(apply, kernel, identity).to(images)
    k = kernel.repeat_interleave(C, dim=0)  # (B * C, K)  one kernel per (image, channel)
    x = images.reshape(1, B * C, H, W)
    x = F.conv2d(F.pad(x, (radius, radius, 0, 0), mode="reflect"), k[:, None, None, :],
                 groups=B * C)
    x = F.conv2d(F.pad(x, (0, 0, radius, radius), mode="reflect"), k[:, None, :, None],
                 groups=B * C)
    return x.reshape(B, C, H, W)


def solarize(images: Tensor, p: float, threshold: float = 0.5) -> Tensor:
    """With probability ``p`` per image, x -> 1 - x where x >= threshold."""
    apply = (torch.rand(images.shape[0]) < p).to(images.device)[:, None, None, None]
    return torch.where(apply & (images >= threshold), 1 - images, images)


def _view(images: Tensor, size: int, scale: tuple[float, float], cfg: CropConfig,
          blur_p: float, solarize_p: float) -> Tensor:
    x = random_resized_crop(images, size, scale, cfg.ratio)
    x = intensity_jitter(x, cfg.jitter_p, cfg.brightness, cfg.contrast, cfg.saturation)
    x = gaussian_blur(x, blur_p, cfg.blur_sigma)
    return solarize(x, solarize_p) if solarize_p > 0 else x


def multi_crop(images: Tensor, cfg: CropConfig) -> tuple[Tensor, Tensor | None]:
    """DINO's views of a batch of [0, 1] images (B, C, H, W) (``cfg.global_size`` set).

    Returns the two global views stacked as (2 B, C, G, G) (view-major: rows 0..B-1 are
    view 1) and the local views as (n_local B, C, S, S), or None without local crops.
    """
    g1 = _view(images, cfg.global_size, cfg.global_scale, cfg, 1.0, 0.0)
    g2 = _view(images, cfg.global_size, cfg.global_scale, cfg, 0.1, cfg.solarize_p)
    local = [_view(images, cfg.local_size, cfg.local_scale, cfg, 0.5, 0.0)
             for _ in range(cfg.n_local)]
    return torch.cat([g1, g2]), torch.cat(local) if local else None
