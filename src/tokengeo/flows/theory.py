"""The paper's theory checked numerically: stability in the initial tokens (Grönwall) and in the
weights' path (the Gamma-convergence setting).

Massucco et al., arXiv 2605.18870, Sec. 3-5. Along the flow dx/dt = -v(x, D(t)):

* (the energy-dissipation identity, term by term and as dt -> 0, is :mod:`tokengeo.flows.edi`);
* Grönwall: |x(t) - x'(t)| <= |x(0) - x'(0)| e^{L t}, so the largest distance over [0, T]
  between runs from tokens eps apart is linear in eps with a constant C <= e^{L T}
  (:func:`gronwall_stability`);
* weight perturbation: shifting the whole weight path D(t) -> D(t) + delta S moves the
  trajectories and the final energy by O(delta) (:func:`weight_perturbation`), the
  continuity behind the paper's Gamma-convergence of the energies.

Every token start shares ONE realised weight path (drawn once, with its noise), replayed
exactly by :class:`PathDrift` on every Monte Carlo path of one batched run.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
import torch
from torch import Tensor

from tokengeo.flows.fits import Estimate, loglog_ols
from tokengeo.flows.simulate import FlowConfig, simulate
from tokengeo.flows.weights import resolve_drift, symmetric_increment


def sample_weight_path(D0: Tensor, drift: str, noise_var: float, *, T: float, dt: float,
                       seed: int) -> Tensor:
    """One Euler path of dD = f(D, t) dt + sigma dW from D0 (H, d, d): (S + 1, H, d, d), drawn
    on the CPU (the same path whatever device the runs use)."""
    f = resolve_drift(drift)
    gen = torch.Generator().manual_seed(seed)
    sigma = math.sqrt(noise_var)
    D0 = D0.cpu()
    D, path = D0[None].clone(), [D0.clone()]  # (1, H, d, d)
    for k in range(round(T / dt)):
        D = D + f(D, k * dt) * dt
        if noise_var > 0:
            D = D + sigma * symmetric_increment(D.shape, dt, gen, dtype=D.dtype)
        path.append(D[0].clone())
    return torch.stack(path)


class PathDrift:
    """A drift that replays a given weight path on the Euler grid: f(D, t_k) = (W_{k+1} - W_k)
    / dt, the same for every path and independent of D, so D(t) - D(0) follows the path
    whatever D(0) is (a start D(0) + delta S shifts the whole path by delta S)."""

    __name__ = "weight-path"

    def __init__(self, path: Tensor, dt: float) -> None:
        self.increments = (path[1:] - path[:-1]) / dt  # (S, H, d, d), exactly symmetric
        self.dt = dt

    def __call__(self, D: Tensor, t: float) -> Tensor:
        if self.increments.device != D.device or self.increments.dtype != D.dtype:
            self.increments = self.increments.to(D.device, D.dtype)  # once per run
        k = min(round(t / self.dt), self.increments.shape[0] - 1)
        return self.increments[k].expand_as(D)


def _tangent_directions(x0: Tensor, count: int, seed: int) -> Tensor:
    """``count`` random unit-RMS tangent fields at x0 (n, d): (count, n, d)."""
    g = torch.Generator().manual_seed(seed)
    u = torch.randn(count, *x0.shape, generator=g, dtype=x0.dtype).to(x0.device)
    u = u - x0 * (x0 * u).sum(-1, keepdim=True)
    return u / u.square().sum((-2, -1), keepdim=True).div(x0.shape[0]).sqrt()


def _max_distance(x: Tensor, ref: Tensor) -> Tensor:
    """max over records and tokens of |x_i(t) - ref_i(t)|: x (P, R, n, d), ref (R, n, d)."""
    return (x - ref).norm(dim=-1).amax((1, 2))  # (P,)


@dataclass
class Stability:
    """Largest distance over [0, T] between a reference run and perturbed runs."""

    what: str  # "tokens" (eps on x(0)) or "weights" (delta on the path D(t))
    sizes: list[float]  # eps or delta
    max_distance: list[list[float]]  # per size, per direction
    constant: list[list[float]]  # max_distance / size
    slope: Estimate  # per-direction log-log slope of max distance against size, over directions
    slopes: list[float]  # the per-direction slopes the interval is made of
    energy_gap: list[list[float]]  # |E_pert(T) - E(T)| per size and direction

    def to_dict(self) -> dict:
        return asdict(self)


def _stability(x_starts: Tensor, D_starts: Tensor, path: Tensor, *, what: str,
               sizes: list[float], n_dir: int, T: float, dt: float, record_every: int
               ) -> Stability:
    P = x_starts.shape[0]  # 1 reference + len(sizes) * n_dir perturbed starts
    config = FlowConfig(drift=PathDrift(path, dt), noise_var=0.0, T=T, dt=dt, n_paths=P,
                        record_every=record_every, record_trajectory=True)
    r = simulate(x_starts, D_starts, config)
    dist = _max_distance(r.x[1:], r.x[0]).reshape(len(sizes), n_dir).cpu()  # (sizes, dirs)
    gap = (r.E[1:, -1] - r.E[0, -1]).abs().reshape(len(sizes), n_dir).cpu()
    slopes = [loglog_ols(sizes, dist[:, j].tolist())[0].value for j in range(n_dir)]
    arr = np.asarray(slopes)
    if n_dir > 1:
        from tokengeo.flows.fits import _t975

        half = _t975(n_dir - 1) * arr.std(ddof=1) / math.sqrt(n_dir)
        slope = Estimate(float(arr.mean()), float(arr.mean() - half), float(arr.mean() + half),
                         n_dir)
    else:
        slope = Estimate(float(arr[0]), float(arr[0]), float(arr[0]), 1)
    const = dist / torch.tensor(sizes, dtype=dist.dtype, device=dist.device)[:, None]
    return Stability(what, list(sizes), dist.tolist(), const.tolist(), slope, slopes,
                     gap.tolist())


def gronwall_stability(x0: Tensor, D0: Tensor, *, drift: str, noise_var: float, T: float,
                       dt: float, eps: list[float], n_directions: int = 4, seed: int = 0,
                       record_every: int = 10) -> Stability:
    """Runs from x0 (n, d) and from normalise(x0 + eps u) for random tangent fields u (RMS 1),
    all under one weight path from D0 (H, d, d) (with its noise, drawn from ``seed``)."""
    path = sample_weight_path(D0, drift, noise_var, T=T, dt=dt, seed=seed)
    u = _tangent_directions(x0, n_directions, seed + 1)  # (dirs, n, d)
    starts = [x0[None]]
    for e in eps:
        xe = x0 + e * u
        starts.append(xe / xe.norm(dim=-1, keepdim=True))
    x_starts = torch.cat(starts)  # (1 + sizes dirs, n, d)
    D_starts = D0.expand(x_starts.shape[0], *D0.shape).clone()
    return _stability(x_starts, D_starts, path, what="tokens", sizes=list(eps),
                      n_dir=n_directions, T=T, dt=dt, record_every=record_every)


def weight_perturbation(x0: Tensor, D0: Tensor, *, drift: str, noise_var: float, T: float,
                        dt: float, deltas: list[float], n_directions: int = 4, seed: int = 0,
                        record_every: int = 10) -> Stability:
    """Runs under the weight path D(t) and under D(t) + delta S_h, S_h symmetric with unit
    Frobenius norm per head (random, one per direction), all from the tokens x0 (n, d)."""
    path = sample_weight_path(D0, drift, noise_var, T=T, dt=dt, seed=seed)
    g = torch.Generator().manual_seed(seed + 2)
    z = torch.randn(n_directions, *D0.shape, generator=g, dtype=D0.dtype).to(D0.device)
    S = z + z.mT
    S = S / S.norm(dim=(-2, -1), keepdim=True)  # (dirs, H, d, d)
    D_starts = torch.cat([D0[None]] + [D0 + dl * S for dl in deltas])  # (1 + sizes dirs, H, d, d)
    x_starts = x0.expand(D_starts.shape[0], *x0.shape).clone()
    return _stability(x_starts, D_starts, path, what="weights", sizes=list(deltas),
                      n_dir=n_directions, T=T, dt=dt, record_every=record_every)
