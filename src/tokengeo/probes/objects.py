"""Do a ViT's object tokens cluster apart from its background tokens?

Zhang & Papyan (arXiv 2602.09297) read Laplacian heads' gain in vision as smoothing within
objects: the tokens of the object collapse together, apart from the background. On images
with a black background (Fashion-MNIST, digits) the mask is free: a patch is *foreground*
when any of its raw pixels exceeds ``threshold`` (0: any pixel > 0), background otherwise
(:func:`patch_foreground`).

:func:`object_separation` measures, per image n with patch tokens x_t (the cls token left
out), foreground set F and background set B (n_F, n_B ≥ 1), the share of the image's token
variance that the foreground/background split explains (the correlation ratio η²):

    between_n = n_F n_B / (n_F + n_B) · ‖μ_F − μ_B‖²
    total_n   = Σ_t ‖x_t − x̄_n‖²
    η²_n      = between_n / total_n        (in [0, 1]; 1: every foreground token at μ_F and
                                            every background token at μ_B)

and reports its mean over the images that have both kinds of patch. Higher: object and
background tokens form separate clusters.
"""

from __future__ import annotations

import torch

F64 = torch.float64


def patch_foreground(images: torch.Tensor, patch_size: int, threshold: float = 0.0
                     ) -> torch.Tensor:
    """(N, P) bool: patch p of image n holds a raw pixel > ``threshold`` in some channel.
    ``images`` (N, C, H, W) raw pixel values (uint8 0-255); patches in the ViT's order
    (row-major over the grid of ``patch_size`` squares, as its strided convolution)."""
    n, c, h, w = images.shape
    g_h, g_w = h // patch_size, w // patch_size
    x = images[:, :, :g_h * patch_size, :g_w * patch_size].to(F64)
    x = x.reshape(n, c, g_h, patch_size, g_w, patch_size)
    return (x > threshold).any(dim=5).any(dim=3).any(dim=1).reshape(n, g_h * g_w)


def object_shares(tokens: torch.Tensor, foreground: torch.Tensor) -> torch.Tensor:
    """η²_n of every image with both kinds of patch (see the module docstring):
    tokens (N, P, d) patch tokens, foreground (N, P) bool; returns (M,) float64."""
    x = tokens.to(F64)
    f = foreground.to(F64).unsqueeze(-1)  # (N, P, 1)
    n_f, n_b = f.sum(1), (1 - f).sum(1)  # (N, 1)
    both = (n_f[:, 0] > 0) & (n_b[:, 0] > 0)
    mu_f = (x * f).sum(1) / n_f.clamp_min(1)  # (N, d)
    mu_b = (x * (1 - f)).sum(1) / n_b.clamp_min(1)
    between = (n_f * n_b / (n_f + n_b))[:, 0] * (mu_f - mu_b).pow(2).sum(-1)  # (N,)
    total = (x - x.mean(1, keepdim=True)).pow(2).sum((1, 2))  # (N,)
    return (between / total.clamp_min(1e-300))[both]


def object_separation(tokens: torch.Tensor, foreground: torch.Tensor, prefix: int = 0
                      ) -> dict:
    """``{"object_share": mean η² (None when no image has both kinds of patch: JSON has no
    NaN), "object_images": images with both kinds of patch,
    "foreground_fraction": mean share of foreground patches}`` of ``tokens`` (N, prefix + P,
    d) (the first ``prefix`` tokens, a cls token, left out) and ``foreground`` (N, P)."""
    patches = tokens[:, prefix:]
    if patches.shape[1] != foreground.shape[1]:
        raise ValueError(f"{patches.shape[1]} patch tokens, {foreground.shape[1]} patches")
    shares = object_shares(patches, foreground)
    return {"object_share": float(shares.mean()) if len(shares) else None,
            "object_images": int(len(shares)),
            "foreground_fraction": float(foreground.to(F64).mean())}
