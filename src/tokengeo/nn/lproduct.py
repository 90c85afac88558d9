"""The L-product and its facewise building blocks, batched over slices.

El Ichi et al. (arXiv 2603.05727, Sec. 2, after Kernfeld, Kilmer & Aeron 2015): for
third-order tensors A ∈ R^{m×n×p}, B ∈ R^{n×l×p} and an invertible Z ∈ R^{p×p},

    A ⋆_L B = (Â △ B̂) ×₃ Z⁻¹,   Â = A ×₃ Z,   B̂ = B ×₃ Z,

where △ multiplies the p frontal slices one by one: (Â △ B̂)[:, :, k] = Â[:, :, k] B̂[:, :, k].
An L-linear layer X ⋆_L W is therefore, in the transform domain, p independent linear maps
X̂_k Ŵ_k. :class:`SliceLinear` holds the Ŵ_k (a bijective reparametrisation of W) as one
(p, d_in, d_out) tensor and applies all of them in one batched matmul.

Layout. A token matrix X ∈ R^{T×d}, d = p·d_s, is the tensor 𝒳 ∈ R^{T×d_s×p} with
𝒳[t, i, k] = X[t, k·d_s + i] (frontal slice k = the k-th block of d_s features). Modules
store it slice-major, ``(p, B, T, d_s)``, so every per-slice map is a ``bmm`` with p as
its batch and no copy; :func:`tokens_to_slices` / :func:`slices_to_tokens` convert.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.autograd.function import once_differentiable

ALL_SLICES = slice(None)


def select_slices(t: torch.Tensor, sl: slice) -> torch.Tensor:
    """``t[sl]``, or ``t`` itself for all slices (indexing would add a slice-backward copy)."""
    return t if sl == ALL_SLICES else t[sl]


def tokens_to_slices(x: torch.Tensor, p: int) -> torch.Tensor:
    """(B, T, p·d_s) -> (p, B, T, d_s), contiguous: slice k = features [k·d_s, (k+1)·d_s)."""
    B, T, d = x.shape
    return x.view(B, T, p, d // p).permute(2, 0, 1, 3).contiguous()


def slices_to_tokens(x: torch.Tensor) -> torch.Tensor:
    """(p, B, T, d_s) -> (B, T, p·d_s), the inverse of :func:`tokens_to_slices`."""
    p, B, T, d_s = x.shape
    return x.permute(1, 2, 0, 3).reshape(B, T, p * d_s)


def mode3_product(x: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    """X ×₃ Z for a tensor with its tube mode last: ``y[..., k] = Σ_j Z[k, j] x[..., j]``."""
    return x @ z.T


def l_product(a: torch.Tensor, b: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    """A ⋆_L B = ((A ×₃ Z) △ (B ×₃ Z)) ×₃ Z⁻¹ (arXiv 2603.05727, Sec. 2).

    a: (m, n, p), b: (n, l, p), z: (p, p) invertible; returns (m, l, p). A slow,
    loop-free reference in the paper's (tube-last) layout, used to test the fast modules.
    """
    a_hat, b_hat = mode3_product(a, z), mode3_product(b, z)
    c_hat = torch.einsum("mnk,nlk->mlk", a_hat, b_hat)  # facewise products
    return mode3_product(c_hat, torch.linalg.inv(z))


class SliceLinear(nn.Module):
    """p affine maps applied facewise in the transform domain: Ŷ_k = X̂_k Ŵ_k + b̂_k.

    ``weight`` (p, d_in, d_out), ``bias`` (p, d_out); one ``baddbmm`` for all slices
    (arXiv 2603.05727, Sec. 3: the L-linear map X ⋆_L W). ``forward(x, sl)`` with
    ``sl = slice(k, k + 1)`` applies slice k's weights only (the sequential mode).
    """

    def __init__(self, p: int, d_in: int, d_out: int, *, bias: bool = True) -> None:
        super().__init__()
        self.p, self.d_in, self.d_out = p, d_in, d_out
        self.weight = nn.Parameter(torch.empty(p, d_in, d_out))
        self.bias = nn.Parameter(torch.empty(p, d_out)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """N(0, 0.02) weights and zero biases, as ``init_weights`` does for ``nn.Linear``."""
        nn.init.normal_(self.weight, std=0.02)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def forward(self, x: torch.Tensor, sl: slice = ALL_SLICES) -> torch.Tensor:
        """(p', ..., d_in) -> (p', ..., d_out), p' the number of slices selected by ``sl``."""
        w = select_slices(self.weight, sl)  # (p', d_in, d_out)
        x2 = x.reshape(x.shape[0], -1, self.d_in)  # (p', N, d_in)
        if self.bias is None:
            y = torch.bmm(x2, w)
        else:
            bias = select_slices(self.bias, sl).unsqueeze(1)  # (p', 1, d_out)
            y = torch.baddbmm(bias, x2, w)  # (p', N, d_out)
        return y.view(*x.shape[:-1], self.d_out)

    def extra_repr(self) -> str:
        return f"p={self.p}, d_in={self.d_in}, d_out={self.d_out}, bias={self.bias is not None}"


