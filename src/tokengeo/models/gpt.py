"""GPT-style causal language model (Radford et al. 2019; layout of nanoGPT)."""

from __future__ import annotations

import torch
from torch import nn

from tokengeo.hooks import HookPoint
from tokengeo.models.config import GPTConfig
from tokengeo.models.transformer import TokengeoModel, check_length


class GPT(TokengeoModel):
    """Token + learned position embeddings, causal pre-LN blocks, (tied) LM head."""

    family = "gpt"
    causal = True

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__(cfg)
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.pos_emb = nn.Embedding(cfg.block_size, cfg.d_model)
        self.hook_pos_embed = HookPoint()  # the position embeddings, (B, T, d)
        self.drop = nn.Dropout(cfg.dropout)
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        self.finish_init()
        if cfg.tie_weights:
            self.lm_head.weight = self.tok_emb.weight

    def embed(
        self, idx: torch.Tensor, attention_mask: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        B, T = idx.shape
        check_length(T, self.config.block_size, "block_size")
        pos = torch.arange(T, device=idx.device)
        positions = self.hook_pos_embed(self.pos_emb(pos).expand(B, T, -1))  # (B, T, d)
        return self.drop(self.tok_emb(idx) + positions), attention_mask  # (B, T, d)

    def forward_head(self, features: torch.Tensor, attention_mask=None) -> torch.Tensor:
        """Next-token logits at every position (no pooling): (B, T, vocab)."""
        return self.lm_head(features)
