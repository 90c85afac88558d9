"""Slice-aware sinusoidal positional encoding of the L-Transformer.

El Ichi et al. (arXiv 2603.05727, slice-aware positional encoding) give each spectral
slice k its own frequency scale α_k. tokengeo adds to slice k of X̂ (the transform domain)
the sinusoidal code of Vaswani et al. (2017, Sec. 3.5) of width d_s with positions scaled
by α_k:

    PE_k(t, i) = sin(α_k t ω_⌊i/2⌋) for even i,  cos(α_k t ω_⌊i/2⌋) for odd i,
    ω_j = 10000^(−2j / d_s),   t = 0..T−1,  i = 0..d_s−1,  k = 0..p−1.

Frequency-scale strategies (our reading of the paper's five; the formulas are ours):

    identity     α_k = 1           (every slice gets the standard code)
    linear       α_k = 1 + k
    harmonic     α_k = 1 / (1 + k)
    exponential  α_k = 2^k
    learnable    α_k = exp(β_k), β_k learnt, initialised at 0 (α = 1): positive by construction
"""

from __future__ import annotations

import torch
from torch import nn

from tokengeo.errors import ConfigError
from tokengeo.nn.kernels.checkpointed import compiling

ALPHAS = ("identity", "linear", "harmonic", "exponential", "learnable")


def check_alpha(name: str) -> None:
    if name not in ALPHAS:
        raise ConfigError(f"alpha={name!r} is not valid; choose one of {list(ALPHAS)}")


def alpha_schedule(name: str, p: int) -> torch.Tensor:
    """The fixed α_k, k = 0..p−1, of a strategy (float64, (p,)); ``learnable`` starts at 1."""
    check_alpha(name)
    k = torch.arange(p, dtype=torch.float64)
    return {
        "identity": torch.ones_like(k),
        "linear": 1.0 + k,
        "harmonic": 1.0 / (1.0 + k),
        "exponential": 2.0**k,
        "learnable": torch.ones_like(k),
    }[name]


def sinusoid(positions: torch.Tensor, d: int, base: float = 10000.0) -> torch.Tensor:
    """sin/cos code of real-valued positions, (..., T) -> (..., T, d) (Vaswani et al. 2017).

    code[..., t, i] = sin(t ω_⌊i/2⌋) for even i, cos(t ω_⌊i/2⌋) for odd i, ω_j = base^(−2j/d).
    """
    i = torch.arange(d, device=positions.device)
    omega = base ** (-2.0 * torch.div(i, 2, rounding_mode="floor") / d)  # (d,)
    angle = positions.unsqueeze(-1) * omega.to(positions.dtype)  # (..., T, d)
    return torch.where(i % 2 == 0, angle.sin(), angle.cos())


class SlicePositionalEncoding(nn.Module):
    """PE_k(t) for every slice, ``(p, 1, T, d_s)``, to add to X̂ stored as (p, B, T, d_s)."""

    def __init__(self, p: int, d_slice: int, alpha: str = "identity", base: float = 10000.0):
        super().__init__()
        self.p, self.d_slice, self.alpha_name, self.base = p, d_slice, alpha, base
        init = alpha_schedule(alpha, p).float()
        if alpha == "learnable":
            self.log_alpha = nn.Parameter(init.log())  # β_k
        else:
            self.register_buffer("fixed_alpha", init, persistent=False)

    def alphas(self) -> torch.Tensor:  # (p,)
        return self.log_alpha.exp() if self.alpha_name == "learnable" else self.fixed_alpha

    def forward(self, seq_len: int) -> torch.Tensor:  # -> (p, 1, T, d_s)
        if self.alpha_name == "learnable" or compiling():  # a compiled graph folds it
            return self._code(seq_len)
        # fixed α: the code is a constant, computed once per length, device and dtype
        # (a sin, a cos and a select over p·T·d_s entries saved at every step)
        key = (seq_len, self.fixed_alpha.device, self.fixed_alpha.dtype)
        cached = self.__dict__.get("_cached_code")
        if cached is not None and cached[0] == key:
            return cached[1]
        code = self._code(seq_len)
        if not torch.is_inference_mode_enabled():  # inference tensors cannot enter autograd
            self.__dict__["_cached_code"] = (key, code)
        return code

    def _code(self, seq_len: int) -> torch.Tensor:
        alpha = self.alphas()
        t = torch.arange(seq_len, device=alpha.device, dtype=alpha.dtype)
        return sinusoid(alpha[:, None] * t, self.d_slice, self.base).unsqueeze(1)

    def extra_repr(self) -> str:
        return f"p={self.p}, d_slice={self.d_slice}, alpha={self.alpha_name!r}"
