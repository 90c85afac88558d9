"""Bidirectional text-encoder classifier (BERT-like with pre-LN blocks)."""

from __future__ import annotations

import torch
from torch import nn

from tokengeo.models.config import EncoderConfig
from tokengeo.models.transformer import TokengeoModel, check_length, mask_with_prefix


class TextEncoder(TokengeoModel):
    """Token + position embeddings, bidirectional blocks with key padding, pooled head.

    ``attention_mask`` (B, T) marks real tokens (1) and padding (0); pooling is the mean
    over real tokens, or a learned cls vector prepended to the sequence.
    """

    family = "encoder"

    def __init__(self, cfg: EncoderConfig) -> None:
        super().__init__(cfg)
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.pos_emb = nn.Embedding(cfg.max_len, cfg.d_model)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, cfg.d_model)) if cfg.pool == "cls" else None
        self.drop = nn.Dropout(cfg.dropout)
        self.head = nn.Linear(cfg.d_model, cfg.num_classes)
        self.finish_init()

    def embed(
        self, ids: torch.Tensor, attention_mask: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        B, T = ids.shape
        check_length(T, self.config.max_len, "max_len")
        x = self.tok_emb(ids) + self.pos_emb(torch.arange(T, device=ids.device))  # (B, T, d)
        if self.cls_token is not None:
            x = torch.cat([self.cls_token.expand(B, -1, -1), x], dim=1)  # (B, 1 + T, d)
            attention_mask = mask_with_prefix(attention_mask)
        return self.drop(x), attention_mask
