"""Multi-head self-attention whose heads may be attention, Laplacian or learnt mixtures.

Head ``h`` outputs ``a_h V + b_h P V`` (Zhang & Papyan, arXiv 2602.09297, Eq. 2 with
P replaced by I − P for Laplacian heads; :class:`~tokengeo.nn.heads.HeadKinds`):

* attention  (a, b) = (0, 1):   P V
* laplacian  (a, b) = (1, −1):  (I − P) V = V − P V, the random-walk graph Laplacian of
  the attention graph acting on the values (heat-diffusion smoothing);
* mixed      learnable (a, b), initialised as attention or Laplacian.

The maths, read top to bottom, is :mod:`tokengeo.nn.reference`; here
:meth:`HeadAttention.attend` computes the same with a fused kernel chosen once per input
signature (:mod:`tokengeo.nn.laplacian_sdpa`): a Laplacian head costs one subtraction and
never builds the T×T matrix I − P. When the pattern is hooked it materialises P, shows it
to the hook and uses what the hook returns (TransformerLens semantics: an edited pattern is
the one applied to V).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from tokengeo.errors import ConfigError
from tokengeo.hooks import HookPoint
from tokengeo.nn.compiled import compiling, keep_only_attention
from tokengeo.nn.config import BlockConfig
from tokengeo.nn.heads import HeadKinds
from tokengeo.nn.laplacian_sdpa import (
    KERNELS,
    KernelPlan,
    autocast_inputs,
    plan_kernel,
    run_plan,
)
from tokengeo.nn.reference import attention_pattern, attention_reference

__all__ = ["ATTENTION_HOOKS", "HeadAttention", "MultiHeadAttention", "attention_pattern",
           "attention_reference", "build_attn_mask"]

ATTENTION_HOOKS = ("hook_q", "hook_k", "hook_v", "hook_pattern", "hook_z")
MAX_PLANS = 256  # kernel plans a module keeps (one per input signature)


def build_attn_mask(
    key_padding_mask: torch.Tensor | None, seq_len: int, causal: bool
) -> tuple[torch.Tensor | None, bool]:
    """The boolean ``attn_mask`` (True = may attend) and ``is_causal`` flag for SDPA.

    ``key_padding_mask``: (B, T) bool or 0/1, True/1 for real tokens (Hugging Face's
    ``attention_mask`` convention). A sequence with no real token attends everywhere and
    every query may attend to itself, so no row of P is empty (no NaN); rows of real
    tokens are unchanged by this.
    """
    if key_padding_mask is None:
        return None, causal
    if key_padding_mask.shape[-1] != seq_len or key_padding_mask.dim() != 2:
        raise ConfigError(
            f"key_padding_mask must be shaped (batch, {seq_len}); "
            f"got {tuple(key_padding_mask.shape)}"
        )
    keep = key_padding_mask.bool()  # (B, T)
    keep = keep | ~keep.any(dim=-1, keepdim=True)
    if not causal:
        return keep[:, None, None, :], False  # (B, 1, 1, T)
    device = keep.device
    tril = torch.ones(seq_len, seq_len, dtype=torch.bool, device=device).tril()
    eye = torch.eye(seq_len, dtype=torch.bool, device=device)
    return (tril & keep[:, None, None, :]) | eye, False  # (B, 1, T, T)


def _mask_signature(attn_mask: torch.Tensor | None) -> tuple | None:
    if attn_mask is None:
        return None
    return attn_mask.dtype, attn_mask.requires_grad, attn_mask.device


class HeadAttention(HeadKinds):
    """Head kinds plus the choice of kernel that computes them, made once per module.

    :meth:`attend` gives the per-head outputs ``z = a V + b P V``. Its kernel
    (:func:`~tokengeo.nn.laplacian_sdpa.plan_kernel`) is chosen the first time the module
    sees an input signature (device, dtype, shape, mask kind, causality, dropout, autocast,
    packed or not) and kept, so a call costs a dictionary lookup, not a planning step.
    ``kernel`` (``auto``, ``lean``, ``compose``, ``triton``) is the benchmark's handle on it.
    """

    def __init__(self, *args, kernel: str = "auto", **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.set_kernel(kernel)

    def set_kernel(self, kernel: str) -> None:
        """Choose the kernel by name (see :data:`~tokengeo.nn.laplacian_sdpa.KERNELS`)."""
        if kernel not in KERNELS:
            raise ConfigError(f"kernel={kernel!r} is not valid; choose one of {list(KERNELS)}")
        self.kernel = kernel
        self._plans: dict[tuple, KernelPlan] = {}

    def attend(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *,
        attn_mask: torch.Tensor | None, is_causal: bool, dropout_p: float,
        edit_pattern: Callable[[torch.Tensor], torch.Tensor] | None = None,
        qkv: torch.Tensor | None = None, z_watched: bool = False,
    ) -> torch.Tensor:
        """Per-head outputs z = a V + b P V; q, k, v and z are (N, T, H, Dh).

        ``edit_pattern``: P (N, H, T, T) is materialised and what ``edit_pattern(P)``
        returns multiplies V (after attention dropout), so a hook that replaces the pattern
        changes the output. ``qkv``: the (N, T, 3, H, Dh) tensor q, k, v are ``unbind(2)``
        of, when nothing watches their gradients (one gradient written for it).
        ``z_watched``: a hook sees z and may edit it in place, so z is not the buffer the
        lean kernel saves for its backward.
        """
        qh, kh, vh = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # (N, H, T, Dh)
        if edit_pattern is not None:
            pattern = edit_pattern(attention_pattern(qh, kh, attn_mask, is_causal))
            pv = (F.dropout(pattern, dropout_p) if dropout_p > 0 else pattern) @ vh
            return self.combine(v, pv.transpose(1, 2))  # (N, T, H, Dh)
        if not self.uses_values() or (self.mix_coef is not None and self.mix_coef.dim() == 3):
            pv = F.scaled_dot_product_attention(  # standard heads, or per-slice mixed (a, b)
                qh, kh, vh, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal)
            return self.combine(v, pv.transpose(1, 2))  # (N, T, H, Dh)
        a, b = self.head_coefficients()  # (H,) each
        qh, kh, vh, attn_mask = autocast_inputs(qh, kh, vh, attn_mask)
        if self.kernel == "auto" and compiling():  # one graph: see tokengeo.nn.compiled
            return run_plan(KernelPlan("compose", self.head_runs), qh, kh, vh, a, b,
                            attn_mask=attn_mask, is_causal=is_causal, dropout_p=dropout_p,
                            scale=None)
        packed = qkv is not None and qkv.requires_grad and qkv.dtype == qh.dtype
        grad = torch.is_grad_enabled()
        coef_grad = a.requires_grad or b.requires_grad
        key = (qh.device, qh.dtype, qh.shape, _mask_signature(attn_mask), is_causal,
               dropout_p > 0, packed, z_watched and grad, coef_grad)
        plan = self._plans.get(key)
        if plan is None:
            if len(self._plans) >= MAX_PLANS:  # e.g. decoding, one length after another
                self._plans.clear()
            kernel = "compose" if z_watched and grad else self.kernel
            plan = self._plans[key] = plan_kernel(
                qh, kh, vh, runs=self.head_runs, attn_mask=attn_mask, is_causal=is_causal,
                dropout_p=dropout_p, kernel=kernel, packed=packed, coef_grad=coef_grad)
        return run_plan(plan, qh, kh, vh, a, b, attn_mask=attn_mask, is_causal=is_causal,
                        dropout_p=dropout_p, scale=None, qkv=qkv if plan.packed else None)


    def compiled_lean(self, edit_pattern, z_watched: bool) -> bool:
        """Whether to run the attention and its projection under
        :func:`~tokengeo.nn.compiled.keep_only_attention`: torch.compile is tracing,
        ``kernel="auto"``, some head reads V, a backward will follow, and no hook sees P or
        z (they need the tensors the checkpointing would drop)."""
        return (self.kernel == "auto" and compiling() and torch.is_grad_enabled()
                and edit_pattern is None and not z_watched and self.uses_values())


def active(point: HookPoint) -> bool:
    """Whether a hook is attached (``HookPoint.is_active`` without a method call)."""
    return bool(point._forward_hooks or point._forward_pre_hooks)


class MultiHeadAttention(HeadAttention):
    """Self-attention with per-head kinds (``attention`` / ``laplacian`` / ``mixed``).

    Parameters are laid out as in nanoGPT: ``qkv`` (d → 3d, columns ``[q | k | v]``, each
    head-major (H, Dh)) and ``proj`` (d → d). Laplacian heads add no parameters; each mixed
    head adds two scalars ``mix_coef[i] = (a, b)``; ``fixed`` heads compute the given
    ``coefficients`` (a, b) (default: the config's ``head_coefficients``, if it has one).

    Hook points, each editable (what a hook returns is what flows on):
    ``hook_q``, ``hook_k``, ``hook_v`` (B, T, H, Dh); ``hook_pattern`` (B, H, T, T), P before
    attention dropout, materialised only when hooked, and the returned pattern is the one
    applied to V; ``hook_z`` (B, T, H, Dh), the per-head outputs before ``proj``.
    """

    def __init__(
        self, cfg: BlockConfig, head_kinds: Sequence[str] | None = None, *,
        causal: bool = False, kernel: str = "auto",
        coefficients: tuple[float, float] | None = None,
    ) -> None:
        if cfg.d_model % cfg.n_heads:
            raise ConfigError(f"d_model={cfg.d_model} is not divisible by n_heads={cfg.n_heads}")
        if coefficients is None:  # a config may carry the (a, b) of its 'fixed' heads
            coefficients = getattr(cfg, "head_coefficients", None)
        super().__init__(cfg.n_heads, head_kinds, cfg.mixed_init, kernel=kernel,
                         coefficients=coefficients)
        self.d_model, self.head_dim = cfg.d_model, cfg.d_model // cfg.n_heads
        self.causal, self.attn_dropout = causal, cfg.attn_dropout
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model, bias=cfg.bias)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model, bias=cfg.bias)
        self.proj_drop = nn.Dropout(cfg.dropout)
        for name in ATTENTION_HOOKS:
            setattr(self, name, HookPoint())

    def forward(
        self, x: torch.Tensor, key_padding_mask: torch.Tensor | None = None
    ) -> torch.Tensor:  # (B, T, d) -> (B, T, d)
        B, T, D = x.shape
        qkv = self.qkv(x).view(B, T, 3, self.n_heads, self.head_dim)
        q, k, v = qkv.unbind(dim=2)  # each (B, T, H, Dh)
        if active(self.hook_q) or active(self.hook_k) or active(self.hook_v):
            q, k, v = self.hook_q(q), self.hook_k(k), self.hook_v(v)
            qkv = None  # a hook may replace q, k, v or watch their gradients
        attn_mask, is_causal = build_attn_mask(key_padding_mask, T, self.causal)
        dropout_p = self.attn_dropout if self.training else 0.0
        edit = self.hook_pattern if active(self.hook_pattern) else None
        z_watched = active(self.hook_z)

        def attend_project(q, k, v):  # (B, T, H, Dh) each -> (B, T, d)
            z = self.attend(q, k, v, attn_mask=attn_mask, is_causal=is_causal,
                            dropout_p=dropout_p, edit_pattern=edit, qkv=qkv,
                            z_watched=z_watched)  # (B, T, H, Dh)
            if z_watched:
                z = self.hook_z(z)
            return self.proj(z.reshape(B, T, D))

        if self.compiled_lean(edit, z_watched):
            return self.proj_drop(keep_only_attention(attend_project, q, k, v))
        return self.proj_drop(attend_project(q, k, v))

    def extra_repr(self) -> str:
        counts = {k: self.head_kinds.count(k) for k in dict.fromkeys(self.head_kinds)}
        return (f"d_model={self.d_model}, n_heads={self.n_heads}, causal={self.causal}, "
                f"heads={counts}")
