"""Laplacian and mixed heads at the cost of standard attention: the kernel choice.

Head ``h`` outputs ``z_h = a_h V_h + b_h P_h V_h`` (Zhang & Papyan, arXiv 2602.09297, Eq. 2
with P replaced by I − P for Laplacian heads): (a, b) = (0, 1) attention, (1, −1)
Laplacian, anything else a mixed head (:mod:`tokengeo.nn.heads`; the readable reference is
:func:`tokengeo.nn.reference.attention_reference`).

Three kernels compute it, and :func:`plan_kernel` chooses one, by name or automatically:

* ``"lean"``: :class:`~tokengeo.nn.laplacian_kernel.LaplacianSDPA`, a fused SDPA kernel
  with z written in place and standard attention's saved tensors (the default wherever a
  fused kernel returns its log-sum-exp: CPU flash; CUDA flash, memory-efficient or cuDNN);
* ``"recompute"``: :func:`~tokengeo.nn.laplacian_recompute.laplacian_recompute`, torch's
  own SDPA autograd with its saved output rebuilt from z in the backward (attention and
  Laplacian heads with fixed coefficients): the memory standard attention keeps, at about
  two thirds of the lean kernel's host cost per call (what short sequences on a GPU are
  bound by); ``auto`` takes it on CUDA with a packed qkv once :data:`_RECOMPUTE_ON_CUDA`
  is set after a GPU benchmark;
* ``"compose"``: ``V − SDPA`` in plain autograd (:func:`compose`), exact but keeping P V
  for the backward; the only way with dropout (the kernel's dropout mask cannot be
  replayed) or a mask that requires grad, except on CUDA where ``recompute`` takes those;
* ``"triton"``: the fused Triton kernel (:mod:`tokengeo.nn.laplacian_triton`), loaded only
  when asked for, or in ``"auto"`` on CUDA once :data:`_TRITON_ON_CUDA` is set.

:func:`laplacian_attention` plans and runs per call; tokengeo's attention modules plan once
per input signature (:class:`tokengeo.nn.attention.HeadAttention`) and call
:func:`run_plan`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from tokengeo.errors import ConfigError
from tokengeo.nn.heads import HeadRuns, head_runs
from tokengeo.nn.laplacian_kernel import LaplacianSDPA, compose
from tokengeo.nn.laplacian_recompute import (
    hooks_refusal,
    laplacian_recompute,
    recompute_refusal,
)
from tokengeo.nn.sdpa_ops import Backend, choose_backend

__all__ = ["KERNELS", "KernelPlan", "compose", "head_runs", "laplacian_attention",
           "plan_kernel", "run_plan"]

KERNELS = ("auto", "lean", "recompute", "compose", "triton")
# Whether "auto" takes the Triton kernel on CUDA. Off: on an H200 (2026-12-04, torch 2.11,
# triton 3.6; make gpu-check, docs/benchmarks/gpu_check_2026-12-04.json) it was slower than
# the lean path in every case, e.g. all heads Laplacian, time over SDPA, bf16 T=8192: 1.44
# vs 1.08; fp32 T=4096: 1.11 vs 1.02 (bf16 T=1024: 2.11 vs 2.20, both far from SDPA).
# Set it when a GPU run of `make gpu-check` shows the kernel faster.
_TRITON_ON_CUDA = False
# Whether "auto" takes kernel="recompute" on CUDA (fixed heads, packed qkv). Off until a GPU
# run decides it. The case for it, measured on a CPU (benchmarks/laplacian_host.py,
# 2026-12-05, docs/benchmarks/laplacian_host_2026-12-05.json): host cost per call of a
# module's Laplacian heads over standard SDPA's, all heads Laplacian +33 us (lean +47),
# half +76 us (lean +104); and the H200's bf16 T=1024 ratios (V - SDPA 1.11, compose 1.49,
# lean 2.26) are this benchmark's host ratios (1.12, 1.54, 2.00), so short sequences there
# are bound by that host cost. Not yet known: its time at long sequences on a GPU, where it
# does one elementwise pass more than the lean kernel. make gpu-check times both
# (laplacian_gpu: operator "recompute[...]" against "lean[...]", train steps per kernel)
# and says in "recompute_vs_lean" whether recompute was faster in every case.
_RECOMPUTE_ON_CUDA = False


@dataclass(frozen=True)
class KernelPlan:
    """What runs: ``kernel`` (``lean``, ``recompute``, ``compose`` or ``triton``), the fused
    SDPA ``backend`` of the lean kernel, the heads' ``runs``, and ``packed``: whether the
    gradient goes to the packed qkv tensor (lean kernel only). ``under_hooks``: what a
    ``recompute`` plan runs while other saved-tensor hooks are active, ``lean`` (its
    ``backend``), ``compose``, or None (raise: ``recompute`` was asked for by name)."""

    kernel: str
    runs: HeadRuns
    backend: Backend | None = None
    packed: bool = False
    under_hooks: str | None = None


def _compose_reason(q, attn_mask, dropout_p: float) -> str | None:
    """Why the fused kernels cannot run (None when they can)."""
    if dropout_p > 0:
        return "dropout_p > 0 (the fused kernel's dropout mask cannot be replayed)"
    if attn_mask is not None and attn_mask.requires_grad:
        return "attn_mask requires grad"
    if attn_mask is not None and not (attn_mask.dtype == torch.bool
                                      or attn_mask.is_floating_point()):
        return f"attn_mask of dtype {attn_mask.dtype} (neither bool nor floating)"
    if q.device.type not in ("cpu", "cuda"):
        return f"device {q.device.type} (the fused kernels run on cpu and cuda)"
    return None


def plan_kernel(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, runs: HeadRuns,
    attn_mask: torch.Tensor | None = None, is_causal: bool = False, dropout_p: float = 0.0,
    scale: float | None = None, kernel: str = "auto", packed: bool = False,
    coef_grad: bool = False,
) -> KernelPlan:
    """The kernel for these inputs (q, k, v (B, H, T, Dh), already in the compute dtype).

    ``kernel="auto"``: Triton on CUDA if :data:`_TRITON_ON_CUDA` and it can run; on CUDA
    with the packed qkv, if :data:`_RECOMPUTE_ON_CUDA`, ``recompute`` for attention and
    Laplacian heads with fixed coefficients (the lean kernel, or the composition where no
    fused kernel runs, under other saved-tensor hooks); else lean where a fused kernel
    runs, else compose. Why packed only: ``recompute``'s backward holds two transient
    (B, T, H, Dh) buffers (the negated gradient and the rebuilt P V), which the packed
    path's gradient stacking outweighs (peak equal to standard attention's) but separate
    q, k, v do not (peak over standard's, fwd + bwd, CPU, T = 512,
    ``benchmarks/laplacian_heads.py --quick --kernel``: recompute 2.55, lean 0.945).
    ``"lean"`` / ``"recompute"`` / ``"triton"`` raise a :class:`ConfigError` naming why
    they cannot run; ``"compose"`` always runs. ``packed``: the caller passes the qkv
    tensor q, k, v are views of; ``coef_grad``: the coefficients require grad.
    """
    if kernel not in KERNELS:
        raise ConfigError(f"kernel={kernel!r} is not valid; choose one of {list(KERNELS)}")
    reason = _compose_reason(q, attn_mask, dropout_p)
    if kernel == "compose":
        return KernelPlan("compose", runs)
    if kernel == "triton" or (kernel == "auto" and _TRITON_ON_CUDA and q.is_cuda
                              and reason is None and attn_mask is None):
        if reason is not None or attn_mask is not None:
            raise ConfigError(f"kernel='triton' cannot run with "
                              f"{reason or 'an attn_mask'}; use kernel='auto'")
        _triton_kernel()  # fails here, once, if it cannot be loaded
        return KernelPlan("triton", runs)
    refusal = recompute_refusal(runs, coef_grad)
    if kernel == "recompute":
        if refusal is not None:
            raise ConfigError(f"kernel='recompute' cannot run: {refusal}; use kernel='auto' "
                              f"or 'lean'")
        return KernelPlan("recompute", runs)
    backend = None if reason else choose_backend(q, k, v, attn_mask, is_causal, scale)
    if (kernel == "auto" and _RECOMPUTE_ON_CUDA and q.is_cuda and packed and refusal is None
            and runs.uses_values):
        return KernelPlan("recompute", runs, backend, packed,
                          under_hooks="lean" if backend is not None else "compose")
    if backend is not None:
        return KernelPlan("lean", runs, backend, packed)
    if kernel == "lean":
        why = reason or (f"no fused SDPA kernel for these inputs on {q.device.type} "
                         f"({q.dtype}, mask {'given' if attn_mask is not None else 'none'})")
        raise ConfigError(f"kernel='lean' cannot run: {why}; use kernel='auto' or 'compose'")
    return KernelPlan("compose", runs)


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
) -> torch.Tensor:
    """Per-head ``z_h = a_h V_h + b_h softmax(q_h k_hᵀ·scale + mask) V_h``, as (B, T, H, Dh).

    q, k, v: (B, H, T, Dh) (views of one qkv projection are fine); coef_a, coef_b: (H,)
    buffers or learnable parameters (gradients flow to both); attn_mask, is_causal,
    dropout_p, scale: as in ``F.scaled_dot_product_attention``; ``head_kinds``: optional
    per-head ``attention`` / ``laplacian`` / ``mixed`` (pass it to avoid reading the
    coefficients on the host; see :func:`~tokengeo.nn.heads.head_runs`); ``kernel``: see
    :func:`plan_kernel`. The lean kernel's result is contiguous in the (B, T, H, Dh)
    layout, so ``z.reshape(B, T, H * Dh)`` is a view for the output projection. Coefficients act in
    q's dtype (under autocast, the autocast dtype).

    ``qkv``: optionally the (B, T, 3, H, Dh) tensor that q, k, v are ``qkv.unbind(2)`` of,
    transposed. The gradient then goes to ``qkv`` directly, each of dq, dk, dv written once
    into it with the heads' scaling folded in, and q, k, v get none of their own: pass it
    only when nothing watches their gradients.

    Double backward (``create_graph=True``) recomputes the composition with the math SDPA
    kernel inside the backward, so it is exact too. ``z`` is saved for the backward by the
    lean kernel: modify it in place (e.g. an ablation hook) only in no-grad code, or clone
    it first; autograd raises otherwise.
    """
    _check_shapes(q, k, v, coef_a, coef_b)
    q, k, v, attn_mask = autocast_inputs(q, k, v, attn_mask)
    runs = head_runs(coef_a, coef_b, head_kinds)
    packed = qkv is not None and _check_packed(qkv, q, k, v)
    plan = plan_kernel(q, k, v, runs=runs, attn_mask=attn_mask, is_causal=is_causal,
                       dropout_p=dropout_p, scale=scale, kernel=kernel, packed=packed,
                       coef_grad=coef_a.requires_grad or coef_b.requires_grad)
    return run_plan(plan, q, k, v, coef_a, coef_b, attn_mask=attn_mask, is_causal=is_causal,
                    dropout_p=dropout_p, scale=scale, qkv=qkv if packed else None)


def run_plan(
    plan: KernelPlan, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
    coef_a: torch.Tensor, coef_b: torch.Tensor, *, attn_mask: torch.Tensor | None,
    is_causal: bool, dropout_p: float, scale: float | None, qkv: torch.Tensor | None = None,
) -> torch.Tensor:
    """Run a :class:`KernelPlan` (inputs as in :func:`laplacian_attention`, already checked
    and cast); z (B, T, H, Dh)."""
    kernel = plan.kernel
    if kernel == "recompute":
        why = hooks_refusal()
        if why is None:
            a, b = _coefficients(coef_a, coef_b, q.dtype, len(plan.runs.runs) > 1)
            return laplacian_recompute(q, k, v, a, b, plan.runs, attn_mask=attn_mask,
                                       is_causal=is_causal, dropout_p=dropout_p, scale=scale)
        if plan.under_hooks is None:
            raise ConfigError(f"kernel='recompute' cannot run here: {why}; use "
                              f"kernel='auto' or 'lean'")
        kernel = plan.under_hooks
    if kernel == "compose":
        a, b = coef_a.to(q.dtype), coef_b.to(q.dtype)
        return compose(q, k, v, a, b, attn_mask, is_causal, dropout_p, scale, plan.runs)
    if kernel == "triton":
        a, b = coef_a.to(q.dtype), coef_b.to(q.dtype)
        return _triton_kernel()(q, k, v, a, b, is_causal=is_causal, scale=scale)
    # read by mixed heads, and by the double backward's composition when kinds are several
    a, b = _coefficients(coef_a, coef_b, q.dtype, len(plan.runs.runs) > 1 or bool(plan.runs.mixed))
    if attn_mask is not None and attn_mask.dtype == torch.bool:
        attn_mask = torch.zeros(attn_mask.shape, dtype=q.dtype, device=q.device).masked_fill_(
            ~attn_mask, float("-inf"))  # the additive mask SDPA builds too
    if plan.packed:
        q, k, v = q.detach(), k.detach(), v.detach()  # their gradient goes to qkv
    else:
        qkv = None
    return LaplacianSDPA.apply(q, k, v, a, b, attn_mask, qkv,
                               (is_causal, scale, plan.runs, plan.backend))


def _coefficients(coef_a, coef_b, dtype, used: bool):
    """(a, b) in the compute dtype where the arithmetic reads them (``used``) or they learn;
    otherwise as given (two casts less per call: the fixed kinds' values are implied)."""
    if used or coef_a.requires_grad or coef_b.requires_grad:
        return coef_a.to(dtype), coef_b.to(dtype)
    return coef_a, coef_b


def _triton_kernel():
    """The Triton kernel's entry point, imported on first use (triton is optional)."""
    try:
        from tokengeo.nn.laplacian_triton import laplacian_attention_triton
    except ImportError as err:
        raise ImportError(
            f"kernel='triton' needs the triton package and tokengeo.nn.laplacian_triton "
            f"({err}); install them with pip install -e '.[dev]', or use kernel='auto'"
        ) from err
    return laplacian_attention_triton


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


def autocast_inputs(q, k, v, attn_mask):
    """Cast as autocast casts ``F.scaled_dot_product_attention`` (lower-precision list)."""
    dev = q.device.type
    if not torch.is_autocast_enabled(dev):
        return q, k, v, attn_mask
    dtype = torch.get_autocast_dtype(dev)
    q, k, v = (t.to(dtype) if t.is_floating_point() else t for t in (q, k, v))
    if attn_mask is not None and attn_mask.is_floating_point():
        attn_mask = attn_mask.to(dtype)
    return q, k, v, attn_mask
