"""Named experiment settings, with their initial tokens and weights.

The ``s2-*`` presets are the setting of arXiv 2605.18870, Sec. 6, as the authors' scripts run
it: n = 200 tokens on S^2, each at a uniformly random octahedron vertex +-e_k plus N(0, 0.05^2)
noise (standard deviation 0.05), then normalised; T = 20, dt = 5e-3, 10 paths, H in
{1, 10, 100} for the scaling experiment.

What a Monte Carlo path is (the authors' ``simulate_batch``): all paths start from ONE
initial state, the tokens x(0) and the weights D_h(0) = Z + Z^T (Z_ab ~ N(0, 1) per head),
drawn once from ``seed`` (the tokens are the same for every H as well). Paths differ only by
their weight noise. So

* ``s2-ou`` (sigma^2 = 2): paths differ by the noise alone;
* ``s2-oscillating`` (sigma^2 = 0, per-head phases 2 pi h / H): the authors' current code
  (commit 693474c, whose oscillating drift reads H = D.shape[-3]); deterministic, so its
  paths coincide;
* ``s2-oscillating-inphase`` (sigma^2 = 0, phase 0 for every head): the code of the
  paper's figures (commit 496b2f6, whose drift read H = D.shape[0], the number of paths,
  which is 1 in the deterministic run, so every head tracked the same target);
* ``s2-oscillating-noisy`` keeps our earlier oscillating setting, sigma^2 = 2 (not the
  authors');
* ``s2-attractive`` (not in the paper): the static, attractive control. Frozen
  weights D_h = -W_h with W_h = I + Z_h Z_h^T / d positive definite. In this simulator's sign
  (dx_i/dt = -v_i, v_i = (1/H) sum_h P_{x_i} sum_j A^h_ij D_h x_j) the tokens move along
  +sum_j A^h_ij W_h x_j: W_h is the value map of the attention update, and with it positive
  definite the frozen flow decreases E = 1/(2Hn^2) sum exp(-<x_i, W_h x_j>), whose minimisers
  put every token at one point: the tokens cluster. (The OU drift relaxes D_h to +I, the
  opposite, repulsive sign.)

``per_path_weights=True`` draws D_h(0) per path instead (the first path keeps the shared
draw); then the spread over paths also measures the initial weights, which the authors'
spread does not.

Earlier versions read the 0.05 as a variance (std sqrt(0.05)), put token i at vertex i mod 2d,
redrew the tokens for every path and drew D(0) per path.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from tokengeo.checks import (
    check_choice,
    check_int,
    check_number,
    check_seed,
    check_time,
    replace_checked,
)
from tokengeo.errors import ConfigError

if TYPE_CHECKING:
    from tokengeo.flows.simulate import FlowConfig

INITS = ("octahedron", "uniform")
WEIGHT_INITS = ("gaussian", "attractive")  # D(0) = Z + Z^T, or -(I + Z Z^T / d)


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
    noise_var: float = 2.0  # sigma^2 of the weight noise
    n_paths: int = 10
    init: str = "octahedron"
    init_std: float = 0.05  # standard deviation of the token offsets
    seed: int = 0
    integrator: str = "euler"
    record_every: int = 20
    scaling_heads: tuple[int, ...] = (1, 10, 100)
    per_path_weights: bool = False  # draw D_h(0) per path (default: one D(0) for all paths)
    weight_init: str = "gaussian"  # one of WEIGHT_INITS
    notes: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        from tokengeo.flows.simulate import check_flow_memory, flow_steps

        check_choice("init", self.init, INITS)
        check_choice("weight_init", self.weight_init, WEIGHT_INITS)
        for name in ("d", "n_tokens", "n_heads", "n_paths", "record_every"):
            check_int(name, getattr(self, name), lo=1)
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
        check_number("noise_var", self.noise_var, positive=True, allow_zero=True)
        check_number("init_std", self.init_std, positive=True, allow_zero=True)
        check_seed("seed", self.seed)
        if not isinstance(self.per_path_weights, bool):
            raise ConfigError(f"per_path_weights={self.per_path_weights!r} must be true or false")
        if self.noise_var > 0 and self.integrator == "rk4":
            raise ConfigError(f"integrator='rk4' is for deterministic weights but noise_var="
                              f"{self.noise_var}; use euler or heun, or noise_var 0 "
                              "(--noise-var 0)")
        heads = self.scaling_heads
        if isinstance(heads, list):  # from TOML
            object.__setattr__(self, "scaling_heads", heads := tuple(heads))
        if not isinstance(heads, tuple) or any(
                isinstance(h, bool) or not isinstance(h, int) or h < 1 for h in heads):
            raise ConfigError(f"scaling_heads={heads!r} must be a list of whole numbers >= 1")
        check_flow_memory(n_paths=self.n_paths, n_tokens=self.n_tokens, d=self.d,
                          n_heads=max((self.n_heads, *heads)),
                          n_records=n_steps // self.record_every + 2, trajectory=True)
        # time as well as memory: every step costs ~(4d + 10) per path, head and token pair
        pairs = float(self.n_paths) * max((self.n_heads, *heads)) * float(self.n_tokens) ** 2
        check_time(f"a flow of {n_steps:,} steps with n_paths={self.n_paths}, "
                   f"n_tokens={self.n_tokens}, n_heads={max((self.n_heads, *heads))}",
                   n_steps * pairs * (4 * self.d + 10),
                   "use fewer tokens (n_tokens), paths (--n-paths) or heads (--heads, "
                   "--scaling-heads), or a shorter --T or larger --dt")

    def n_records(self) -> int:
        """How many times a run of this preset records its series (every ``record_every``
        steps, and at T)."""
        from tokengeo.flows.simulate import flow_steps

        return len(range(0, flow_steps(self.T, self.dt), self.record_every)) + 1

    def initial_state(
        self, n_heads: int | None = None, *, dtype=torch.float64
    ) -> tuple[Tensor, Tensor]:
        """Tokens (P, n, d) and weights D_h(0), (P, H, d, d), one state for all paths.

        D_h(0) = Z + Z^T (``weight_init="gaussian"``) or -(I + Z Z^T / d) (``"attractive"``),
        Z_ab ~ N(0, 1).

        The tokens are drawn once from ``seed`` (so every H of a scaling experiment and every
        path starts from them); the weights are drawn per head from ``seed`` and H, once for
        all paths, or per path with ``per_path_weights`` (path 0 keeps the shared draw).
        """
        H = self.n_heads if n_heads is None else n_heads
        gen = torch.Generator().manual_seed(self.seed)
        x0 = initial_tokens(self.init, self.n_tokens, self.d, self.init_std, gen, dtype=dtype)
        x0 = x0.expand(self.n_paths, -1, -1).clone()  # (P, n, d), one shared state
        gen_w = torch.Generator().manual_seed(self.seed * 1_000_003 + H)
        draws = self.n_paths if self.per_path_weights else 1  # one (H, d, d) draw per path
        z = torch.stack([torch.randn(H, self.d, self.d, generator=gen_w, dtype=dtype)
                         for _ in range(draws)])  # (draws, H, d, d)
        if self.weight_init == "attractive":
            eye = torch.eye(self.d, dtype=dtype)
            D = -(eye + z @ z.mT / self.d)  # -W, W positive definite
        else:
            D = z + z.mT
        D0 = D.expand(self.n_paths, -1, -1, -1).clone()  # (P, H, d, d)
        return x0, D0

    def flow_config(self, **changes) -> FlowConfig:
        """The :class:`~tokengeo.flows.simulate.FlowConfig` of this preset (the noise seeded
        by ``seed + 1``), with ``changes`` (e.g. ``record_trajectory=True``)."""
        from tokengeo.flows.simulate import FlowConfig

        base = FlowConfig(drift=self.drift, noise_var=self.noise_var, T=self.T, dt=self.dt,
                          n_paths=self.n_paths, seed=self.seed + 1,
                          integrator=self.integrator, record_every=self.record_every)
        return base.replace(**changes)


def initial_tokens(
    init: str, n: int, d: int, std: float, gen: torch.Generator, *, dtype
) -> Tensor:
    """One configuration of n unit tokens, (n, d).

    ``"octahedron"`` (the octahedron for d = 3): x_i = (c_i + std * g_i) / |c_i + std * g_i|
    with c_i drawn uniformly from the 2d vertices +-e_k and g_i ~ N(0, I_d) (arXiv 2605.18870,
    Sec. 6, as the authors' scripts draw it); ``"uniform"``: uniform on the sphere.
    """
    check_choice("init", init, INITS)
    if init == "uniform":
        x = torch.randn(n, d, generator=gen, dtype=dtype)
    else:
        vertices = torch.cat([torch.eye(d, dtype=dtype), -torch.eye(d, dtype=dtype)])  # (2d, d)
        centers = vertices[torch.randint(2 * d, (n,), generator=gen)]  # (n, d)
        x = centers + std * torch.randn(n, d, generator=gen, dtype=dtype)
    return x / x.norm(dim=-1, keepdim=True)


PRESETS: dict[str, FlowPreset] = {
    p.name: p
    for p in (
        FlowPreset("s2-ou", drift="ou", notes="OU weights on S^2: tokens relax, G^2 ~ 1/H"),
        FlowPreset("s2-oscillating", drift="oscillating", noise_var=0.0,
                   notes="time-periodic targets on S^2 with per-head phases 2 pi h / H, no "
                         "weight noise: the authors' current code (commit 693474c)"),
        FlowPreset("s2-oscillating-inphase", drift="oscillating-inphase", noise_var=0.0,
                   notes="one time-periodic target (phase 0) for every head on S^2, no weight "
                         "noise: the code of the paper's figures (commit 496b2f6)"),
        FlowPreset("s2-oscillating-noisy", drift="oscillating", noise_var=2.0,
                   notes="time-periodic targets on S^2 plus weight noise sigma^2 = 2"),
        FlowPreset("s2-frozen", drift="frozen", noise_var=0.0,
                   notes="frozen random weights on S^2: an autonomous gradient flow"),
        FlowPreset("s1-oscillating", drift="oscillating", d=2, init="uniform",
                   notes="oscillating targets on the circle S^1"),
        FlowPreset("s2-attractive", drift="frozen", noise_var=0.0, weight_init="attractive",
                   notes="static attractive control on S^2: frozen D_h = -(I + Z Z^T / d), a "
                         "positive-definite value map; the tokens cluster"),
    )
}


def get_preset(name: str, **overrides) -> FlowPreset:
    """A preset by name, with field overrides (unknown fields raise with the valid ones)."""
    check_choice("preset", name, list(PRESETS))
    return replace_checked(PRESETS[name], overrides, what="flow preset")


def scaling_run(name: str, overrides: dict, scaling_heads: tuple[int, ...] | None = None
                ) -> tuple[FlowPreset, tuple[int, ...]]:
    """The preset ``name`` with field ``overrides`` and the H list of its scaling run.

    The list is ``scaling_heads`` (default: the preset's) with the main run's H
    (``n_heads``) appended when missing; the preset is checked (sizes, steps, integrator and
    noise) and its memory at the largest H of the list.
    """
    preset = get_preset(name, **overrides)
    heads = preset.scaling_heads if scaling_heads is None else tuple(scaling_heads)
    heads = tuple(dict.fromkeys(heads + (preset.n_heads,)))  # the main run is always included
    get_preset(name, **overrides, scaling_heads=heads)  # the memory of the largest H
    return preset, heads
