"""Explicit Runge-Kutta steps for tokens on the sphere and additive-noise weights.

The augmented state is (x, D, I): tokens x (P, n, d), weights D (P, H, d, d) or none, and
the balance quadratures I (P, Q) whose integrands ride along as extra ODE components, so
they are integrated at the order of the scheme. One step of a tableau (a, b, c) is

    X_i = X + dt sum_j a_ij K_j + c_i sigma dW       (noise enters D only),
    K_i = F(X_i, t + c_i dt),
    X'  = X + dt sum_i b_i K_i + sigma dW,     then x' = x' / |x'|,

with dx/dt = -v(x, D) (arXiv 2605.18870, Eq. 5). ``euler`` is the authors' scheme
x <- normalise(x - dt v), D <- D + f dt + sigma dW with left-point (Ito) quadratures;
``heun`` is the stochastic Heun scheme (strong order 1 for additive noise, order 2 without
noise); ``rk4`` is the classical fourth-order scheme (deterministic weights only). Without
normalisation the flow keeps |x_i| = 1 exactly (d|x|^2/dt = -2 x.g (1 - |x|^2)), so the
final renormalisation does not lower the order.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from torch import Tensor


@dataclass(frozen=True)
class Tableau:
    name: str
    a: tuple[tuple[float, ...], ...]
    b: tuple[float, ...]
    c: tuple[float, ...]
    order: int  # deterministic order
    allows_noise: bool


EULER = Tableau("euler", ((),), (1.0,), (0.0,), 1, True)
HEUN = Tableau("heun", ((), (1.0,)), (0.5, 0.5), (0.0, 1.0), 2, True)
RK4 = Tableau(
    "rk4",
    ((), (0.5,), (0.0, 0.5), (0.0, 0.0, 1.0)),
    (1 / 6, 1 / 3, 1 / 3, 1 / 6),
    (0.0, 0.5, 0.5, 1.0),
    4,
    False,
)
TABLEAUX = {t.name: t for t in (EULER, HEUN, RK4)}


@dataclass
class Rates:
    """Time derivatives of the augmented state at one stage."""

    x: Tensor  # (P, n, d)  dx/dt = -v
    D: Tensor | None  # (P, H, d, d)  drift f(D, t)
    quad: Tensor  # (P, Q)  balance integrands


RatesFn = Callable[[Tensor, Tensor | None, float], tuple[Rates, object]]


def _combine(base: Tensor, dt: float, coeffs, ks: list[Tensor]) -> Tensor:
    out = base
    for coeff, k in zip(coeffs, ks, strict=False):
        if coeff != 0.0:
            out = out + dt * (k if coeff == 1.0 else coeff * k)
    return out


def rk_step(
    rates_fn: RatesFn,
    x: Tensor,
    D: Tensor | None,
    t: float,
    dt: float,
    tableau: Tableau,
    noise: Tensor | None,
) -> tuple[Tensor, Tensor | None, Tensor, object]:
    """One step; returns (x', D', quadrature increments (P, Q), aux of the first stage).

    ``rates_fn(x, D, t)`` returns the stage :class:`Rates` and an auxiliary object; the first
    stage's (the left point's: energy, moments) is handed back.
    """
    ks: list[Rates] = []
    aux = None
    for i, (row, c) in enumerate(zip(tableau.a, tableau.c, strict=True)):
        xi = _combine(x, dt, row, [k.x for k in ks])
        Di = None
        if D is not None:
            Di = _combine(D, dt, row, [k.D for k in ks])
            if noise is not None and c != 0.0:
                Di = Di + (noise if c == 1.0 else c * noise)
        rates, stage_aux = rates_fn(xi, Di, t + c * dt)
        if i == 0:
            aux = stage_aux
        ks.append(rates)
    x_new = _combine(x, dt, tableau.b, [k.x for k in ks])
    x_new = x_new / x_new.norm(dim=-1, keepdim=True)
    D_new = None
    if D is not None:
        D_new = _combine(D, dt, tableau.b, [k.D for k in ks])
        if noise is not None:
            D_new = D_new + noise
    quad = _combine(0.0 * ks[0].quad, dt, tableau.b, [k.quad for k in ks])
    return x_new, D_new, quad, aux
