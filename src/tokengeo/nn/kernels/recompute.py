"""Laplacian heads on torch's own SDPA autograd, its saved output recomputed from z.

Head ``h`` outputs ``z_h = a_h V_h + b_h P_h V_h`` (Zhang & Papyan, arXiv 2602.09297, Eq. 2
with P replaced by I − P for Laplacian heads; the reference is
:func:`tokengeo.nn.reference.mix_heads`). For the fixed kinds, attention (0, 1) and
Laplacian (1, −1), ``b_h = ±1``, so P V is recovered from z head-wise as

    P V = b (z − a V)     (attention heads: z; Laplacian heads: V − z).

The plain composition ``z = a V + b SDPA(q, k, v)`` keeps two full tensors for the backward:
SDPA's output ``out`` (saved by torch's fused kernel) and z (saved by the output
projection). The in-place kernel (:mod:`tokengeo.nn.kernels.in_place`) avoids the second with a
Python ``autograd.Function`` that calls the fused kernels one by one, at a host cost of
tens of microseconds per call, which short sequences on a GPU notice (the launch-bound
regime: bf16, T = 1024 on an H200, see ``docs/kernels.md``). Here torch's own SDPA
autograd node runs, and its saved ``out`` is intercepted with saved-tensor hooks
(``torch.autograd.graph.saved_tensors_hooks``): the node keeps a handle on z and V instead,
``out`` is freed when the forward returns, and the backward recomputes P V into a buffer
laid out as ``out`` was (the CUDA kernels want their own layout). The memory is standard
attention's; the backward does one elementwise pass more than the in-place kernel's (the
gradient negated for the Laplacian heads, by autograd), and runs no Python but the
recomputation.

The interception applies only where it is exact to do so: to the saved tensor that *is*
``out`` (same storage offset, shape, strides and dtype). A backend that pads the head size,
or the math backend, saves no such tensor; then nothing is replaced and the memory is the
composition's (the values are right either way). It is refused under other saved-tensor
hooks (activation checkpointing, offloading: theirs would be shadowed), under functorch
transforms, and for mixed heads or coefficients that learn (their P V must be kept: the
in-place kernel does that).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from tokengeo.nn.heads import HeadRuns
from tokengeo.nn.kernels.compose import combine_runs

__all__ = ["hooks_refusal", "laplacian_recompute"]


def hooks_refusal() -> str | None:
    """Why saved-tensor hooks of ours cannot be pushed now (None when they can): checked
    at every call, since checkpointing or offloading may wrap one call and not the next."""
    hooks = torch._C._autograd
    top = getattr(hooks, "_top_saved_tensors_default_hooks", None)
    if top is None:  # private API, present in torch 2.11-2.13; without it we cannot tell
        return f"torch {torch.__version__} cannot say whether other saved-tensor hooks are active"
    if not hooks._saved_tensors_hooks_is_enabled():
        return "saved-tensor hooks are disabled here"
    if top(False) is not None:
        return "other saved-tensor hooks are active (checkpointing or offloading)"
    if torch._C._are_functorch_transforms_active():
        return "a functorch transform is active"
    return None


class _PVFromZ:
    """P V (B, H, T, Dh), rebuilt from z and V in the layout SDPA's output had."""

    __slots__ = ("z", "v", "a", "b", "version", "shape", "stride", "dtype", "device")

    def __init__(self, out: torch.Tensor, z: torch.Tensor, v: torch.Tensor,
                 coefs: tuple[torch.Tensor, torch.Tensor] | None):
        """out, z, v: (B, H, T, Dh), z the heads' output (its version is checked at use);
        ``coefs``: the heads' (a, b), each (H,), or None when all heads are Laplacian."""
        # z and V without autograd history: this object hangs off z's own graph, and a
        # reference back to z's grad_fn would be a reference cycle.
        self.z, self.v, self.version = z.detach(), v.detach(), z._version
        self.a, self.b = (None, None) if coefs is None else coefs  # no grad: refused
        self.shape, self.stride = out.shape, out.stride()
        self.dtype, self.device = out.dtype, out.device

    def __call__(self) -> torch.Tensor:
        if self.z._version != self.version:
            raise RuntimeError(
                "the Laplacian heads' output z was modified in place after the forward, and "
                "the backward rebuilds P V from it; clone z before editing it, or use "
                "kernel='compose'")
        pv = torch.empty_strided(self.shape, self.stride, dtype=self.dtype, device=self.device)
        if self.a is None:  # all heads Laplacian: P V = V − z
            return torch.sub(self.v, self.z, out=pv)
        # P V = b (z − a V): exact for b = ±1, a ∈ {0, 1} (a product by 0 or 1, a negation)
        a, b = self.a.view(1, -1, 1, 1), self.b.view(1, -1, 1, 1)  # (1, H, 1, 1)
        return torch.addcmul(self.z, a, self.v, value=-1, out=pv).mul_(b)


def _unpack(slot: list) -> torch.Tensor:
    """A saved tensor back: ``slot`` holds it, or the :class:`_PVFromZ` that rebuilds it."""
    x = slot[0]
    return x if type(x) is not _PVFromZ else x()


def laplacian_recompute(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, coef_a: torch.Tensor,
    coef_b: torch.Tensor, runs: HeadRuns, *, attn_mask: torch.Tensor | None = None,
    is_causal: bool = False, dropout_p: float = 0.0, scale: float | None = None,
) -> torch.Tensor:
    """``a V + b SDPA(q, k, v)`` for attention and Laplacian heads, as (B, T, H, Dh),
    keeping what standard attention keeps for the backward.

    q, k, v: (B, H, T, Dh); coef_a, coef_b: (H,) in q's dtype, the fixed kinds' values
    (``runs`` gives the kinds; the kernel table's refusal and :func:`hooks_refusal` say
    when this cannot run). z's layout is SDPA's output's, transposed, as for standard
    attention: contiguous when q, k, v are (B, T, H, Dh)-strided views (a packed
    projection). Dropout and masks work as in ``F.scaled_dot_product_attention`` (its own
    node replays them).
    """
    if not (torch.is_grad_enabled() and (q.requires_grad or k.requires_grad
                                         or v.requires_grad)):
        pv = F.scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal,
                                             scale=scale)
        return combine_runs(v.transpose(1, 2), pv.transpose(1, 2), coef_a, coef_b, runs)
    slots: list[list] = []  # one [tensor] per tensor the SDPA node saves

    def pack(t: torch.Tensor) -> list:
        slot = [t]
        slots.append(slot)
        return slot

    # Pushed and popped by hand (what saved_tensors_hooks does, less its object per call).
    hooks = torch._C._autograd
    hooks._push_saved_tensors_default_hooks(pack, _unpack)
    try:
        out = F.scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal,
                                             scale=scale)
    finally:
        hooks._pop_saved_tensors_default_hooks()
    if runs.all_attention:
        return out.transpose(1, 2)
    if len(runs.runs) == 1:  # all heads Laplacian: one subtraction, heads first
        zh, coefs = torch.sub(v, out), None  # (B, H, T, Dh)
    else:
        zh = combine_runs(v.transpose(1, 2), out.transpose(1, 2), coef_a, coef_b,
                          runs).transpose(1, 2)
        coefs = (coef_a, coef_b)
    ptr = out.data_ptr()
    for slot in slots:
        t = slot[0]
        if (t.data_ptr() == ptr and t.shape == out.shape and t.stride() == out.stride()
                and t.dtype == out.dtype):
            slot[0] = _PVFromZ(out, zh, v, coefs)  # out itself is no longer held
    return zh.transpose(1, 2)  # (B, T, H, Dh)
