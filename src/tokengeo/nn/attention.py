"""Multi-head self-attention whose heads may be attention, Laplacian or learnt mixtures.

Head ``h`` outputs ``a_h V + b_h P V`` (Zhang & Papyan, arXiv 2602.09297, Eq. 2 with
P replaced by I − P for Laplacian heads; :class:`~tokengeo.nn.heads.HeadMixer`):

* attention  (a, b) = (0, 1):   P V
* laplacian  (a, b) = (1, −1):  (I − P) V = V − P V, the random-walk graph Laplacian of
  the attention graph acting on the values (heat-diffusion smoothing);
* mixed      learnable (a, b), initialised as attention or Laplacian.

The maths, read top to bottom, is :mod:`tokengeo.nn.reference`; here
:meth:`HeadAttention.attend` computes the same with a fused kernel chosen once per input
signature from the kernel table (:mod:`tokengeo.nn.kernels`): a Laplacian head costs one
subtraction and never builds the T×T matrix I − P. When the pattern is hooked it
materialises P, shows it to the hook and uses what the hook returns (TransformerLens
semantics: an edited pattern is the one applied to V).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from tokengeo.errors import ConfigError
from tokengeo.hooks import HookPoint
from tokengeo.nn.config import BlockConfig
from tokengeo.nn.heads import HeadMixer
from tokengeo.nn.kernels.checkpointed import compiling, keep_only_attention
from tokengeo.nn.kernels.table import Call, Plan, autocast_inputs, check_kernel_name, plan_kernel
from tokengeo.nn.reference import attention_pattern, attention_reference, attention_scores

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


class HeadAttention(HeadMixer):
    """Head kinds plus the kernel that computes them, chosen once per input signature.

    :meth:`plan` takes the kernel from :data:`~tokengeo.nn.kernels.TABLE` the first time
    the module sees an input signature (device, dtype, shape, mask kind, causality,
    dropout, autocast, packed or not, a hook on z, learning coefficients) and keeps it, so a
    call costs a dictionary lookup, not a planning step; :meth:`attend` runs it. A hooked
    pattern is not planned: P is materialised for the hook and no kernel runs. ``kernel``:
    a name in :data:`~tokengeo.nn.kernels.KERNELS` (``auto``, ``sdpa``,
    ``checkpointed_compose``, ``in_place``, ``compose``); a model takes it from its config's
    ``kernel`` field.
    """

    def __init__(self, *args, kernel: str = "auto", **kwargs) -> None:
        super().__init__(*args, **kwargs)
        check_kernel_name(kernel)
        self.kernel = kernel
        self._plans: dict[tuple, Plan] = {}

    def plan(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *,
        attn_mask: torch.Tensor | None, is_causal: bool, dropout_p: float,
        qkv: torch.Tensor | None = None, hooked: bool = False,
    ) -> Plan:
        """The kernel for q, k, v (N, H, T, Dh), already in the compute dtype.

        ``qkv``: the (N, T, 3, H, Dh) tensor q, k, v are views of, when nothing watches
        their gradients; ``hooked``: a hook sees z."""
        packed = qkv is not None and qkv.requires_grad and qkv.dtype == q.dtype
        hooked = hooked and torch.is_grad_enabled()  # (each read only where it matters)
        mix = self.mix_coef
        coef_grad = mix is not None and mix.requires_grad and torch.is_grad_enabled()

        def call() -> Call:
            return Call(q=q, k=k, v=v, runs=self.head_runs, attn_mask=attn_mask,
                        is_causal=is_causal, dropout_p=dropout_p, packed=packed,
                        coef_grad=coef_grad, per_slice=mix is not None and mix.dim() == 3,
                        hooked=hooked)

        if compiling():  # planned while tracing: the graph keeps the choice, no cache
            return plan_kernel(call(), self.kernel)
        mask = None if attn_mask is None else (  # its kind, not its values
            attn_mask.dtype, attn_mask.requires_grad, attn_mask.device)
        key = (q.device, q.dtype, q.shape, mask, is_causal, dropout_p > 0, packed, hooked,
               coef_grad)
        plan = self._plans.get(key)
        if plan is None:
            if len(self._plans) >= MAX_PLANS:  # e.g. decoding, one length after another
                self._plans.clear()
            plan = self._plans[key] = plan_kernel(call(), self.kernel)
        return plan

    def attend(
        self, plan: Plan | None, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *,
        attn_mask: torch.Tensor | None, is_causal: bool, dropout_p: float,
        edit_pattern: Callable[[torch.Tensor], torch.Tensor] | None = None,
        qkv: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Per-head outputs z = a V + b P V (N, T, H, Dh) of q, k, v (N, H, T, Dh).

        ``edit_pattern``: P (N, H, T, T) is materialised and what ``edit_pattern(P)``
        returns multiplies V (after attention dropout), so a hook that replaces the pattern
        changes the output; no kernel runs then (``plan`` may be None). ``qkv``: as in
        :meth:`plan`."""
        if edit_pattern is not None:
            pattern = edit_pattern(attention_pattern(q, k, attn_mask, is_causal))
            pv = (F.dropout(pattern, dropout_p) if dropout_p > 0 else pattern) @ v
            return self.combine(v.transpose(1, 2), pv.transpose(1, 2))  # (N, T, H, Dh)
        a, b = self.head_coefficients()  # (H,) each, or (p, H) per slice
        return plan.kernel.run(plan, q, k, v, a, b, attn_mask=attn_mask, is_causal=is_causal,
                               dropout_p=dropout_p, scale=None, qkv=qkv)

    def attend_project(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out_shape: tuple[int, ...],
        *, qkv: torch.Tensor | None,
        attn_mask: torch.Tensor | None, is_causal: bool, dropout_p: float,
        edit_pattern: Callable[[torch.Tensor], torch.Tensor] | None = None,
        hook_z: Callable[[torch.Tensor], torch.Tensor] | None = None,
        z_hooked: bool | None = None,
    ) -> torch.Tensor:
        """``self.proj(z.reshape(out_shape))`` for z of q, k, v (N, T, H, Dh): planned,
        hooked (``hook_z`` sees z and may replace it) and, where the plan says so, inside
        selective checkpointing (:func:`~tokengeo.nn.kernels.checkpointed.keep_only_attention`).
        ``z_hooked``: whether something is attached to ``hook_z`` (default: it is given), for
        the plan; an unhooked ``hook_z`` is still called (an identity), so that tools wrapping
        module calls see it."""
        qh, kh, vh, attn_mask = autocast_inputs(  # (N, H, T, Dh) each
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), attn_mask)
        z_hooked = hook_z is not None if z_hooked is None else z_hooked
        plan = None if edit_pattern is not None else self.plan(  # a hooked P: no kernel
            qh, kh, vh, attn_mask=attn_mask, is_causal=is_causal, dropout_p=dropout_p,
            qkv=qkv, hooked=z_hooked)

        def run(qh, kh, vh):
            z = self.attend(plan, qh, kh, vh, attn_mask=attn_mask, is_causal=is_causal,
                            dropout_p=dropout_p, edit_pattern=edit_pattern, qkv=qkv)
            return self.proj((z if hook_z is None else hook_z(z)).reshape(out_shape))

        if plan is not None and plan.kernel.checkpoints:
            return keep_only_attention(run, qh, kh, vh)
        return run(qh, kh, vh)


