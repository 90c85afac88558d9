"""Position-wise feed-forward network of a transformer block."""

from __future__ import annotations

import torch
from torch import nn

from tokengeo.hooks import HookPoint
from tokengeo.nn.config import BlockConfig


class MLP(nn.Module):
    """``Linear(d, r·d) → GELU → Linear(r·d, d) → Dropout`` (Vaswani et al. 2017, Eq. 2).

    Hook points (TransformerLens' names), each editable: ``hook_pre``, the hidden layer
    before the activation, and ``hook_post``, after it, both (B, T, r·d).
    """

    def __init__(self, cfg: BlockConfig) -> None:
        super().__init__()
        d, hidden = cfg.d_model, int(cfg.mlp_ratio * cfg.d_model)
        self.fc1 = nn.Linear(d, hidden, bias=cfg.bias)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden, d, bias=cfg.bias)
        self.drop = nn.Dropout(cfg.dropout)
        self.hook_pre = HookPoint()
        self.hook_post = HookPoint()

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, T, d) -> (B, T, d)
        return self.drop(self.fc2(self.hook_post(self.act(self.hook_pre(self.fc1(x))))))
