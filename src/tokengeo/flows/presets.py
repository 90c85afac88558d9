"""Named experiment settings, with their initial tokens and weights.

The ``s2-*`` presets are the setting of arXiv 2605.18870, Sec. 6: n = 200 tokens on S^2
drawn around the 6 octahedron vertices with N(0, 0.05) noise (we read 0.05 as the variance,
std sqrt(0.05), and re-draw the tokens for every path), D_h(0) = Z + Z^T per head and path,
sigma^2 = 2, T = 20, dt = 5e-3, 10 paths, H in {1, 10, 100} for the scaling experiment.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from torch import Tensor

from tokengeo.config import check_choice, check_int, check_number, check_seed, replace_checked
from tokengeo.errors import ConfigError

INITS = ("octahedron", "uniform")


@dataclass(frozen=True)
class FlowPreset:
    """One simulation setting; :meth:`initial_state` draws its tokens and weights."""

    name: str
    drift: str = "ou"
    d: int = 3
    n_tokens: int = 200
    n_heads: int = 10
    T: float = 20.0
    dt: float = 5e-3
    noise_var: float = 2.0
    n_paths: int = 10
    init: str = "octahedron"
    init_std: float = math.sqrt(0.05)
    seed: int = 0
    integrator: str = "euler"
    record_every: int = 20
    scaling_heads: tuple[int, ...] = (1, 10, 100)
    notes: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        from tokengeo.flows.simulate import check_flow_memory, flow_steps

        check_choice("init", self.init, INITS)
        for name in ("d", "n_tokens", "n_heads", "n_paths", "record_every"):
            check_int(name, getattr(self, name))
        if self.d < 2:
            raise ConfigError(f"d={self.d} must be >= 2 (tokens live on S^(d-1))")
        n_steps = flow_steps(self.T, self.dt)
        first = -(-n_steps // 2)  # the G^2 average runs over [T/2, T] (flows.scaling)
        late = len(range(-(-first // self.record_every) * self.record_every, n_steps,
                         self.record_every)) + 1
        if late < 2:
            raise ConfigError(f"record_every={self.record_every} leaves {late} record in "
                              f"[T/2, T] of the {n_steps} steps; the G^2 average needs 2: "
                              "record more often")
        check_number("noise_var", self.noise_var, allow_zero=True)
        check_number("init_std", self.init_std, allow_zero=True)
        check_seed("seed", self.seed)
        heads = self.scaling_heads
        if isinstance(heads, list):  # from TOML
            object.__setattr__(self, "scaling_heads", heads := tuple(heads))
        if not isinstance(heads, tuple) or any(
                isinstance(h, bool) or not isinstance(h, int) or h < 1 for h in heads):
            raise ConfigError(f"scaling_heads={heads!r} must be a list of whole numbers >= 1")
        check_flow_memory(n_paths=self.n_paths, n_tokens=self.n_tokens, d=self.d,
                          n_heads=max((self.n_heads, *heads)),
                          n_records=n_steps // self.record_every + 2, trajectory=True)

    def initial_state(
        self, n_heads: int | None = None, *, dtype=torch.float64
    ) -> tuple[Tensor, Tensor]:
        """Tokens (P, n, d) and symmetric weights D_h(0) = Z + Z^T, (P, H, d, d).

        Seeded by ``seed`` (and H), so every H of a scaling experiment starts from the same
        tokens.
        """
        H = self.n_heads if n_heads is None else n_heads
        gen = torch.Generator().manual_seed(self.seed)
        x0 = initial_tokens(self.init, self.n_paths, self.n_tokens, self.d, self.init_std, gen,
                            dtype=dtype)
        gen_w = torch.Generator().manual_seed(self.seed * 1_000_003 + H)
        z = torch.randn(self.n_paths, H, self.d, self.d, generator=gen_w, dtype=dtype)
        return x0, z + z.mT

    def simulate_kwargs(self) -> dict:
        """Keyword arguments of :func:`tokengeo.flows.simulate` for this preset."""
        return dict(drift=self.drift, noise_var=self.noise_var, T=self.T, dt=self.dt,
                    n_paths=self.n_paths, seed=self.seed + 1, integrator=self.integrator,
                    record_every=self.record_every)


def initial_tokens(
    init: str, n_paths: int, n: int, d: int, std: float, gen: torch.Generator, *, dtype
) -> Tensor:
    """Unit tokens (P, n, d): around the 2d vertices +-e_k (token i at vertex i mod 2d) with
    Gaussian noise of standard deviation ``std`` (``"octahedron"``; the octahedron for d = 3),
    or uniform on the sphere (``"uniform"``)."""
    check_choice("init", init, INITS)
    if init == "uniform":
        x = torch.randn(n_paths, n, d, generator=gen, dtype=dtype)
    else:
        vertices = torch.cat([torch.eye(d, dtype=dtype), -torch.eye(d, dtype=dtype)])  # (2d, d)
        centers = vertices[torch.arange(n) % (2 * d)]  # (n, d)
        x = centers + std * torch.randn(n_paths, n, d, generator=gen, dtype=dtype)
    return x / x.norm(dim=-1, keepdim=True)


PRESETS: dict[str, FlowPreset] = {
    p.name: p
    for p in (
        FlowPreset("s2-ou", drift="ou", notes="OU weights on S^2: tokens relax, G^2 ~ 1/H"),
        FlowPreset(
            "s2-oscillating",
            drift="oscillating",
            notes="time-periodic targets on S^2: the cloud never settles",
        ),
        FlowPreset("s2-frozen", drift="frozen", noise_var=0.0,
                   notes="frozen random weights on S^2: an autonomous gradient flow"),
        FlowPreset("s1-oscillating", drift="oscillating", d=2, init="uniform",
                   notes="oscillating targets on the circle S^1"),
    )
}


def get_preset(name: str, **overrides) -> FlowPreset:
    """A preset by name, with field overrides (unknown fields raise with the valid ones)."""
    check_choice("preset", name, list(PRESETS))
    return replace_checked(PRESETS[name], overrides, what="flow preset")
