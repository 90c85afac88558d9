"""What the blocks read from a model config (nanoGPT's ``Block(config)``).

The nn layer does not import the model families' configs; any object with these fields
works, e.g. :class:`tokengeo.models.config.TransformerConfig` and its subclasses.
"""

from __future__ import annotations

from typing import Protocol


class BlockConfig(Protocol):
    """Fields of a standard pre-LN block (``Block``, ``MultiHeadAttention``, ``MLP``)."""

    d_model: int
    n_heads: int
    mlp_ratio: float
    dropout: float
    attn_dropout: float
    bias: bool
    norm_eps: float
    mixed_init: str
    kernel: str  # a name of tokengeo.nn.kernels.KERNELS


class SliceBlockConfig(BlockConfig, Protocol):
    """An L-Transformer block's fields: a :class:`BlockConfig` split into ``p`` slices of
    width ``d_model // p``; ``n_heads`` counts heads per slice."""

    p: int