class SliceLayerNormFunction(torch.autograd.Function):
    """y = LN(x) ⊙ γ + β over the last axis, one (γ, β) per slice; x (p', N, d_s).

    Saves x and the statistics but not LN(x), which backward recomputes: as much memory as
    ``nn.LayerNorm``'s fused affine, where LN followed by a broadcast ``addcmul`` would keep
    one more activation. Backward: ∂γ = Σ_n ∂y ⊙ LN(x), ∂β = Σ_n ∂y, ∂x = LN-backward(∂y ⊙ γ).
    """

    @staticmethod
    def forward(ctx, x, gain, bias, eps):  # gain, bias: (p', 1, d_s)
        d = x.shape[-1]
        normed, mean, rstd = torch.native_layer_norm(x, (d,), None, None, eps)
        ctx.save_for_backward(x, mean, rstd, gain)
        ctx.has_bias = bias is not None
        return normed.mul_(gain) if bias is None else torch.addcmul(bias, normed, gain)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        x, mean, rstd, gain = ctx.saved_tensors
        normed = (x - mean).mul_(rstd)  # recomputed
        g_gain = (grad * normed).sum(1, keepdim=True)
        g_bias = grad.sum(1, keepdim=True) if ctx.has_bias else None
        g_x, _, _ = torch.ops.aten.native_layer_norm_backward(
            grad * gain, x, [x.shape[-1]], mean, rstd, None, None, [True, False, False]
        )
        return g_x, g_gain, g_bias, None


class SliceLayerNorm(nn.Module):
    """LayerNorm of every slice over its own d_s features, with per-slice gain and bias.

    For slice k: y = (x̂_k − mean(x̂_k)) / √(var(x̂_k) + ε) · γ_k + β_k, the slice-wise
    normalisation of arXiv 2603.05727 (Sec. 3); γ, β are (p, d_s).
    """

    def __init__(self, p: int, d_slice: int, *, eps: float = 1e-5, bias: bool = True) -> None:
        super().__init__()
        self.p, self.d_slice, self.eps = p, d_slice, eps
        self.weight = nn.Parameter(torch.ones(p, d_slice))
        self.bias = nn.Parameter(torch.zeros(p, d_slice)) if bias else None

    def forward(self, x: torch.Tensor, sl: slice = ALL_SLICES) -> torch.Tensor:
        """(p', ..., d_s) -> (p', ..., d_s)."""
        gain = select_slices(self.weight, sl).unsqueeze(1)  # (p', 1, d_s)
        bias = None if self.bias is None else select_slices(self.bias, sl).unsqueeze(1)
        x3 = x.reshape(x.shape[0], -1, self.d_slice)  # (p', N, d_s)
        return SliceLayerNormFunction.apply(x3, gain, bias, self.eps).view(x.shape)

    def extra_repr(self) -> str:
        return f"p={self.p}, d_slice={self.d_slice}, eps={self.eps}"
