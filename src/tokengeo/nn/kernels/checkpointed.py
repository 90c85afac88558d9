"""kernel="checkpointed_compose": Laplacian heads under ``torch.compile``, one graph, and the
memory standard attention keeps.

Head ``h`` outputs ``z_h = a_h V_h + b_h P_h V_h`` (Zhang & Papyan, arXiv 2602.09297, Eq. 2
with P replaced by I − P for Laplacian heads). The ``in_place`` kernel is written for eager
mode and breaks a compiled graph (its autograd Function writes into non-contiguous ``out=``
views). The composition ``a V + b SDPA(q, k, v)`` compiles into one graph, but the
compiler's partitioner keeps both SDPA's output and z for the backward (one (B, T, d)
tensor more than standard attention: docs/kernels.md, "Under torch.compile").

Here the attention and its output projection run inside selective activation checkpointing
(``torch.utils.checkpoint`` with ``create_selective_checkpoint_contexts``): the fused SDPA
kernels' outputs (and the math path's products and softmax) must be saved; everything
else may be recomputed. The compiler then saves SDPA's output, which the backward needs
anyway, and recomputes z = a V + b P V from it for the projection's backward: one
elementwise operation, fused into the backward's other work. Used only while compiling
(:func:`torch.compiler.is_compiling`); in eager mode checkpointing would rerun the
projection.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch

__all__ = ["compiling", "keep_only_attention"]


compiling = torch.compiler.is_compiling
"""Whether torch.compile is tracing this call (torch's own function: no frame of ours)."""


@functools.cache
def _saved_ops() -> frozenset:
    """The operators whose outputs are saved: what standard attention's backward reads."""
    aten = torch.ops.aten
    names = ("_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_flash_attention",
             "_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention",
             "bmm", "_softmax", "native_dropout")
    return frozenset(getattr(aten, n).default for n in names if hasattr(aten, n))


def _policy(ctx, op, *args, **kwargs):
    from torch.utils.checkpoint import CheckpointPolicy

    if op in _saved_ops():
        return CheckpointPolicy.MUST_SAVE
    return CheckpointPolicy.PREFER_RECOMPUTE


def keep_only_attention(fn: Callable[..., torch.Tensor], *args) -> torch.Tensor:
    """``fn(*args)`` (the attention and its projection) with only the attention kernels'
    outputs saved for the backward, the rest recomputed by the compiled backward."""
    from torch.utils.checkpoint import checkpoint, create_selective_checkpoint_contexts

    context = functools.partial(create_selective_checkpoint_contexts, _policy)
    return checkpoint(fn, *args, use_reentrant=False, context_fn=context)
