"""Unsupervised foreground segmentation from patch tokens, scored against object masks.

The DINO/Laplacian-heads visual (Caron et al. 2021, Fig. 1; Zhang & Papyan, arXiv
2602.09297, Sec. 5.3): project each image's patch tokens on their first principal
component and threshold. Fashion-MNIST objects sit on a black background, so the
ground-truth foreground of a patch is "more than half of its pixels are > 0".

Scoring, per image: the centred patch tokens' first principal direction u (an SVD),
scores s_p = <x_p - mean, u>; foreground = {p : s_p > 0}. A principal direction has no
sign, so the sign is chosen per image to match the mask (the larger IoU of the two);
IoU = |pred ∩ mask| / |pred ∪ mask| (1 when both are empty). The mean over images is
reported. The same sign rule applied to a random backbone gives the chance level.
"""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from tokengeo.data.splits import evenly_spaced
from tokengeo.errors import ConfigError


def foreground_share(images: Tensor, patch_size: int) -> Tensor:
    """(N, C, H, W) images -> (N, H/p · W/p) fraction of each patch's pixels above 0 in any
    channel, in [0, 1]."""
    if images.dim() != 4 or images.shape[-1] % patch_size or images.shape[-2] % patch_size:
        raise ConfigError(f"images shaped {tuple(images.shape)} do not tile into "
                          f"{patch_size}x{patch_size} patches; pass (N, C, H, W) with H and "
                          f"W multiples of the patch size")
    nonzero = (images > 0).any(dim=1, keepdim=True).double()  # (N, 1, H, W)
    return F.avg_pool2d(nonzero, patch_size).flatten(1)  # (N, P)


def foreground_masks(images: Tensor, patch_size: int, min_fraction: float = 0.5) -> Tensor:
    """uint8/float images (N, C, H, W) -> (N, H/p * W/p) bool: patches with more than
    ``min_fraction`` of their pixels above 0 in any channel."""
    return foreground_share(images, patch_size) > min_fraction


def iou(pred: Tensor, mask: Tensor) -> Tensor:
    """IoU of boolean masks over the last dim, (N,); 1 where both are empty."""
    inter = (pred & mask).sum(-1).float()
    union = (pred | mask).sum(-1).float()
    return torch.where(union > 0, inter / union.clamp_min(1), torch.ones_like(union))


def first_component_scores(patches: Tensor) -> Tensor:
    """Projections of each image's centred patch tokens (N, P, d) on their first principal
    direction, (N, P)."""
    x = patches.double() - patches.double().mean(1, keepdim=True)
    _, _, vh = torch.linalg.svd(x, full_matrices=False)  # vh (N, min(P, d), d)
    return (x @ vh[:, 0, :, None]).squeeze(-1)


def pca_iou(patches: Tensor, masks: Tensor) -> Tensor:
    """Per-image IoU (N,) of the thresholded first component (sign matched to the mask)."""
    pos = first_component_scores(patches) > 0  # (N, P)
    return torch.maximum(iou(pos, masks), iou(~pos, masks))


def pca_rgb(patches: Tensor, grid: int) -> Tensor:
    """The first three principal components of all images' patch tokens, jointly, mapped to
    RGB in [0, 1] per component (min-max): (N, grid, grid, 3). DINO's Fig. 1 visual."""
    N, P, d = patches.shape
    x = patches.reshape(N * P, d).double()
    x = x - x.mean(0)
    _, _, vh = torch.linalg.svd(x, full_matrices=False)
    comp = x @ vh[:3].T  # (N P, 3)
    if comp.shape[1] < 3:
        comp = F.pad(comp, (0, 3 - comp.shape[1]))
    lo, hi = comp.min(0).values, comp.max(0).values
    rgb = (comp - lo) / (hi - lo).clamp_min(1e-12)
    return rgb.reshape(N, grid, grid, 3).float()


def example_patch_tokens(backbone: nn.Module, data, n: int) -> tuple[Tensor, Tensor]:
    """``n`` evenly spaced test images (n, C, H, W) uint8 and the backbone's patch tokens
    on them (n, P, d): the inputs of :func:`save_pca_figure`."""
    test = data.split("test")
    images, _ = test[evenly_spaced(len(test), n)]
    device = next(backbone.parameters()).device
    with torch.no_grad():
        feats = backbone.forward_features(data.normalize(images).to(device)).cpu()
        patches = backbone.patch_tokens(feats)
    return images, patches


def pca_figure(images: Tensor, rows: dict[str, Tensor], grid: int, title: str = ""):
    """Figure: images (N, C, H, W) in the first row, then one row of PCA-RGB patch maps
    (:func:`pca_rgb`) per label of ``rows`` (label -> patch tokens (N, P, d))."""
    from tokengeo.plotting import MIN_FONT_PT, new_figure

    n = images.shape[0]
    maps = {label: pca_rgb(patches, grid) for label, patches in rows.items()}
    fig, axes = new_figure(1.2 * n, 1.25 * (1 + len(rows)) + 0.3, 1 + len(rows), n)
    for j in range(n):
        axes[0, j].imshow(images[j].float().mean(0).numpy(), cmap="gray")
        for i, rgb in enumerate(maps.values(), 1):
            axes[i, j].imshow(rgb[j].numpy(), interpolation="nearest")
    for i, label in enumerate(["image", *rows]):
        axes[i, 0].set_ylabel(label, fontsize=MIN_FONT_PT + 1)
    for ax in axes.flat:
        ax.set_xticks([])
        ax.set_yticks([])
    if title:
        fig.suptitle(title, fontsize=10)
    return fig


def save_pca_figure(images: Tensor, rows: dict[str, Tensor], grid: int, path: Path,
                    title: str = "") -> Path:
    """Write :func:`pca_figure` as PNG at ``path``."""
    from tokengeo.plotting import save_figure

    return save_figure(pca_figure(images, rows, grid, title), path)
