"""Multi-head self-attention whose heads may be attention, Laplacian or learnt mixtures.

Head ``h`` outputs ``a_h V + b_h P V`` (Zhang & Papyan, arXiv 2602.09297, Eq. 2 with
P replaced by I − P for Laplacian heads):

* attention  (a, b) = (0, 1):   P V
* laplacian  (a, b) = (1, −1):  (I − P) V = V − P V, the random-walk graph Laplacian of
  the attention graph acting on the values (heat-diffusion smoothing);
* mixed      learnable (a, b), initialised as attention or Laplacian.

The fused path computes ``P V`` with ``F.scaled_dot_product_attention`` and combines it
with V: a Laplacian head costs one subtraction and never builds the T×T matrix I − P.
The reference path materialises P; it is used by tests and whenever the attention
pattern is requested (``hook_pattern`` is hooked).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from tokengeo.errors import ConfigError
from tokengeo.hooks import HookPoint
from tokengeo.nn.heads import KIND_COEFFICIENTS, MIXED_INITS, check_head_kinds


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


def combine_heads(
    v: torch.Tensor,
    pv: torch.Tensor,
    coef_a: torch.Tensor | None,
    coef_b: torch.Tensor | None,
    laplacian: torch.Tensor | None,
    all_laplacian: bool = False,
) -> torch.Tensor:
    """Per-head output ``a_h V + b_h P V`` from ``V`` and ``P V``, both (B, T, H, Dh).

    ``laplacian`` (H,) bool selects heads computing ``V − P V`` when there are no mixed
    heads (``all_laplacian`` says every head does, skipping the select); otherwise
    ``coef_a``, ``coef_b`` (H,) give every head's coefficients. Working in the
    (B, T, H, Dh) layout lets the result be contiguous for the output projection, so a
    Laplacian head's subtraction replaces the copy that merging heads costs anyway.
    """
    if coef_a is not None:
        return coef_a.view(1, 1, -1, 1) * v + coef_b.view(1, 1, -1, 1) * pv
    if laplacian is None:
        return pv
    if all_laplacian:
        return v - pv
    return torch.where(laplacian.view(1, 1, -1, 1), v - pv, pv)


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
    """Slow reference: materialise P = softmax(QKᵀ/√Dh) and return (a V + b P V, P).

    q, k, v: (B, H, T, Dh); coef_a, coef_b: (H,). Dropout (if any) acts on P, as in SDPA;
    the returned pattern is P before dropout.
    """
    T, Dh = q.shape[-2], q.shape[-1]
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(Dh)  # (B, H, T, T)
    if is_causal:
        causal = torch.ones(T, T, dtype=torch.bool, device=q.device).tril()
        scores = scores.masked_fill(~causal, float("-inf"))
    if attn_mask is not None:
        scores = scores.masked_fill(~attn_mask, float("-inf"))
    pattern = scores.softmax(dim=-1)  # (B, H, T, T)
    p = F.dropout(pattern, dropout_p) if dropout_p > 0 else pattern
    out = coef_a.view(1, -1, 1, 1) * v + coef_b.view(1, -1, 1, 1) * (p @ v)
    return out, pattern


def register_head_kinds(
    module: nn.Module, kinds: Sequence[str], mixed_init: str, slices: int | None = None
) -> None:
    """Give ``module`` its per-head kinds as data (one place for every attention module).

    Sets ``head_kinds``, ``n_laplacian``, buffers ``coef_fixed`` (H, 2) (the fixed (a, b)
    of each head), ``laplacian_mask`` (H,), ``mixed_index``, and the learnable ``mix_coef``
    ((n_mixed, 2), or (slices, n_mixed, 2) for per-slice heads) initialised as
    ``mixed_init``; ``mix_coef`` is None without mixed heads.
    """
    module.head_kinds = check_head_kinds(kinds, module.n_heads)
    fixed = [KIND_COEFFICIENTS.get(k, (0.0, 0.0)) for k in module.head_kinds]
    module.register_buffer("coef_fixed", torch.tensor(fixed), persistent=False)  # (H, 2)
    lap = torch.tensor([k == "laplacian" for k in module.head_kinds])
    module.n_laplacian = module.head_kinds.count("laplacian")
    module.register_buffer("laplacian_mask", lap, persistent=False)  # (H,)
    mixed = [h for h, k in enumerate(module.head_kinds) if k == "mixed"]
    module.register_buffer("mixed_index", torch.tensor(mixed, dtype=torch.long),
                           persistent=False)
    module.mix_coef = None
    if mixed:
        if mixed_init not in MIXED_INITS:
            raise ConfigError(f"mixed_init={mixed_init!r}; choose one of {list(MIXED_INITS)}")
        init = torch.tensor([KIND_COEFFICIENTS[mixed_init]] * len(mixed))  # (n_mixed, 2)
        module.mix_coef = nn.Parameter(init if slices is None else init.repeat(slices, 1, 1))


class MultiHeadAttention(nn.Module):
    """Self-attention with per-head kinds (``attention`` / ``laplacian`` / ``mixed``).

    Parameters are laid out as in nanoGPT: ``qkv`` (d → 3d, columns ``[q | k | v]``, each
    head-major (H, Dh)) and ``proj`` (d → d). Laplacian heads add no parameters; each mixed
    head adds two scalars ``mix_coef[i] = (a, b)``.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        *,
        head_kinds: Sequence[str] | None = None,
        mixed_init: str = "laplacian",
        causal: bool = False,
        attn_dropout: float = 0.0,
        proj_dropout: float = 0.0,
        bias: bool = True,
    ) -> None:
        super().__init__()
        if d_model % n_heads:
            raise ConfigError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        self.d_model, self.n_heads, self.head_dim = d_model, n_heads, d_model // n_heads
        self.causal, self.attn_dropout = causal, attn_dropout
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.proj = nn.Linear(d_model, d_model, bias=bias)
        self.proj_drop = nn.Dropout(proj_dropout)
        register_head_kinds(self, head_kinds or ("attention",) * n_heads, mixed_init)
        for name in ("hook_q", "hook_k", "hook_v", "hook_pattern", "hook_z"):
            setattr(self, name, HookPoint())

    def head_coefficients(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(a, b), each (H,): head h outputs a_h V + b_h P V."""
        coef = self.coef_fixed.to(self.qkv.weight.dtype)
        if self.mix_coef is not None:
            coef = coef.index_put((self.mixed_index,), self.mix_coef)
        return coef[:, 0], coef[:, 1]

    def forward(
        self, x: torch.Tensor, key_padding_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        B, T, D = x.shape
        H, Dh = self.n_heads, self.head_dim
        q, k, v = self.qkv(x).view(B, T, 3, H, Dh).unbind(dim=2)  # each (B, T, H, Dh)
        q, k, v = self.hook_q(q), self.hook_k(k), self.hook_v(v)
        v_bthd = v
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # (B, H, T, Dh)
        attn_mask, is_causal = build_attn_mask(key_padding_mask, T, self.causal)
        dropout_p = self.attn_dropout if self.training else 0.0
        if self.hook_pattern.is_active():
            a, b = self.head_coefficients()
            z, pattern = attention_reference(q, k, v, a, b, attn_mask, is_causal, dropout_p)
            z = z.transpose(1, 2)  # (B, T, H, Dh)
            self.hook_pattern(pattern)
        else:
            pv = F.scaled_dot_product_attention(
                q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal
            )  # (B, H, T, Dh)
            z = self._combine(v_bthd, pv.transpose(1, 2))  # (B, T, H, Dh)
        z = self.hook_z(z)
        return self.proj_drop(self.proj(z.reshape(B, T, D)))

    def _combine(self, v: torch.Tensor, pv: torch.Tensor) -> torch.Tensor:
        if self.mix_coef is not None:
            a, b = self.head_coefficients()
            return combine_heads(v, pv, a, b, None)
        if self.n_laplacian == 0:
            return pv
        all_lap = self.n_laplacian == self.n_heads
        return combine_heads(v, pv, None, None, self.laplacian_mask, all_lap)

    def extra_repr(self) -> str:
        counts = {k: self.head_kinds.count(k) for k in dict.fromkeys(self.head_kinds)}
        return (f"d_model={self.d_model}, n_heads={self.n_heads}, causal={self.causal}, "
                f"heads={counts}")