class HeadProjection(nn.Linear):
    """The output projection ``z W_Oᵀ + b`` of H heads; when its ``result_point`` (the
    attention's ``hook_result``) is hooked, the per-head terms ``r_h = z_h W_O_hᵀ`` (…, H, d)
    are formed, shown to it, and summed: ``out = Σ_h r_h + b`` (as TransformerLens'
    ``hook_result``). Unhooked it is ``nn.Linear`` (same parameters and state dict)."""

    def __init__(self, d_in: int, d_out: int, *, bias: bool, n_heads: int) -> None:
        super().__init__(d_in, d_out, bias=bias)
        self.n_heads = n_heads

    def forward(self, z: torch.Tensor) -> torch.Tensor:  # (..., H*Dh) -> (..., d)
        point = self.__dict__.get("result_point")
        if point is None or not active(point):
            return F.linear(z, self.weight, self.bias)
        heads = z.unflatten(-1, (self.n_heads, -1))  # (..., H, Dh)
        w = self.weight.unflatten(1, (self.n_heads, -1))  # (d, H, Dh)
        result = point(torch.einsum("...hk,dhk->...hd", heads, w))  # (..., H, d)
        out = result.sum(dim=-2)
        return out if self.bias is None else out + self.bias


def active(point: HookPoint) -> bool:
    """Whether a hook is attached (``HookPoint.is_active`` without a method call)."""
    return bool(point._forward_hooks or point._forward_pre_hooks)


