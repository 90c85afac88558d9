"""The L-product and its facewise building blocks, batched over slices.

El Ichi et al. (arXiv 2603.05727, the L-product, after Kernfeld, Kilmer & Aeron 2015): for
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
import torch.nn.functional as F
from torch import nn

from tokengeo.hooks import HookPoint

Affine = tuple[torch.Tensor, torch.Tensor | None]  # (gain, shift), each (p, d)


def tokens_to_slices(x: torch.Tensor, p: int) -> torch.Tensor:
    """(B, T, p·d_s) -> (p, B, T, d_s), contiguous: slice k = features [k·d_s, (k+1)·d_s)."""
    B, T, d = x.shape
    return x.view(B, T, p, d // p).permute(2, 0, 1, 3).contiguous()


def slices_to_tokens(x: torch.Tensor) -> torch.Tensor:
    """(p, B, T, d_s) -> (B, T, p·d_s), the inverse of :func:`tokens_to_slices`."""
    p, B, T, d_s = x.shape
    return x.permute(1, 2, 0, 3).reshape(B, T, p * d_s)


def hook_slices(point: HookPoint, x: torch.Tensor) -> torch.Tensor:
    """Show ``x`` (p, B, T, d) to ``point`` as (B, T, p·d) and return what it returns
    (as (p, B, T, d)); a no-op when unhooked (the reshape costs a copy)."""
    if not point.is_active():
        return x
    return tokens_to_slices(point(slices_to_tokens(x)), x.shape[0])


def mode3_product(x: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    """X ×₃ Z for a tensor with its tube mode last: ``y[..., k] = Σ_j Z[k, j] x[..., j]``."""
    return x @ z.T


def l_product(a: torch.Tensor, b: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    """A ⋆_L B = ((A ×₃ Z) △ (B ×₃ Z)) ×₃ Z⁻¹ (arXiv 2603.05727, the L-product).

    a: (m, n, p), b: (n, l, p), z: (p, p) invertible; returns (m, l, p). A slow,
    loop-free reference in the paper's (tube-last) layout, used to test the fast modules.
    """
    a_hat, b_hat = mode3_product(a, z), mode3_product(b, z)
    c_hat = torch.einsum("mnk,nlk->mlk", a_hat, b_hat)  # facewise products
    return mode3_product(c_hat, torch.linalg.inv(z))


class SliceLinear(nn.Module):
    """p affine maps applied facewise in the transform domain: Ŷ_k = X̂_k Ŵ_k + b̂_k.

    ``weight`` (p, d_in, d_out), ``bias`` (p, d_out); one ``baddbmm`` for all slices
    (arXiv 2603.05727: the L-linear map X ⋆_L W).

    ``in_affine=(γ, β)``, each (p, d_in), first maps the input by x ⊙ γ + β, folded into the
    weights: (x ⊙ γ + β) W + b = x (diag(γ) W) + (β W + b). A slice LayerNorm's gain and
    bias go here, so its normalised output is the only activation stored (as with
    ``nn.LayerNorm`` + ``nn.Linear``) and the affine costs no pass over the activations.
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

    def forward(self, x: torch.Tensor, in_affine: Affine | None = None) -> torch.Tensor:
        """(p, ..., d_in) -> (p, ..., d_out)."""
        w, b = self.folded_parameters(in_affine)  # (p, d_in, d_out), (p, d_out)
        x2 = x.reshape(x.shape[0], -1, self.d_in)  # (p, N, d_in)
        y = torch.bmm(x2, w) if b is None else torch.baddbmm(b.unsqueeze(1), x2, w)
        return y.view(*x.shape[:-1], self.d_out)  # (p, ..., d_out)

    def folded_parameters(
        self, in_affine: Affine | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(W, b), with ``in_affine`` folded in: (diag(γ) W, β W + b)."""
        w, b = self.weight, self.bias
        if in_affine is None:
            return w, b
        gain, shift = in_affine
        if shift is not None:
            folded_shift = torch.bmm(shift.unsqueeze(1), w).squeeze(1)  # (p, d_out)
            b = folded_shift if b is None else b + folded_shift
        return gain.unsqueeze(-1) * w, b

    def extra_repr(self) -> str:
        return f"p={self.p}, d_in={self.d_in}, d_out={self.d_out}, bias={self.bias is not None}"


class SliceLayerNorm(nn.Module):
    """LayerNorm of every slice over its own d_s features, with per-slice gain and bias.

    For slice k: y = (x̂_k − mean(x̂_k)) / √(var(x̂_k) + ε) ⊙ γ_k + β_k, the slice-wise
    normalisation of arXiv 2603.05727; γ, β are (p, d_s). ``forward`` applies all
    of it; ``normalize`` and ``affine`` split it so that a following :class:`SliceLinear`
    can absorb (γ, β) (its ``in_affine``).

    Hook points (TransformerLens' names), each editable, formed only when hooked:
    ``hook_scale`` sees every slice's ``s = √(var(x̂_k) + ε)`` as (B, T, p) (slice k in
    column k) and ``hook_normalized`` sees ``(x̂_k − mean(x̂_k)) / s`` as (B, T, p·d_s)
    (slice-major, as the residual hooks), before (γ, β).
    """

    def __init__(self, p: int, d_slice: int, *, eps: float = 1e-5, bias: bool = True) -> None:
        super().__init__()
        self.p, self.d_slice, self.eps = p, d_slice, eps
        self.weight = nn.Parameter(torch.ones(p, d_slice))
        self.bias = nn.Parameter(torch.zeros(p, d_slice)) if bias else None
        self.hook_scale = HookPoint()
        self.hook_normalized = HookPoint()

    def normalize(self, x: torch.Tensor) -> torch.Tensor:
        """(x − mean) / √(var + ε) over the last axis, no affine: (p, B, T, d_s)."""
        if not (self.hook_scale.is_active() or self.hook_normalized.is_active()):
            return F.layer_norm(x, (self.d_slice,), eps=self.eps)
        centred = x - x.mean(-1, keepdim=True)
        scale = hook_slices(self.hook_scale,
                            (centred.pow(2).mean(-1, keepdim=True) + self.eps).sqrt())
        return hook_slices(self.hook_normalized, centred / scale)  # (p, B, T, d_s)

    def affine(self) -> Affine:
        """(γ, β), each (p, d_s); β is None without bias."""
        return self.weight, self.bias

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(p, ..., d_s) -> (p, ..., d_s)."""
        gain, bias = self.affine()
        shape = (x.shape[0],) + (1,) * (x.dim() - 2) + (self.d_slice,)
        y = self.normalize(x)
        if bias is None:
            return y * gain.view(shape)
        return torch.addcmul(bias.view(shape), y, gain.view(shape))

    def extra_repr(self) -> str:
        return f"p={self.p}, d_slice={self.d_slice}, eps={self.eps}"
