"""Bidirectional text-encoder classifier (BERT-like with pre-LN blocks)."""

from __future__ import annotations

import math

import torch
from torch import nn

from tokengeo.hooks import HookPoint
from tokengeo.models.config import TextEncoderConfig
from tokengeo.models.transformer import TokengeoModel, check_length, mask_with_prefix
from tokengeo.nn.lposition import sinusoid


class TextEncoder(TokengeoModel):
    """Token + position embeddings, bidirectional blocks with key padding, pooled head.

    ``attention_mask`` (B, T) marks real tokens (1) and padding (0); pooling is the mean
    over real tokens, or a learned cls vector prepended to the sequence. The embedding is

        X = s · Embed(ids) + PE(t),   s = √d if ``embed_scale`` else 1,

    with PE a learned table (``positions="learned"``) or the sinusoidal code of width d
    (``"sinusoidal"``, Vaswani et al. 2017, Sec. 3.5: the function the L-Transformer uses).
    """

    family = "encoder"

    def __init__(self, cfg: TextEncoderConfig) -> None:
        super().__init__(cfg)
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.emb_scale = math.sqrt(cfg.d_model) if cfg.embed_scale else 1.0
        learned = cfg.positions == "learned"
        self.pos_emb = nn.Embedding(cfg.max_len, cfg.d_model) if learned else None
        self.hook_pos_embed = HookPoint()  # the position code added to the tokens, (B, T, d)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, cfg.d_model)) if cfg.pool == "cls" else None
        self.drop = nn.Dropout(cfg.dropout)
        self.head = nn.Linear(cfg.d_model, cfg.num_classes)
        self.finish_init()

    def positions(self, seq_len: int) -> torch.Tensor:
        """PE(t) for t = 0..T−1, (T, d): the learned table's rows or the sinusoidal code."""
        weight = self.tok_emb.weight
        if self.pos_emb is not None:
            return self.pos_emb(torch.arange(seq_len, device=weight.device))
        t = torch.arange(seq_len, device=weight.device, dtype=torch.float32)  # (T,)
        return sinusoid(t, self.config.d_model).to(weight.dtype)  # (T, d)

    def embed(
        self, ids: torch.Tensor, attention_mask: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        B, T = ids.shape
        check_length(T, self.config.max_len, "max_len")
        x = self.tok_emb(ids)  # (B, T, d)
        if self.config.embed_scale:
            x = x * self.emb_scale
        x = x + self.hook_pos_embed(self.positions(T).expand(B, T, -1))  # (B, T, d)
        if self.cls_token is not None:
            x = torch.cat([self.cls_token.expand(B, -1, -1), x], dim=1)  # (B, 1 + T, d)
            attention_mask = mask_with_prefix(attention_mask)
        return self.drop(x), attention_mask
