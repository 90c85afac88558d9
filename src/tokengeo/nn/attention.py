"""Multi-head self-attention whose heads may be attention, Laplacian or learnt mixtures.

Head ``h`` outputs ``a_h V + b_h P V`` (Zhang & Papyan, arXiv 2602.09297, Eq. 2 with
P replaced by I − P for Laplacian heads; :class:`~tokengeo.nn.heads.HeadKinds`):

* attention  (a, b) = (0, 1):   P V
* laplacian  (a, b) = (1, −1):  (I − P) V = V − P V, the random-walk graph Laplacian of
  the attention graph acting on the values (heat-diffusion smoothing);
* mixed      learnable (a, b), initialised as attention or Laplacian.

:func:`attend` computes ``P V`` with ``F.scaled_dot_product_attention`` and combines it
with V: a Laplacian head costs one subtraction and never builds the T×T matrix I − P.
When the pattern is hooked it materialises P, shows it to the hook and uses what the hook
returns (TransformerLens semantics: an edited pattern is the one applied to V).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from tokengeo.errors import ConfigError
from tokengeo.hooks import HookPoint
from tokengeo.nn.config import BlockConfig
from tokengeo.nn.heads import HeadKinds
from tokengeo.nn.laplacian_sdpa import laplacian_attention

ATTENTION_HOOKS = ("hook_q", "hook_k", "hook_v", "hook_pattern", "hook_z")


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


def attention_pattern(
    q: torch.Tensor, k: torch.Tensor, attn_mask: torch.Tensor | None = None,
    is_causal: bool = False,
) -> torch.Tensor:
    """P = softmax(QKᵀ/√Dh) with masked keys at −∞; q, k (N, H, T, Dh) -> (N, H, T, T)."""
    T, Dh = q.shape[-2], q.shape[-1]
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(Dh)  # (N, H, T, T)
    if is_causal:
        causal = torch.ones(T, T, dtype=torch.bool, device=q.device).tril()
        scores = scores.masked_fill(~causal, float("-inf"))
    if attn_mask is not None:
        scores = scores.masked_fill(~attn_mask, float("-inf"))
    return scores.softmax(dim=-1)


def attention_reference(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    coef_a: torch.Tensor,
    coef_b: torch.Tensor,
    attn_mask: torch.Tensor | None = None,
    is_causal: bool = False,
    dropout_p: float = 0.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Slow reference: materialise P and return (a V + b P V, P).

    q, k, v: (B, H, T, Dh); coef_a, coef_b: (H,). Dropout (if any) acts on P, as in SDPA;
    the returned pattern is P before dropout.
    """
    pattern = attention_pattern(q, k, attn_mask, is_causal)  # (B, H, T, T)
    p = F.dropout(pattern, dropout_p) if dropout_p > 0 else pattern
    out = coef_a.view(1, -1, 1, 1) * v + coef_b.view(1, -1, 1, 1) * (p @ v)
    return out, pattern


def attend(
    heads: HeadKinds,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    attn_mask: torch.Tensor | None,
    is_causal: bool,
    dropout_p: float,
    edit_pattern: Callable[[torch.Tensor], torch.Tensor] | None = None,
    lean: bool = True,
    qkv: torch.Tensor | None = None,
) -> torch.Tensor:
    """Per-head outputs z = a V + b P V of ``heads``; q, k, v and z are (N, T, H, Dh).

    Without ``edit_pattern`` P V comes from the fused kernel. With it, P (N, H, T, T) is
    materialised, ``edit_pattern(P)`` is what multiplies V (after attention dropout), so a
    hook that replaces the pattern changes the output.

    Layers with Laplacian or mixed heads, when gradients are recorded and ``lean`` (the
    caller does not expose z to a hook that might edit it in place), go through
    :func:`~tokengeo.nn.laplacian_sdpa.laplacian_attention`, which keeps only what standard
    attention keeps for the backward (same numbers, standard attention's memory).
    ``qkv``: the (N, T, 3, H, Dh) tensor q, k, v are ``unbind(2)`` of, when nothing
    watches their gradients; that path then writes one gradient for it (fewer passes).
    """
    qh, kh, vh = (t.transpose(1, 2) for t in (q, k, v))  # (N, H, T, Dh)
    if edit_pattern is not None:
        pattern = edit_pattern(attention_pattern(qh, kh, attn_mask, is_causal))
        pv = (F.dropout(pattern, dropout_p) if dropout_p > 0 else pattern) @ vh
        return heads.combine(v, pv.transpose(1, 2))  # (N, T, H, Dh)
    if lean and heads.uses_values() and torch.is_grad_enabled():
        a, b = heads.head_coefficients()
        if a.dim() == 1:  # per-slice mixed coefficients ((p, H)) take the composition
            return laplacian_attention(qh, kh, vh, a, b, attn_mask=attn_mask,
                                       is_causal=is_causal, dropout_p=dropout_p,
                                       head_kinds=heads.head_kinds, qkv=qkv)
    pv = F.scaled_dot_product_attention(
        qh, kh, vh, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal
    )  # (N, H, T, Dh)
    return heads.combine(v, pv.transpose(1, 2))  # (N, T, H, Dh)


class MultiHeadAttention(HeadKinds):
    """Self-attention with per-head kinds (``attention`` / ``laplacian`` / ``mixed``).

    Parameters are laid out as in nanoGPT: ``qkv`` (d → 3d, columns ``[q | k | v]``, each
    head-major (H, Dh)) and ``proj`` (d → d). Laplacian heads add no parameters; each mixed
    head adds two scalars ``mix_coef[i] = (a, b)``.

    Hook points, each editable (what a hook returns is what flows on):
    ``hook_q``, ``hook_k``, ``hook_v`` (B, T, H, Dh); ``hook_pattern`` (B, H, T, T), P before
    attention dropout, materialised only when hooked, and the returned pattern is the one
    applied to V; ``hook_z`` (B, T, H, Dh), the per-head outputs before ``proj``.
    """

    def __init__(
        self, cfg: BlockConfig, head_kinds: Sequence[str] | None = None, *, causal: bool = False
    ) -> None:
        if cfg.d_model % cfg.n_heads:
            raise ConfigError(f"d_model={cfg.d_model} is not divisible by n_heads={cfg.n_heads}")
        super().__init__(cfg.n_heads, head_kinds, cfg.mixed_init)
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
        q, k, v = qkv.unbind(dim=2)
        q, k, v = self.hook_q(q), self.hook_k(k), self.hook_v(v)  # each (B, T, H, Dh)
        if self.hook_q.is_active() or self.hook_k.is_active() or self.hook_v.is_active():
            qkv = None  # a hook may replace q, k, v or watch their gradients
        attn_mask, is_causal = build_attn_mask(key_padding_mask, T, self.causal)
        dropout_p = self.attn_dropout if self.training else 0.0
        edit = self.hook_pattern if self.hook_pattern.is_active() else None
        lean = not self.hook_z.is_active()
        z = self.hook_z(attend(self, q, k, v, attn_mask, is_causal, dropout_p, edit, lean, qkv))
        return self.proj_drop(self.proj(z.reshape(B, T, D)))

    def extra_repr(self) -> str:
        counts = {k: self.head_kinds.count(k) for k in dict.fromkeys(self.head_kinds)}
        return (f"d_model={self.d_model}, n_heads={self.n_heads}, causal={self.causal}, "
                f"heads={counts}")