def watched(point: HookPoint) -> bool:
    """Whether something sees the point's tensor: a hook attached (:func:`active`), or a tool
    that wraps the point's calls with a ``forward`` of its own on the instance (nnsight
    does), which may edit the tensor in place or read its gradient. The kernels then treat
    the tensor as hooked: no fused kernel saves it, no packed gradient bypasses it."""
    return active(point) or "forward" in point.__dict__


class MultiHeadAttention(HeadAttention):
    """Self-attention with per-head kinds (``attention`` / ``laplacian`` / ``mixed``).

    Parameters are laid out as in nanoGPT: ``qkv`` (d → 3d, columns ``[q | k | v]``, each
    head-major (H, Dh)) and ``proj`` (d → d). Laplacian heads add no parameters; each mixed
    head adds two scalars ``mix_coef[i] = (a, b)``; ``fixed`` heads compute the given
    ``coefficients`` (a, b) (default: the config's ``head_coefficients``, if it has one).

    Hook points, each editable (what a hook returns is what flows on):
    ``hook_q``, ``hook_k``, ``hook_v`` (B, T, H, Dh); ``hook_attn_scores`` (B, H, T, T), the
    logits of P (``QKᵀ/√Dh``, masked keys at −∞); ``hook_pattern`` (B, H, T, T), P before
    attention dropout, and the returned pattern is the one applied to V; ``hook_z``
    (B, T, H, Dh), the per-head outputs before ``proj``; ``hook_result`` (B, T, H, d), each
    head's term ``z_h W_O_h`` of the output (which is their sum plus the bias). The scores,
    the pattern and the results are formed only when hooked.
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
        self.proj = HeadProjection(cfg.d_model, cfg.d_model, bias=cfg.bias, n_heads=cfg.n_heads)
        self.proj_drop = nn.Dropout(cfg.dropout)
        for name in ATTENTION_HOOKS:
            setattr(self, name, HookPoint())
        self.hook_attn_scores = HookPoint()
        self.hook_result = HookPoint()
        self.proj.__dict__["result_point"] = self.hook_result  # a reference, no second name

    def forward(
        self, x: torch.Tensor, key_padding_mask: torch.Tensor | None = None
    ) -> torch.Tensor:  # (B, T, d) -> (B, T, d)
        B, T, D = x.shape
        qkv = self.qkv(x).view(B, T, 3, self.n_heads, self.head_dim)
        q, k, v = qkv.unbind(dim=2)  # each (B, T, H, Dh)
        hooked = watched(self.hook_q) or watched(self.hook_k) or watched(self.hook_v)
        seen = self.hook_q(q), self.hook_k(k), self.hook_v(v)  # identity calls when unhooked
        if hooked or any(a is not b for a, b in zip(seen, (q, k, v), strict=True)):
            q, k, v = seen
            qkv = None  # a hook may replace q, k, v or watch their gradients
        attn_mask, is_causal = build_attn_mask(key_padding_mask, T, self.causal)
        return self.proj_drop(self.attend_project(
            q, k, v, (B, T, D), qkv=qkv, attn_mask=attn_mask,
            is_causal=is_causal, dropout_p=self.attn_dropout if self.training else 0.0,
            edit_pattern=self._pattern_hook(q, k, attn_mask, is_causal),
            hook_z=self.hook_z, z_hooked=watched(self.hook_z)))

    def _pattern_hook(self, q: torch.Tensor, k: torch.Tensor, attn_mask: torch.Tensor | None,
                      is_causal: bool) -> Callable[[torch.Tensor], torch.Tensor] | None:
        """What the attention does with a materialised P: nothing when neither the scores nor
        the pattern is hooked; ``hook_pattern`` alone; with ``hook_attn_scores``, P formed
        again from the (hooked) scores of q, k (B, T, H, Dh), then ``hook_pattern``."""
        if not active(self.hook_attn_scores):
            return self.hook_pattern if active(self.hook_pattern) else None

        def from_scores(pattern: torch.Tensor) -> torch.Tensor:
            scores = attention_scores(q.transpose(1, 2).to(pattern.dtype),
                                      k.transpose(1, 2).to(pattern.dtype), attn_mask, is_causal)
            return self.hook_pattern(self.hook_attn_scores(scores).softmax(dim=-1))

        return from_scores

    def extra_repr(self) -> str:
        counts = {k: self.head_kinds.count(k) for k in dict.fromkeys(self.head_kinds)}
        return (f"d_model={self.d_model}, n_heads={self.n_heads}, causal={self.causal}, "
                f"heads={counts}")
