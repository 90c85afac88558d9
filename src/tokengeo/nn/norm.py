"""LayerNorm with TransformerLens' hook points ``hook_scale`` and ``hook_normalized``."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from tokengeo.hooks import HookPoint


class HookedLayerNorm(nn.LayerNorm):
    """``nn.LayerNorm`` (same parameters and state dict) whose parts can be read and edited:

    ``y = (x - mean(x)) / s * weight + bias``, ``s = sqrt(var(x) + eps)`` (Ba et al. 2016):
    ``hook_scale`` sees ``s`` (..., 1), ``hook_normalized`` sees ``(x - mean(x)) / s``
    (..., d), and what they return flows on. Unhooked, the fused ``F.layer_norm`` runs and
    neither point is called (forming ``s`` costs a pass of its own).
    """

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.hook_scale = HookPoint()
        self.hook_normalized = HookPoint()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not (self.hook_scale.is_active() or self.hook_normalized.is_active()):
            return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)
        dims = tuple(range(-len(self.normalized_shape), 0))
        centred = x - x.mean(dim=dims, keepdim=True)
        scale = self.hook_scale((centred.pow(2).mean(dim=dims, keepdim=True) + self.eps).sqrt())
        y = self.hook_normalized(centred / scale)
        if self.weight is not None:
            y = y * self.weight
        return y + self.bias if self.bias is not None else y
