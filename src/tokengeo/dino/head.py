"""DINO's projection head: an MLP, an L2-normalised bottleneck, a weight-normalised output."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from tokengeo.models.transformer import init_weights


class DINOHead(nn.Module):
    """in_dim -> hidden -> ... -> bottleneck (GELU MLP), L2 normalise, then a linear layer
    to ``out_dim`` without bias whose rows are weight-normalised (Caron et al. 2021, Sec. 3.1
    and their ``DINOHead``): W = g * V / ||V||_row with g fixed to 1 (``norm_last_layer``)
    or learned.
    """

    def __init__(self, in_dim: int, out_dim: int, hidden_dim: int = 512,
                 bottleneck_dim: int = 128, n_layers: int = 3,
                 norm_last_layer: bool = True) -> None:
        super().__init__()
        dims = [in_dim] + [hidden_dim] * (n_layers - 1) + [bottleneck_dim]
        layers: list[nn.Module] = []
        for i, (a, b) in enumerate(zip(dims[:-1], dims[1:], strict=True)):
            layers.append(nn.Linear(a, b))
            if i < len(dims) - 2:
                layers.append(nn.GELU())
        self.mlp = nn.Sequential(*layers)
        self.mlp.apply(init_weights)
        self.last_direction = nn.Parameter(torch.empty(out_dim, bottleneck_dim))  # V
        nn.init.normal_(self.last_direction, std=0.02)
        self.last_gain = nn.Parameter(torch.ones(out_dim, 1), requires_grad=not norm_last_layer)

    def last_weight(self) -> Tensor:
        """W = g * V / ||V|| (row-wise), (out_dim, bottleneck)."""
        return self.last_gain * F.normalize(self.last_direction, dim=1)

    def forward(self, x: Tensor) -> Tensor:
        z = F.normalize(self.mlp(x), dim=-1)  # (B, bottleneck)
        return z @ self.last_weight().T  # (B, out_dim)
