"""Vision transformer classifier (Dosovitskiy et al., arXiv 2010.11929), pre-LN."""

from __future__ import annotations

import torch
from torch import nn

from tokengeo.errors import ConfigError
from tokengeo.models.config import ViTConfig
from tokengeo.models.transformer import TokengeoModel


class ViT(TokengeoModel):
    """Patch embedding, cls token or mean pooling, pre-LN blocks, linear head.

    ``forward_features`` returns all tokens (cls first when ``pool="cls"``).
    """

    family = "vit"

    def __init__(self, cfg: ViTConfig) -> None:
        super().__init__(cfg, causal=False)
        d, p = cfg.d_model, cfg.patch_size
        self.patch_embed = nn.Conv2d(cfg.in_chans, d, kernel_size=p, stride=p)
        self.num_patches = (cfg.image_size // p) ** 2
        self.num_prefix = 1 if cfg.pool == "cls" else 0
        self.cls_token = nn.Parameter(torch.zeros(1, 1, d)) if self.num_prefix else None
        self.pos_embed = nn.Parameter(torch.zeros(1, self.num_patches + self.num_prefix, d))
        self.head = nn.Linear(d, cfg.num_classes)
        self.finish_init()
        nn.init.normal_(self.pos_embed, std=0.02)
        if self.cls_token is not None:
            nn.init.normal_(self.cls_token, std=1e-6)

    def embed(self, images: torch.Tensor, attention_mask=None) -> tuple[torch.Tensor, None]:
        cfg = self.config
        expected = (cfg.in_chans, cfg.image_size, cfg.image_size)
        if images.dim() != 4 or tuple(images.shape[1:]) != expected:
            raise ConfigError(
                f"ViT expects images shaped (B, {', '.join(map(str, expected))}); "
                f"got {tuple(images.shape)} (set image_size / in_chans to match the data)"
            )
        x = self.patch_embed(images).flatten(2).transpose(1, 2)  # (B, N, d)
        if self.cls_token is not None:
            x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1)
        return x + self.pos_embed, None  # (B, N + prefix, d)

    def forward_head(self, features: torch.Tensor, attention_mask=None) -> torch.Tensor:
        pooled = features[:, 0] if self.cls_token is not None else features.mean(dim=1)
        return self.head(pooled)  # (B, num_classes)

    def patch_tokens(self, features: torch.Tensor) -> torch.Tensor:
        """The patch tokens of ``forward_features`` output, without the cls token."""
        return features[:, self.num_prefix:]  # (B, N, d)
