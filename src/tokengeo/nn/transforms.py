"""Invertible transforms along the tube (slice) mode of the L-product.

El Ichi, Jbilou, El Guide & Dufrenois, "Structured Multidimensional Representation
Learning for Large Language Models" (arXiv 2603.05727), after Kernfeld, Kilmer & Aeron
(2015): the L-product of third-order tensors moves every tube fibre into a transform
domain with an invertible matrix Z ∈ R^{p×p},

    X̂ = X ×₃ Z,   X̂[t, i, k] = Σ_j Z[k, j] X[t, i, j],

multiplies the p frontal slices there, and maps back with Z⁻¹. Every transform here is
orthogonal (Z Zᵀ = I), so Z⁻¹ = Zᵀ: the inverse is exact up to float rounding and the
map preserves inner products between tokens.

tokengeo stores tensors slice-major, ``(p, ...)``: slice k is ``x[k]``, so the mode-3
product is one ``(p, p) @ (p, N)`` matmul.
"""

from __future__ import annotations

import abc
import math

import torch
from torch import nn

from tokengeo.errors import ConfigError

TRANSFORMS = ("dct", "identity", "hadamard", "haar", "learnable", "learnable-cayley")
POWER_OF_TWO_TRANSFORMS = ("hadamard", "haar")


def is_power_of_two(n: int) -> bool:
    return n >= 1 and n & (n - 1) == 0


def check_transform(name: str, p: int) -> None:
    """Raise :class:`ConfigError` unless ``name`` is a transform defined for ``p`` slices."""
    if name not in TRANSFORMS:
        raise ConfigError(f"transform={name!r} is not valid; choose one of {list(TRANSFORMS)}")
    if name in POWER_OF_TWO_TRANSFORMS and not is_power_of_two(p):
        raise ConfigError(
            f"transform={name!r} needs p to be a power of 2 (1, 2, 4, 8, ...); got p={p}. "
            "Use transform='dct' (any p) or change p"
        )


def dct_matrix(p: int) -> torch.Tensor:
    """Orthonormal DCT-II, float64 (p, p) (the paper's default transform).

    Z[k, n] = c_k cos(π (2n + 1) k / (2p)),  c_0 = √(1/p),  c_k = √(2/p) for k ≥ 1.
    Row 0 averages the slices (the DC component); row k oscillates k/2 times.
    """
    k = torch.arange(p, dtype=torch.float64)[:, None]
    n = torch.arange(p, dtype=torch.float64)[None, :]
    z = torch.cos(math.pi * (2 * n + 1) * k / (2 * p)) * math.sqrt(2.0 / p)
    z[0] /= math.sqrt(2.0)
    return z


def hadamard_matrix(p: int) -> torch.Tensor:
    """Walsh–Hadamard matrix in sequency (Walsh) order, scaled by 1/√p; float64 (p, p).

    Sylvester: H_1 = [1], H_{2m} = [[H_m, H_m], [H_m, −H_m]]. Rows are then sorted by
    their number of sign changes, so row k has k of them (like the DCT's frequencies).
    """
    check_transform("hadamard", p)
    h = torch.ones(1, 1, dtype=torch.float64)
    while h.shape[0] < p:
        h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)], 0)
    changes = (h[:, 1:] != h[:, :-1]).sum(1)
    return h[changes.argsort()] / math.sqrt(p)


def haar_matrix(p: int) -> torch.Tensor:
    """Orthonormal Haar wavelet matrix, float64 (p, p).

    H_1 = [1],  H_{2m} = (1/√2) [[H_m ⊗ (1, 1)], [I_m ⊗ (1, −1)]]: one average row, then
    differences at every scale.
    """
    check_transform("haar", p)
    h = torch.ones(1, 1, dtype=torch.float64)
    while h.shape[0] < p:
        m = h.shape[0]
        pair_sum = torch.tensor([[1.0, 1.0]], dtype=torch.float64)
        pair_diff = torch.tensor([[1.0, -1.0]], dtype=torch.float64)
        eye = torch.eye(m, dtype=torch.float64)
        h = torch.cat([torch.kron(h, pair_sum), torch.kron(eye, pair_diff)], 0) / math.sqrt(2)
    return h


FIXED_MATRICES = {
    "dct": dct_matrix,
    "identity": lambda p: torch.eye(p, dtype=torch.float64),
    "hadamard": hadamard_matrix,
    "haar": haar_matrix,
}


