"""The Wasserstein-2 distance between two token clouds on the sphere, and how far a cloud
still moves late in a run.

Massucco et al., arXiv 2605.18870: the token cloud is a measure mu_t on S^{d-1} and the
flow a curve in Wasserstein space; "the cloud settles" means mu_t stops moving in W_2. For
two empirical measures with n equal weights, W_2 is an assignment problem (Birkhoff-von
Neumann: an optimal plan is a permutation):

    W_2(mu, nu)^2 = min_sigma (1/n) sum_i d(x_i, y_sigma(i))^2,   d = arccos <x, y>

(the geodesic distance), solved exactly with ``scipy.optimize.linear_sum_assignment``.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from tokengeo.errors import ConfigError


def sphere_w2(x: Tensor, y: Tensor) -> float:
    """W_2 between the clouds x (n, d) and y (n, d) on the unit sphere, geodesic cost (radians)."""
    from tokengeo._deps import require

    if x.ndim != 2 or x.shape != y.shape:
        raise ConfigError(f"sphere_w2 needs two clouds (n, d) of one shape; got "
                          f"{tuple(x.shape)} and {tuple(y.shape)}")
    cost = torch.arccos((x.double() @ y.double().T).clamp(-1.0, 1.0)).square()  # (n, n)
    rows, cols = require("scipy.optimize").linear_sum_assignment(cost.cpu().numpy())
    return math.sqrt(float(cost[rows, cols].mean()))


def late_movement(t: Tensor, x: Tensor) -> list[float]:
    """Per path, W_2(mu_{T/2}, mu_T) of a recorded trajectory x (P, R, n, d) at times t (R,):
    the record nearest T/2 against the last one (how far the cloud still moves)."""
    if x.ndim != 4 or x.shape[1] != t.shape[0] or x.shape[1] < 2:
        raise ConfigError(f"late_movement needs a trajectory (P, R, n, d) with R >= 2 records "
                          f"at the R times; got {tuple(x.shape)} and {tuple(t.shape)}")
    half = int((t - t[-1] / 2).abs().argmin())
    return [sphere_w2(x[p, half], x[p, -1]) for p in range(x.shape[0])]
