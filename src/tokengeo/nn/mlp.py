"""Position-wise feed-forward network of a transformer block."""

from __future__ import annotations

import torch
from torch import nn


class MLP(nn.Module):
    """``Linear(d, r·d) → GELU → Linear(r·d, d) → Dropout`` (Vaswani et al. 2017, Eq. 2)."""

    def __init__(self, d_model: int, hidden: int, *, dropout: float = 0.0, bias: bool = True):
        super().__init__()
        self.fc1 = nn.Linear(d_model, hidden, bias=bias)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden, d_model, bias=bias)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, T, d) -> (B, T, d)
        return self.drop(self.fc2(self.act(self.fc1(x))))
