"""``laplacian_attention``: the kernels' functional door, planned at every call.

Head ``h`` outputs ``z_h = a_h V_h + b_h softmax(q_h k_hᵀ·scale + mask) V_h`` (Zhang &
Papyan, arXiv 2602.09297, Eq. 2 with P replaced by I − P for Laplacian heads); the kernel
is chosen by :func:`~tokengeo.nn.kernels.table.plan_kernel` from
:data:`~tokengeo.nn.kernels.table.TABLE`.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from tokengeo.errors import ConfigError
from tokengeo.nn.heads import head_runs
from tokengeo.nn.kernels.table import Call, autocast_inputs, plan_kernel

__all__ = ["laplacian_attention"]


def laplacian_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    coef_a: torch.Tensor,
    coef_b: torch.Tensor,
    *,
    attn_mask: torch.Tensor | None = None,
    is_causal: bool = False,
    dropout_p: float = 0.0,
    scale: float | None = None,
    head_kinds: Sequence[str] | None = None,
    qkv: torch.Tensor | None = None,
    kernel: str = "auto",
    device_path: bool = False,
) -> torch.Tensor:
    """Per-head ``z_h = a_h V_h + b_h softmax(q_h k_hᵀ·scale + mask) V_h``, as (B, T, H, Dh).

    q, k, v: (B, H, T, Dh) (views of one qkv projection are fine); coef_a, coef_b: (H,)
    buffers or learnable parameters (gradients flow to both); attn_mask, is_causal,
    dropout_p, scale: as in ``F.scaled_dot_product_attention``; ``head_kinds``: optional
    per-head ``attention`` / ``laplacian`` / ``mixed`` (pass it to avoid reading the
    coefficients on the host; see :func:`~tokengeo.nn.heads.head_runs`); ``kernel``: a
    name in :data:`~tokengeo.nn.kernels.table.KERNELS` (``auto``: the table's choice). The
    ``in_place`` kernel's result is contiguous in the (B, T, H, Dh) layout, so
    ``z.reshape(B, T, H * Dh)`` is a view for the output projection. Coefficients act in
    q's dtype (under autocast, the autocast dtype). ``device_path``: the ``in_place``
    backward takes its CUDA route on any device
    (:func:`~tokengeo.nn.kernels.in_place.backward_route`; the tests and the host
    benchmark run it on a CPU).

    ``qkv``: optionally the (B, T, 3, H, Dh) tensor that q, k, v are ``qkv.unbind(2)`` of,
    transposed. The gradient then goes to ``qkv`` directly, each of dq, dk, dv written once
    into it with the heads' scaling folded in, and q, k, v get none of their own: pass it
    only when nothing watches their gradients.

    Double backward (``create_graph=True``) recomputes the composition with the math SDPA
    kernel inside the backward, so it is exact too. ``z`` is saved for the backward by the
    ``in_place`` kernel: an in-place edit of it (e.g. an ablation hook) is taken, but a
    backward through the edit raises autograd's "modified by an inplace operation"; clone it
    first where a backward follows (tokengeo's modules plan another kernel when ``hook_z`` is
    hooked or wrapped).
    """
    _check_shapes(q, k, v, coef_a, coef_b)
    q, k, v, attn_mask = autocast_inputs(q, k, v, attn_mask)
    packed = qkv is not None and _check_packed(qkv, q, k, v)
    call = Call(q=q, k=k, v=v, runs=head_runs(coef_a, coef_b, head_kinds),
                attn_mask=attn_mask, is_causal=is_causal, dropout_p=dropout_p, scale=scale,
                packed=packed, coef_grad=coef_a.requires_grad or coef_b.requires_grad)
    plan = plan_kernel(call, kernel, device_path=device_path)
    return plan.run(q, k, v, coef_a, coef_b, attn_mask=attn_mask, is_causal=is_causal,
                    dropout_p=dropout_p, scale=scale, qkv=qkv)


def _check_packed(qkv, q, k, v) -> bool:
    """Whether the gradient can go to ``qkv`` (False when q, k, v were cast from it).

    q, k, v must be ``heads_of(qkv)``: the views at offsets 0, 1, 2 of qkv's third axis,
    strided (B, H, T, Dh) as qkv's axes (0, 3, 1, 4) (checked by arithmetic, not by
    building the views: this runs at every call)."""
    if not qkv.requires_grad or any(t.dtype != qkv.dtype for t in (q, k, v)):
        return False
    B, H, T, Dh = q.shape
    s = qkv.stride()
    strides, base, step = (s[0], s[3], s[1], s[4]), qkv.data_ptr(), s[2] * qkv.element_size()
    ok = qkv.shape == (B, T, 3, H, Dh) and all(
        t.data_ptr() == base + i * step and t.stride() == strides
        for i, t in enumerate((q, k, v)))
    if not ok:
        raise ConfigError(
            f"qkv (shaped {tuple(qkv.shape)}) must be the (B, T, 3, H, Dh) tensor whose "
            f"unbind(2), transposed, gives q, k, v (shaped {tuple(q.shape)}); pass q, k, v "
            f"from it or leave qkv out")
    return True


def _check_shapes(q, k, v, coef_a, coef_b) -> None:
    if q.dim() != 4 or q.shape != k.shape or q.shape != v.shape:
        raise ConfigError(
            f"laplacian_attention needs q, k, v of one shape (B, H, T, Dh) (V − P V needs "
            f"as many keys as queries); got {tuple(q.shape)}, {tuple(k.shape)}, "
            f"{tuple(v.shape)}")
    H = q.shape[1]
    if coef_a.shape != (H,) or coef_b.shape != (H,):
        raise ConfigError(
            f"coef_a and coef_b must be shaped ({H},), one per head; got "
            f"{tuple(coef_a.shape)} and {tuple(coef_b.shape)}")
