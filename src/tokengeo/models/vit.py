"""Vision transformer classifier (Dosovitskiy et al., arXiv 2010.11929), pre-LN."""

from __future__ import annotations

import torch
from torch import nn

from tokengeo.errors import ConfigError
from tokengeo.hooks import HookPoint
from tokengeo.models.config import ViTConfig
from tokengeo.models.transformer import TokengeoModel


class ViT(TokengeoModel):
    """Patch embedding, cls token or mean pooling, pre-LN blocks, linear head.

    ``forward_features`` returns all tokens (cls first when ``pool="cls"``).
    """

    family = "vit"

    def __init__(self, cfg: ViTConfig) -> None:
        super().__init__(cfg)
        d, p = cfg.d_model, cfg.patch_size
        self.patch_embed = nn.Conv2d(cfg.in_chans, d, kernel_size=p, stride=p)
        self.num_patches = (cfg.image_size // p) ** 2
        self.num_prefix = 1 if cfg.pool == "cls" else 0
        self.cls_token = nn.Parameter(torch.zeros(1, 1, d)) if self.num_prefix else None
        self.pos_embed = nn.Parameter(torch.zeros(1, self.num_patches + self.num_prefix, d))
        self.head = nn.Linear(d, cfg.num_classes)
        self.hook_pos_embed = HookPoint()  # the position embeddings, (B, prefix + N, d)
        self.finish_init()
        nn.init.normal_(self.pos_embed, std=0.02)
        if self.cls_token is not None:
            nn.init.normal_(self.cls_token, std=1e-6)

    def embed(self, images: torch.Tensor, attention_mask=None) -> tuple[torch.Tensor, None]:
        """Patch tokens (+ cls) with position embeddings, (B, N + prefix, d).

        Square images of another size than ``image_size`` (a multiple of ``patch_size``,
        e.g. DINO's local crops) get the position grid resized bicubically, as in DINO.
        """
        cfg = self.config
        size = images.shape[-1] if images.dim() == 4 else -1
        if (images.dim() != 4 or images.shape[1] != cfg.in_chans or images.shape[2] != size
                or size % cfg.patch_size):
            raise ConfigError(
                f"ViT expects images shaped (B, {cfg.in_chans}, {cfg.image_size}, "
                f"{cfg.image_size}) (or square with a side divisible by patch_size="
                f"{cfg.patch_size}); got {tuple(images.shape)} (set image_size / in_chans "
                "to match the data)"
            )
        x = self.patch_embed(images).flatten(2).transpose(1, 2)  # (B, N, d)
        if self.cls_token is not None:
            x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1)
        positions = self.position_embedding(size // cfg.patch_size).expand(x.shape[0], -1, -1)
        return x + self.hook_pos_embed(positions), None  # (B, prefix + N, d)

    def position_embedding(self, grid: int) -> torch.Tensor:
        """Position embeddings for a ``grid`` x ``grid`` patch layout, (1, prefix + grid², d).

        The learned grid is resized with bicubic interpolation when ``grid`` differs from
        the training grid (Caron et al. 2021, ``interpolate_pos_encoding``).
        """
        native = self.config.image_size // self.config.patch_size
        if grid == native:
            return self.pos_embed
        prefix, patches = self.pos_embed[:, : self.num_prefix], self.pos_embed[:, self.num_prefix:]
        d = patches.shape[-1]
        square = patches.reshape(1, native, native, d).permute(0, 3, 1, 2)  # (1, d, g, g)
        resized = nn.functional.interpolate(square, size=(grid, grid), mode="bicubic",
                                            align_corners=False)
        return torch.cat([prefix, resized.permute(0, 2, 3, 1).reshape(1, grid * grid, d)], dim=1)

    def patch_tokens(self, features: torch.Tensor) -> torch.Tensor:
        """The patch tokens of ``forward_features`` output, without the cls token."""
        return features[:, self.num_prefix:]  # (B, N, d)
