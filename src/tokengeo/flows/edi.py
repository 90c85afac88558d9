"""The energy-dissipation identity of the multi-head, time-dependent flow, term by term.

Massucco et al., arXiv 2605.18870 (main result): solutions of the Transformer PDE are curves of
maximal slope of the time-dependent interaction energy E(mu, t) in the weighted Wasserstein
metric W_{m,2}(.; Theta_t), and along them

    E(mu_T, T) + 1/2 int_0^T |mu'|^2 dt + 1/2 int_0^T |dE|^2 dt = E(mu_0, 0) + int_0^T dE/dt dt

with |mu'| the metric slope (metric derivative) in W_{m,2}, |dE| the strong gradient and
dE/dt the explicit time derivative of the energy. The metric's effective mobility is the
Theta_t-weighted harmonic mean of the heads' mobilities. With mu = (1/n) sum_i delta_{x_i},
Theta_t uniform over the H heads (weight 1/H), K^h_ij = exp(<x_i, D_h x_j>), N_{h,i} =
sum_j K^h_ij and phi_h(x) = (1/n) sum_j exp(<x, D_h x_j>):

    E            = (1/H) sum_h 1/(2 n^2) sum_ij K^h_ij,
    m_h(x_i)     = n / N_{h,i}                     (head h's mobility: its softmax normaliser),
    b(x_i)       = 1 / ((1/H) sum_h 1 / m_h(x_i))  (the effective, harmonic-mean mobility),
    g_i          = (1/H) sum_h P_{x_i} grad phi_h(x_i)   (the Wasserstein gradient of E),
    v_i          = (1/H) sum_h m_h(x_i) P_{x_i} grad phi_h(x_i)   (the flow: dx_i/dt = -v_i),

    |mu'|^2  = (1/n) sum_i |v_i|^2 / b(x_i),     |dE|^2 = (1/n) sum_i b(x_i) |g_i|^2,
    power    = (1/n) sum_i <g_i, v_i>            (so dE/dt along the tokens' motion = -power),
    dE/dt    = sum_h <f_h, M_h>,  M_h = 1/(2 H n^2) sum_ij K^h_ij x_i x_j^T  (f_h = dD_h/dt).

With weight noise dD = f dt + sigma dW the explicit term is the energy's change along the
realised weight path at fixed tokens (so it carries the Ito correction and the martingale
of :mod:`tokengeo.flows.simulate`). The chain rule gives E(T) - E(0) =
int dE/dt - int power exactly, for every H. The identity asks in addition that
power = (|mu'|^2 + |dE|^2) / 2; the difference is, exactly,

    |mu'|^2 / 2 + |dE|^2 / 2 - power = (1/2n) sum_i |v_i - b(x_i) g_i|^2 / b(x_i)  >= 0,

zero iff v = b g, i.e. iff the flow is the gradient flow of E with the scalar mobility b.
For H = 1 (b = m_1, v = m_1 g) it is zero; for H > 1, v - b g = (1/H) sum_h (m_h - b)
P grad phi_h is not zero unless the heads' mobilities agree, so the identity fails by this
kinetic gap: the term that does not match is the metric slope / strong gradient pair, not
the explicit time derivative (whose chain-rule residual tends to 0 for every H).
:func:`edi_convergence` integrates every term for a sequence of halving dt with one shared
Brownian path and extrapolates each to dt -> 0 (Richardson, first order).

Every head's (P, n, n) kernel is formed once per evaluation: for the theory checks' sizes
(n <= a few hundred tokens), not for the H sweep (:mod:`tokengeo.flows.dynamics` streams).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
from torch import Tensor

from tokengeo.errors import ConfigError
from tokengeo.flows.dynamics import tangent_project
from tokengeo.flows.weights import resolve_drift

TERMS = ("explicit", "power", "metric", "strong", "g2_arith")


@dataclass
class EdiTerms:
    """The integrands of the identity at one state, each (P,)."""

    E: Tensor  # E(x; D)
    power: Tensor  # (1/n) sum_i <g_i, v_i>
    metric: Tensor  # |mu'|^2 = (1/n) sum_i |v_i|^2 / b_i
    strong: Tensor  # |dE|^2 = (1/n) sum_i b_i |g_i|^2
    g2_arith: Tensor  # (1/n) sum_i |v_i|^2 / mean_h m_h: the simulator's G^2
    velocity: Tensor  # (P, n, d) v


def _kernels(x: Tensor, D: Tensor) -> tuple[Tensor, Tensor]:
    """K^h_ij = exp(<x_i, D_h x_j>), (P, H, n, n), and the rows (D_h x_j)^T, (P, H, n, d)."""
    if x.ndim != 3 or D.ndim != 4 or D.shape[0] != x.shape[0] or D.shape[-1] != x.shape[-1]:
        raise ConfigError(f"the identity's terms need x (P, n, d) and D (P, H, d, d); got "
                          f"{tuple(x.shape)} and {tuple(D.shape)}")
    dx = x[:, None] @ D  # (P, H, n, d)  (D_h symmetric)
    return torch.exp(x[:, None] @ dx.mT), dx


def energy(x: Tensor, D: Tensor) -> Tensor:
    """E(x; D) = 1/(2 H n^2) sum_h sum_ij exp(<x_i, D_h x_j>), (P,)."""
    K, _ = _kernels(x, D)
    return K.sum((1, 2, 3)) / (2 * D.shape[1] * x.shape[1] ** 2)


def edi_terms(x: Tensor, D: Tensor) -> EdiTerms:
    """Every state term of the identity at tokens x (P, n, d) and symmetric weights
    D (P, H, d, d) (see the module docstring for the formulas)."""
    K, dx = _kernels(x, D)  # (P, H, n, n), (P, H, n, d)
    n, H = x.shape[1], D.shape[1]
    m = n / K.sum(-1)  # (P, H, n)  m_h(x_i)
    grad = tangent_project(x[:, None], K @ dx / n)  # (P, H, n, d)  P grad phi_h(x_i)
    v = (m[..., None] * grad).mean(1)  # (P, n, d)
    g = grad.mean(1)  # (P, n, d)
    b = 1 / (1 / m).mean(1)  # (P, n)  harmonic mean of the m_h
    speed2 = v.square().sum(-1)  # (P, n)
    return EdiTerms(
        E=K.sum((1, 2, 3)) / (2 * H * n * n),
        power=(g * v).sum(-1).mean(-1),
        metric=(speed2 / b).mean(-1),
        strong=(b * g.square().sum(-1)).mean(-1),
        g2_arith=(speed2 / m.mean(1)).mean(-1),
        velocity=v)


def brownian_increments(shape: tuple[int, ...], n_steps: int, dt: float, seed: int, *,
                        dtype=torch.float64) -> Tensor:
    """Symmetrised Brownian increments dW = sqrt(dt) (Z + Z^T) / 2 of ``n_steps`` steps,
    (n_steps, *shape), drawn on the CPU from ``seed`` (the finest grid of a dt sweep)."""
    gen = torch.Generator().manual_seed(seed)
    z = torch.randn(n_steps, *shape, generator=gen, dtype=dtype)
    return math.sqrt(dt) * (z + z.mT) / 2


def coarsen(increments: Tensor, factor: int) -> Tensor:
    """The same Brownian path on a grid ``factor`` times coarser: each coarse increment is the
    sum of ``factor`` consecutive fine ones (n_steps / factor, ...)."""
    S = increments.shape[0]
    if factor < 1 or S % factor:
        raise ConfigError(f"cannot coarsen {S} increments by {factor}: the dts must halve "
                          "from the finest one")
    return increments.reshape(S // factor, factor, *increments.shape[1:]).sum(1)


def integrate_terms(x0: Tensor, D0: Tensor, *, drift: str, noise_var: float, T: float,
                    dt: float, increments: Tensor | None = None) -> dict[str, Tensor]:
    """Euler run (the authors' scheme: x <- normalise(x - dt v), D <- D + f dt + sigma dW)
    from x0 (P, n, d), D0 (P, H, d, d), with left-point sums of the state terms; returns
    ``{"E_0", "E_T", "explicit", "power", "metric", "strong", "g2_arith"}``, each (P,).

    ``explicit`` is int dE/dt along the realised weight path: the sum over steps of the
    energy's change from the weights' step at fixed tokens, E(x_k; D_{k+1}) - E(x_k; D_k)
    (= int sum_h <f_h, M_h> dt + O(dt) without noise; with noise it holds the Ito
    correction and the martingale as well, so the chain rule closes at first order in dt
    on every path). ``increments`` (T / dt, P, H, d, d) are the dW of the weight noise
    (required when ``noise_var`` > 0)."""
    f_of = resolve_drift(drift)
    steps = round(T / dt)
    if steps < 1 or abs(steps * dt - T) > 1e-9 * T:
        raise ConfigError(f"T={T} must be a whole multiple of dt={dt}")
    if noise_var > 0 and (increments is None or increments.shape[0] != steps):
        raise ConfigError(f"noise_var={noise_var} needs {steps} Brownian increments")
    sigma = math.sqrt(noise_var)
    x, D = x0.clone(), D0.clone()
    sums = {k: x.new_zeros(x.shape[0]) for k in TERMS}
    E_0 = None
    for k in range(steps):
        terms = edi_terms(x, D)
        E_0 = terms.E if E_0 is None else E_0
        for name in TERMS[1:]:
            sums[name] += getattr(terms, name) * dt
        D_new = D + f_of(D, k * dt) * dt
        if noise_var > 0:
            D_new = D_new + sigma * increments[k].to(D)
        sums["explicit"] += energy(x, D_new) - terms.E
        x = x - dt * terms.velocity
        x, D = x / x.norm(dim=-1, keepdim=True), D_new
    return {"E_0": E_0, "E_T": energy(x, D), **sums}


def residuals(run: dict[str, Tensor]) -> dict[str, Tensor]:
    """The balances of one run, each (P,):

    * ``chain``: E(T) - E(0) - int dE/dt + int power (the chain rule; -> 0 for every H);
    * ``identity``: E(T) - E(0) - int dE/dt + (int |mu'|^2 + int |dE|^2) / 2 (the paper's
      identity; -> 0 iff the flow is a curve of maximal slope with equality);
    * ``gap``: identity - chain = int (|mu'|^2 + |dE|^2) / 2 - int power, >= 0 exactly;
    * ``arith``: the balance with the simulator's G^2 (arithmetic-mean mobility) in place of
      the two kinetic terms, as ``FlowResult.residual`` reports it (which also sums the
      noise terms in Ito form)."""
    base = run["E_T"] - run["E_0"] - run["explicit"]
    kinetic = (run["metric"] + run["strong"]) / 2
    return {"chain": base + run["power"], "identity": base + kinetic,
            "gap": kinetic - run["power"], "arith": base + run["g2_arith"]}


@dataclass
class EdiConvergence:
    """Every integrated term and balance per dt (halving, largest first), per path, and their
    first-order Richardson limits 2 r(dt_min) - r(2 dt_min), relative to the dissipated
    energy int (|mu'|^2 + |dE|^2) / 2 at the smallest dt."""

    n_heads: int
    drift: str
    noise_var: float
    dts: list[float]
    terms: dict[str, list[list[float]]]  # name -> per dt, per path
    balances: dict[str, list[list[float]]]  # chain / identity / gap / arith -> per dt, path
    limits: dict[str, list[float]]  # relative Richardson limit per balance and term, per path
    dissipated: list[float]  # per path: int (|mu'|^2 + |dE|^2) / 2 at the smallest dt

    def to_dict(self) -> dict:
        return asdict(self)


def richardson(coarse: float, fine: float) -> float:
    """First-order Richardson extrapolation to dt -> 0 from r(2h) and r(h): 2 r(h) - r(2h)."""
    return 2 * fine - coarse


def edi_convergence(x0: Tensor, D0: Tensor, *, drift: str, noise_var: float, dts: list[float],
                    T: float, seed: int) -> EdiConvergence:
    """:func:`integrate_terms` at every dt of ``dts`` (each half the previous one), the weight
    noise one Brownian path drawn on the finest grid from ``seed`` and summed onto the
    coarser ones, so every dt integrates the same realisation (x0 (P, n, d), D0 (P, H, d, d))."""
    dts = sorted(dts, reverse=True)
    if len(dts) < 2 or any(abs(a / b - 2) > 1e-9 for a, b in zip(dts, dts[1:], strict=False)):
        raise ConfigError(f"dts={dts} must be 2 or more values, each half the previous one")
    fine_steps = round(T / dts[-1])
    fine = (brownian_increments(D0.shape, fine_steps, dts[-1], seed, dtype=D0.dtype)
            if noise_var > 0 else None)
    runs = []
    for j, dt in enumerate(dts):
        inc = None if fine is None else coarsen(fine, 2 ** (len(dts) - 1 - j))
        runs.append(integrate_terms(x0, D0, drift=drift, noise_var=noise_var, T=T, dt=dt,
                                    increments=inc))
    balances = [residuals(r) for r in runs]
    dissipated = (runs[-1]["metric"] + runs[-1]["strong"]) / 2
    limits = {}
    for name in ("chain", "identity", "gap", "arith"):
        limits[name] = (richardson(balances[-2][name], balances[-1][name]) / dissipated).tolist()
    for name in ("power", "metric", "strong", "explicit"):
        limits[name] = (richardson(runs[-2][name], runs[-1][name]) / dissipated).tolist()
    return EdiConvergence(
        n_heads=D0.shape[1], drift=drift, noise_var=noise_var, dts=dts,
        terms={k: [r[k].tolist() for r in runs] for k in runs[0]},
        balances={k: [b[k].tolist() for b in balances] for k in balances[0]},
        limits=limits, dissipated=dissipated.tolist())