class TubeTransform(nn.Module, abc.ABC):
    """An orthogonal Z applied along the leading (slice) axis of slice-major tensors."""

    name: str = ""

    def __init__(self, p: int) -> None:
        super().__init__()
        self.p = p

    @abc.abstractmethod
    def matrix(self) -> torch.Tensor:
        """Z, (p, p), orthogonal."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """X̂ = X ×₃ Z: ``x̂[k] = Σ_j Z[k, j] x[j]``; (p, ...) -> (p, ...)."""
        return self._mode3(self.matrix(), x)

    def inverse(self, x: torch.Tensor) -> torch.Tensor:
        """X = X̂ ×₃ Z⁻¹ with Z⁻¹ = Zᵀ; (p, ...) -> (p, ...)."""
        return self._mode3(self.matrix().T, x)

    def _mode3(self, z: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        if x.shape[0] != self.p:
            raise ConfigError(f"expected {self.p} slices on the leading axis, got {x.shape[0]}")
        out = z.to(x.dtype) @ x.reshape(self.p, -1)  # (p, p) @ (p, N)
        return out.view(x.shape)

    def extra_repr(self) -> str:
        return f"p={self.p}, name={self.name!r}"


class FixedTransform(TubeTransform):
    """DCT-II, identity, Walsh–Hadamard or Haar: a constant orthogonal matrix (a buffer)."""

    def __init__(self, name: str, p: int) -> None:
        super().__init__(p)
        check_transform(name, p)
        self.name = name
        self.register_buffer("z", FIXED_MATRICES[name](p).float(), persistent=False)

    def matrix(self) -> torch.Tensor:
        return self.z


class LearnableOrthogonal(TubeTransform):
    """Z = Q(S) Z₀: a learnt rotation of the DCT, orthogonal by construction.

    S is skew-symmetric (its p(p−1)/2 upper-triangular entries are the parameters, zero at
    initialisation, so Z starts as the DCT) and Q(S) is orthogonal:

    * ``expm``:   Q = exp(S)                (matrix exponential of a skew matrix)
    * ``cayley``: Q = (I − S)⁻¹ (I + S)     (Cayley transform; I − S is always invertible)

    Q is computed in float64, so Z stays orthogonal to float precision after any number of
    optimiser steps.

    Why not ``torch.nn.utils.parametrizations.orthogonal`` (checked with torch 2.13, p = 4
    and 16): it serves as well in expressiveness (the same set {R Z₀ : R ∈ SO(p)}; both
    fit the same targets), gradients and speed (forward + backward within noise), but it
    stores p² parameters of which only p(p−1)/2 are used (the paper's parameter count and
    weight decay would see the dead ones), it cannot be built on the meta device
    (``create_model(..., device="meta")``: its orthogonality check calls ``.item()``), and
    it renames the state-dict entries (``skew_params``), breaking saved checkpoints.
    """

    def __init__(self, p: int, parametrization: str = "expm") -> None:
        super().__init__(p)
        if parametrization not in ("expm", "cayley"):
            raise ConfigError(f"parametrization={parametrization!r}; choose 'expm' or 'cayley'")
        self.parametrization = parametrization
        self.name = "learnable" if parametrization == "expm" else "learnable-cayley"
        self.register_buffer("z0", dct_matrix(p).float(), persistent=False)
        rows, cols = torch.triu_indices(p, p, offset=1)
        self.register_buffer("rows", rows, persistent=False)
        self.register_buffer("cols", cols, persistent=False)
        self.skew_params = nn.Parameter(torch.zeros(p * (p - 1) // 2))

    def skew(self) -> torch.Tensor:  # (p, p) float64, Sᵀ = −S
        upper = torch.zeros(self.p, self.p, dtype=torch.float64, device=self.z0.device)
        upper = upper.index_put((self.rows, self.cols), self.skew_params.double())
        return upper - upper.T

    def rotation(self) -> torch.Tensor:  # (p, p) float64, orthogonal
        s = self.skew()
        if self.parametrization == "expm":
            return torch.linalg.matrix_exp(s)
        eye = torch.eye(self.p, dtype=s.dtype, device=s.device)
        return torch.linalg.solve(eye - s, eye + s)

    def matrix(self) -> torch.Tensor:
        return (self.rotation() @ self.z0.double()).to(self.skew_params.dtype)


def make_transform(name: str, p: int) -> TubeTransform:
    """The transform called ``name`` for ``p`` slices (see :data:`TRANSFORMS`)."""
    check_transform(name, p)
    if name == "learnable":
        return LearnableOrthogonal(p, "expm")
    if name == "learnable-cayley":
        return LearnableOrthogonal(p, "cayley")
    return FixedTransform(name, p)
