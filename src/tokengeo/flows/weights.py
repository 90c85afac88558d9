"""Weight processes driving the heads: SDE weights D_h(t) and layer schedules from a model.

Massucco et al., arXiv 2605.18870, Eq. (5) and Sec. 6: each head h has a symmetric
matrix D_h(t) that evolves in depth t by

    dD_h = f_h(D_h, t) dt + sigma dW_h,     dW = sqrt(dt) (Z + Z^T) / 2,  Z_ab ~ N(0, 1),

with the drifts of the paper's experiments:

* ``"ou"``           f = I - D                      (Ornstein-Uhlenbeck, mean reversion)
* ``"oscillating"``  f = T_h(t) - D                 (time-periodic target, phase 2 pi h / H,
                                                    the authors' code from commit 693474c)
* ``"oscillating-inphase"``  f = T_0(t) - D         (one target, phase 0, for every head: the
                                                    authors' code of the paper's figures,
                                                    commit 496b2f6, whose drift read
                                                    H = D.shape[0] = 1 path)
* ``"frozen"``       f = 0

A :class:`LayerSchedule` instead holds general (query-key, value) heads per layer, e.g.
read from a trained tokengeo model with :func:`heads_from_model`; layer l drives
t in [l, l + 1).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from tokengeo.errors import ConfigError

Drift = Callable[[Tensor, float], Tensor]  # f(D (P, H, d, d), t) -> (P, H, d, d)

DRIFTS = ("ou", "oscillating", "oscillating-inphase", "frozen")


def ou_drift(D: Tensor, t: float) -> Tensor:
    """Ornstein-Uhlenbeck drift f(D, t) = I - D (arXiv 2605.18870, Sec. 6)."""
    eye = torch.eye(D.shape[-1], dtype=D.dtype, device=D.device)
    return eye - D


def frozen_drift(D: Tensor, t: float) -> Tensor:
    """Frozen weights: f(D, t) = 0."""
    return torch.zeros_like(D)


def _diagonal_phases(d: int) -> list[float]:
    if d == 3:  # the paper's target: cos(s), sin(s) = cos(s - pi/2), cos(s + pi/4)
        return [0.0, -math.pi / 2, math.pi / 4]
    return [2 * math.pi * k / d for k in range(d)]  # d = 2 gives the paper's 2 +- 1.5 cos(s)


def oscillating_target(
    t: float | Tensor, n_heads: int, d: int, *, dtype=torch.float64, device=None,
    in_phase: bool = False,
) -> Tensor:
    """Time-periodic symmetric targets T_h(t), shaped (H, d, d) (arXiv 2605.18870, Sec. 6).

    With s = t + phi_h, phi_h = 2 pi h / H (h = 0..H-1):

        T_kk = 2 + 1.5 cos(s + psi_k),
        T_kl = T_lk = sin(omega_kl s + k pi / 2)   (k < l),  omega_kl = 2 if l = k + 1 else 1.

    psi = (0, pi) for d = 2 and (0, -pi/2, pi/4) for d = 3 reproduce the paper's targets
    (d = 3: diagonal 2 + 1.5 cos s, 2 + 1.5 sin s, 2 + 1.5 cos(s + pi/4); (1,2) = sin 2s,
    (1,3) = sin s, (2,3) = cos 2s; d = 2: diagonal 2 +- 1.5 cos s, off-diagonal sin 2s);
    for d >= 4 we use psi_k = 2 pi k / d (our general-d extension, not in the paper).
    ``in_phase`` sets phi_h = 0 for every head (one target for all heads). ``t`` may be a
    0-dim tensor (on the device, for captured CUDA graphs); the phases are then formed in
    float64 and the target cast to ``dtype``.
    """
    heads = torch.arange(n_heads, dtype=torch.float64, device=device)
    phases = torch.zeros_like(heads) if in_phase else 2 * math.pi * heads / n_heads  # (H,)
    s = (t + phases).to(dtype)  # (H,)
    target = torch.empty(n_heads, d, d, dtype=dtype, device=device)
    for k, psi in enumerate(_diagonal_phases(d)):
        target[:, k, k] = 2 + 1.5 * torch.cos(s + psi)
    for k in range(d):
        for l in range(k + 1, d):
            omega = 2.0 if l == k + 1 else 1.0
            target[:, k, l] = target[:, l, k] = torch.sin(omega * s + k * math.pi / 2)
    return target


def oscillating_drift(D: Tensor, t: float) -> Tensor:
    """Oscillating drift f_h(D, t) = T_h(t) - D_h, see :func:`oscillating_target`."""
    target = oscillating_target(t, D.shape[-3], D.shape[-1], dtype=D.dtype, device=D.device)
    return target - D


def oscillating_inphase_drift(D: Tensor, t: float) -> Tensor:
    """In-phase oscillating drift f_h(D, t) = T_0(t) - D_h: every head tracks the phase-0
    target of :func:`oscillating_target` (the authors' code of the paper's figures)."""
    target = oscillating_target(t, D.shape[-3], D.shape[-1], dtype=D.dtype, device=D.device,
                                in_phase=True)
    return target - D


def resolve_drift(drift: str | Drift) -> Drift:
    """The drift function for a name in :data:`DRIFTS`, or a user callable f(D, t)."""
    if callable(drift):
        return drift
    table = {"ou": ou_drift, "oscillating": oscillating_drift,
             "oscillating-inphase": oscillating_inphase_drift, "frozen": frozen_drift}
    if drift not in table:
        raise ConfigError(
            f"drift={drift!r} is not valid; choose one of {list(DRIFTS)} or pass a callable "
            "f(D, t) returning a tensor shaped like D"
        )
    return table[drift]


def symmetric_increment(
    shape: tuple[int, ...], dt: float, generator: torch.Generator, *, dtype, device=None
) -> Tensor:
    """Symmetrised Brownian increment dW = sqrt(dt) (Z + Z^T) / 2 (arXiv 2605.18870, Sec. 6)."""
    z = torch.randn(shape, generator=generator, dtype=dtype, device=device)  # (P, H, d, d)
    return math.sqrt(dt) * (z + z.mT) / 2


@dataclass
class LayerSchedule:
    """General heads per layer: attention scores x_i^T B_h x_j and values V_h x_j.

    ``score`` and ``value`` are shaped (L, H, d, d); layer l drives t in [l, l + 1) (the last
    layer also drives t = L). The flow is dx_i/dt = -(1/H) sum_h P_{x_i} sum_j A^h_ij V_h x_j
    with A^h_ij = softmax_j(x_i^T B_h x_j): the paper's Eq. (5) with B_h = V_h = D_h.
    """

    score: Tensor  # (L, H, d, d)
    value: Tensor  # (L, H, d, d)

    def __post_init__(self) -> None:
        if self.score.ndim != 4 or self.score.shape != self.value.shape:
            raise ConfigError(
                f"LayerSchedule needs score and value shaped (L, H, d, d) alike; got "
                f"{tuple(self.score.shape)} and {tuple(self.value.shape)}"
            )
        if self.score.shape[-1] != self.score.shape[-2]:
            raise ConfigError(f"head matrices must be square; got {tuple(self.score.shape)}")

    @property
    def n_layers(self) -> int:
        return self.score.shape[0]

    def layer_at(self, t: float) -> int:
        """Index of the layer that drives time t: floor(t), clipped to [0, L - 1]."""
        return min(self.n_layers - 1, max(0, math.floor(t + 1e-9)))

    def heads(self, t: float) -> tuple[Tensor, Tensor]:
        """(score, value) of the layer driving t, each (H, d, d)."""
        layer = self.layer_at(t)
        return self.score[layer], self.value[layer]

    def to(self, dtype=None, device=None) -> LayerSchedule:
        return LayerSchedule(self.score.to(device, dtype), self.value.to(device, dtype))


def _attention_weight(attn: torch.nn.Module) -> Tensor:
    """b_h of heads that output a_h V + b_h P V (1 for plain attention), (H,)."""
    coefficients = getattr(attn, "head_coefficients", None)
    if coefficients is None:
        return torch.ones(attn.n_heads, dtype=attn.qkv.weight.dtype)
    a, b = coefficients()
    if (a != 0).any():
        raise ConfigError(
            f"heads with a_h V terms (a = {a.tolist()}; Laplacian or mixed kinds) are not "
            "interaction flows of arXiv 2605.18870; use a model with plain attention heads"
        )
    return b.to(attn.qkv.weight.dtype)


@torch.no_grad()
def heads_from_model(model: torch.nn.Module) -> LayerSchedule:
    """Per-layer heads of a trained tokengeo model, as a :class:`LayerSchedule`.

    For block l, ``attn.qkv`` has output columns [q | k | v], each head-major
    (n_heads, head_dim), and ``attn.proj`` maps the concatenated heads back. Head h gives

        B_h = W_Q,h^T W_K,h / sqrt(head_dim),      V_h = -H * W_O,h W_V,h,

    so that dx_i/dt = -(1/H) sum_h P_{x_i} sum_j A^h_ij V_h x_j = P_{x_i} Attn_l(x)_i is the
    layer's (bias-free) attention update projected onto the sphere. Biases, the layer norm's
    gain and the MLP are not part of the paper's model (arXiv 2605.18870, Eq. 5) and are left
    out. Blocks whose heads output a_h V + b_h P V (``attn.head_coefficients()``, tokengeo's
    Laplacian and mixed heads) have V_h scaled by b_h; a_h != 0 (a term without interaction)
    is outside the model and raises.
    """
    blocks = getattr(model, "blocks", None)
    if blocks is None or len(blocks) == 0:
        raise ConfigError(
            "heads_from_model needs a tokengeo model with a non-empty `model.blocks`, each "
            "with `attn.qkv` and `attn.proj`"
        )
    scores, values = [], []
    for block in blocks:
        attn = block.attn
        H, dh, dm = attn.n_heads, attn.head_dim, attn.d_model
        w = attn.qkv.weight  # (3 * d_model, d_model)
        if w.shape != (3 * dm, dm) or H * dh != dm:
            raise ConfigError(
                f"attn.qkv.weight is {tuple(w.shape)}; expected (3*d_model, d_model) with "
                f"d_model = n_heads * head_dim = {H} * {dh}"
            )
        wq, wk, wv = (m.reshape(H, dh, dm) for m in w.split(dm, dim=0))  # (H, dh, dm)
        wo = attn.proj.weight.reshape(dm, H, dh).permute(1, 0, 2)  # (H, dm, dh)
        scores.append(wq.mT @ wk / math.sqrt(dh))  # (H, dm, dm)
        values.append(-H * _attention_weight(attn)[:, None, None] * (wo @ wv))  # (H, dm, dm)
    return LayerSchedule(torch.stack(scores), torch.stack(values))
