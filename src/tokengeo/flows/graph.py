"""Euler steps of the token flow captured as CUDA graphs: no per-step launches or host syncs.

One step of :func:`tokengeo.flows.simulate` issues a few dozen small kernels (one strip of the
attention kernel at a time, the drift, the balance sums); at n = 200 tokens each runs for
microseconds, so on a GPU the step is bound by launch latency and by the host reading values
back. Here a block of K consecutive Euler steps (the authors' scheme, arXiv 2605.18870, Sec. 6:
x <- normalise(x - dt v), D <- D + f dt + sigma dW, left-point balance sums) is recorded once
as a CUDA graph over static buffers and replayed: one launch per K steps. The arithmetic is
the eager step's (:func:`tokengeo.flows.integrators.rk_step` on the same rates), so the graph
agrees with the eager CUDA run to rounding; the time enters as a device scalar t0 + j dt.

The weight noise of a block is drawn before its replay, in one call, from the run's
generator: (K, P, H, d, d) normals in one draw, which is not the stream of K separate draws,
so noisy graphed runs are statistically, not bitwise, the eager ones. Deterministic runs
(sigma = 0) are the eager run's numbers.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from tokengeo.flows.integrators import EULER, rk_step
from tokengeo.flows.weights import symmetric_increment

MAX_BLOCK = 50  # steps per graph: longer graphs cost capture time and save nothing more


def block_length(record_every: int, n_steps: int) -> int:
    """Steps per graph: the largest divisor of ``record_every`` up to :data:`MAX_BLOCK` (so
    every record falls on a block's first step), and no more than the run's steps."""
    k = max(k for k in range(1, min(record_every, MAX_BLOCK) + 1) if record_every % k == 0)
    return max(1, min(k, n_steps))


@dataclass
class BlockOutputs:
    """What a replayed block leaves behind for the record of its first step."""

    energy: Tensor  # (P,)  E at the block's first step
    g2: Tensor  # (P,)  G^2 there
    finite: Tensor  # ()  bool: the velocity there was finite


class GraphedEulerBlock:
    """K Euler steps of ``rates_fn`` on static (x, D, cum) buffers, captured once.

    ``rates_fn(x, D, t)`` is the simulator's right-hand side (``t`` a 0-dim float64 device
    tensor here); it must not read values back to the host. ``cum`` (P, 4) accumulates
    dE_int, ito_int, G2_int, mart_int in float64.
    """

    def __init__(self, rates_fn, x: Tensor, D: Tensor, cum: Tensor, *, dt: float, steps: int,
                 noisy: bool) -> None:
        self.rates_fn, self.dt, self.steps = rates_fn, dt, steps
        self.x, self.D, self.cum = x, D, cum
        self.t0 = torch.zeros((), dtype=torch.float64, device=x.device)
        self.noise = torch.zeros(steps, *D.shape, dtype=D.dtype, device=x.device) if noisy \
            else None  # (K, P, H, d, d)
        self.out = BlockOutputs(x.new_zeros(x.shape[0], dtype=torch.float64),
                                x.new_zeros(x.shape[0], dtype=torch.float64),
                                torch.ones((), dtype=torch.bool, device=x.device))
        self.graph = self._capture()

    def _body(self) -> None:
        x, D = self.x, self.D
        for j in range(self.steps):
            noise = None if self.noise is None else self.noise[j]
            t = self.t0 + j * self.dt
            x, D, quad, ev = rk_step(self.rates_fn, x, D, t, self.dt, EULER, noise)
            if j == 0:
                self.out.energy.copy_(ev.energy)
                self.out.g2.copy_(ev.g2)
                self.out.finite.copy_(torch.isfinite(ev.velocity).all())
            self.cum[:, :3] += quad
            if noise is not None:
                self.cum[:, 3] += (noise * ev.moment).sum((1, 2, 3))
        self.x.copy_(x)
        self.D.copy_(D)

    def _capture(self) -> torch.cuda.CUDAGraph:
        saved = [b.clone() for b in (self.x, self.D, self.cum)]
        side = torch.cuda.Stream(device=self.x.device)
        side.wait_stream(torch.cuda.current_stream(self.x.device))
        with torch.cuda.stream(side):  # warm-up outside the graph (lazy inits, workspaces)
            self._body()
        torch.cuda.current_stream(self.x.device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self._body()
        for buffer, value in zip((self.x, self.D, self.cum), saved, strict=True):
            buffer.copy_(value)  # undo the warm-up
        return graph

    def replay(self, t0: float, noise: Tensor | None) -> BlockOutputs:
        self.t0.fill_(t0)
        if noise is not None:
            self.noise.copy_(noise)
        self.graph.replay()
        return self.out


def graphed_euler_run(
    rates_fn,
    x: Tensor,
    D: Tensor,
    cum: Tensor,
    *,
    n_steps: int,
    dt: float,
    noise_var: float,
    generator: torch.Generator,
    record_every: int,
    record: Callable[[float, Tensor, Tensor, bool, Tensor, Tensor, Tensor], None],
    progress: Callable[[int, int], None] | None = None,
) -> tuple[Tensor, Tensor]:
    """Run ``n_steps`` Euler steps in CUDA-graph blocks; returns the final (x, D).

    ``record(t, energy, g2, finite, cum, x, D)`` is called at every step k with
    k % record_every == 0, with the values at the start of step k (as the eager loop records
    them; ``finite`` says whether the velocity there was finite: one host sync per record).
    ``cum`` is updated in place.
    """
    K = block_length(record_every, n_steps)
    sigma = math.sqrt(noise_var)
    x, D = x.clone(), D.clone()  # the static buffers of the graphs
    blocks: dict[int, GraphedEulerBlock] = {}
    for k0 in range(0, n_steps, K):
        steps = min(K, n_steps - k0)
        if steps not in blocks:
            blocks[steps] = GraphedEulerBlock(rates_fn, x, D, cum, dt=dt, steps=steps,
                                              noisy=noise_var > 0)
        noise = None
        if noise_var > 0:
            noise = sigma * symmetric_increment((steps, *D.shape), dt, generator,
                                                dtype=D.dtype, device=D.device)
        recording = k0 % record_every == 0
        cum_before = cum.clone() if recording else None
        x_before = x.clone() if recording else None
        D_before = D.clone() if recording else None
        out = blocks[steps].replay(k0 * dt, noise)
        if recording:
            record(k0 * dt, out.energy.clone(), out.g2.clone(), bool(out.finite), cum_before,
                   x_before, D_before)
        if progress is not None:
            progress(k0 + steps, n_steps)
    return x, D
