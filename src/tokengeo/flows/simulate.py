"""Simulate the multi-head token flow on the sphere and record the energy balance.

Massucco et al., arXiv 2605.18870, Eq. (5) and Sec. 6. Tokens follow dx_i/dt = -v_i(x, D(t))
and each head's weights follow dD_h = f_h(D_h, t) dt + sigma dW_h (or a given layer
schedule). Along a run we record the discrete form of the energy-dissipation balance

    E_T - E_0 = int dE/dt|_x dt + int Ito dt - int G^2 dt + M_T + residual,

with dE/dt|_x = sum_h <f_h, M_h>, Ito = (sigma^2/4) 1/(2Hn^2) sum K ((x_i.x_j)^2 + 1) and
M_T = sum_k sum_h <sigma dW_h,k, M_h(t_k)> (Ito, left point). For H = 1 the identity holds
exactly in continuous time, so the residual measures the discretisation error (it shrinks at
the scheme's order when sigma = 0). For H > 1 the multi-head velocity is not the gradient of E
in the harmonic-mean mobility metric that defines G^2, so the residual, reported as in the
paper, also measures that mismatch (sum_i <grad_i E, v_i> - G^2) and does not vanish as
dt -> 0.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from tokengeo.checks import (
    check_choice,
    check_int,
    check_memory,
    check_number,
    check_seed,
    replace_checked,
)
from tokengeo.errors import ConfigError
from tokengeo.flows.dynamics import DEFAULT_CHUNK_ELEMS, FieldEval, evaluate_field
from tokengeo.flows.integrators import TABLEAUX, Rates, rk_step
from tokengeo.flows.weights import Drift, LayerSchedule, resolve_drift, symmetric_increment

SERIES = ("E", "G2", "dE_int", "ito_int", "G2_int", "mart_int", "residual")
MAX_STEPS = 10_000_000  # the paper's runs take 4,000 steps; 10^7 is days on one machine


def flow_steps(T: float, dt: float) -> int:
    """Number of time steps ``T / dt``: checked finite, positive, whole and below
    :data:`MAX_STEPS` (an absurd horizon is refused, not started)."""
    check_number("T", T, positive=True)
    check_number("dt", dt, positive=True)
    ratio = T / dt
    if not math.isfinite(ratio) or ratio > MAX_STEPS + 0.5:
        raise ConfigError(f"T={T} with dt={dt} is {ratio:.3g} steps, more than the limit of "
                          f"{MAX_STEPS:,}; use a shorter T or a larger dt")
    n_steps = round(ratio)
    if n_steps < 1 or abs(n_steps * dt - T) > 1e-9 * T:
        raise ConfigError(f"T={T} must be a whole multiple of dt={dt}")
    return n_steps


def flow_memory_bytes(*, n_paths: int, n_tokens: int, d: int, n_heads: int, n_records: int,
                      trajectory: bool, itemsize: int = 8,
                      chunk_elems: int = DEFAULT_CHUNK_ELEMS) -> float:
    """Estimated peak memory of :func:`simulate`: ~16 copies of the tokens (P, n, d) (state,
    integrator stages, field), ~12 of the weights (P, H, d, d), 4 kernel blocks, the recorded
    series (P, R) and the trajectory (P, R, n, d) when recorded. Plain floats (no overflow)."""
    P, n, H, R = float(n_paths), float(n_tokens), float(n_heads), float(n_records)
    kernel = min(float(chunk_elems), P * H * n * n)
    elems = 16 * P * n * d + 12 * P * H * d * d + 4 * kernel + 8 * P * R
    if trajectory:
        elems += P * R * n * d
    return elems * itemsize


def check_flow_memory(**sizes) -> None:
    """Refuse a simulation whose :func:`flow_memory_bytes` exceeds the available memory."""
    shown = ", ".join(f"{k}={sizes[k]}" for k in ("n_paths", "n_tokens", "d", "n_heads"))
    check_memory(f"a flow with {shown}", flow_memory_bytes(**sizes),
                 "use fewer paths, tokens or heads")


@dataclass(frozen=True)
class FlowConfig:
    """How :func:`simulate` runs: the weight process, horizon, step, paths and what it records.

    Attributes:
        drift: ``"ou"``, ``"oscillating"``, ``"oscillating-inphase"``, ``"frozen"`` or a
            callable f(D, t) (ignored for a :class:`LayerSchedule`).
        noise_var: sigma^2 of the weight noise (0 for deterministic weights; a schedule has none).
        T, dt: horizon and step; T must be a whole number of steps.
        n_paths: Monte Carlo paths, batched.
        seed: seeds the weight noise.
        integrator: ``"euler"`` (the authors' scheme, left-point Ito sums), ``"heun"``
            (stochastic Heun) or ``"rk4"`` (deterministic weights only).
        record_every: record every this many steps, and at T.
        record_trajectory: also keep the tokens at the recorded times.
        record_weights: also keep the SDE weights D(t) at the recorded times.
        energy: compute the energy balance (requires symmetric D); False allows general heads.
        dtype: ``torch.float64`` or ``torch.float32`` (tokens, weights, kernels; the energy
            sums stay float64).
        chunk_elems: largest attention-kernel block held in memory.
        cuda_graph: run the steps as captured CUDA graphs (:mod:`tokengeo.flows.graph`);
            ``None`` does so when the tokens are on a CUDA device and the run is Euler with a
            named drift and SDE weights (a deterministic run then gives the eager numbers to
            rounding; noise is drawn per block, so noisy runs differ in their draws).
            ``True`` where that does not hold raises; ``False`` never graphs.
    """

    drift: str | Drift = "ou"
    noise_var: float = 2.0
    T: float = 20.0
    dt: float = 5e-3
    n_paths: int = 1
    seed: int = 0
    integrator: str = "euler"
    record_every: int = 1
    record_trajectory: bool = False
    record_weights: bool = False
    energy: bool = True
    dtype: torch.dtype = torch.float64
    chunk_elems: int = DEFAULT_CHUNK_ELEMS
    cuda_graph: bool | None = None

    def __post_init__(self) -> None:
        check_choice("integrator", self.integrator, list(TABLEAUX))
        check_choice("dtype", self.dtype, [torch.float32, torch.float64])
        flow_steps(self.T, self.dt)
        check_number("noise_var", self.noise_var, positive=True, allow_zero=True)
        check_int("n_paths", self.n_paths, lo=1)
        check_int("record_every", self.record_every, lo=1)
        check_int("chunk_elems", self.chunk_elems, lo=1)
        check_seed("seed", self.seed)
        for name in ("record_trajectory", "record_weights", "energy"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"{name}={getattr(self, name)!r} must be True or False")
        if not (isinstance(self.drift, str) or callable(self.drift)):
            raise ConfigError(f"drift={self.drift!r} must be a drift name or a callable f(D, t)")

    @property
    def n_steps(self) -> int:
        return flow_steps(self.T, self.dt)

    def replace(self, **changes) -> FlowConfig:
        """A copy with ``changes`` (unknown fields raise with the valid ones)."""
        return replace_checked(self, changes, what="flow config")


@dataclass
class FlowResult:
    """Recorded series, each (n_paths, n_records), at times ``t`` (n_records,).

    ``E`` energy, ``G2`` strong gradient, ``dE_int`` = int dE/dt|_x dt, ``ito_int`` the Ito
    correction, ``G2_int`` = int G^2 dt, ``mart_int`` the martingale term, ``residual`` =
    (E - E_0) - (dE_int + ito_int - G2_int + mart_int). Energy terms are NaN when
    ``energy_defined`` is False (general, non-symmetric heads).
    """

    t: Tensor  # (R,)
    E: Tensor  # (P, R)
    G2: Tensor
    dE_int: Tensor
    ito_int: Tensor
    G2_int: Tensor
    mart_int: Tensor
    residual: Tensor
    energy_defined: bool
    x_final: Tensor | None = None  # (P, n, d)  tokens at T
    x: Tensor | None = None  # (P, R, n, d) when record_trajectory
    weights: Tensor | None = None  # (P, H, d, d) final D (SDE weights only)
    weight_path: Tensor | None = None  # (P, R, H, d, d) D(t) when record_weights
    config: dict[str, Any] = field(default_factory=dict)

    def mean(self, name: str) -> Tensor:
        """Mean over paths of a series, (R,)."""
        return self._series(name).mean(0)

    def std(self, name: str) -> Tensor:
        """Standard deviation over paths (0 for one path), (R,)."""
        series = self._series(name)
        return series.std(0) if series.shape[0] > 1 else torch.zeros_like(series[0])

    def _series(self, name: str) -> Tensor:
        check_choice("series", name, SERIES)
        return getattr(self, name)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able summary: config, times, and per series the paths, mean and std."""
        out: dict[str, Any] = {"config": self.config, "energy_defined": self.energy_defined}
        out["t"] = self.t.tolist()
        for name in SERIES:
            out[name] = {
                "paths": _json_floats(self._series(name)),
                "mean": _json_floats(self.mean(name)),
                "std": _json_floats(self.std(name)),
            }
        return out


def _json_floats(t: Tensor) -> list:
    """Nested lists of floats with NaN (undefined energy terms) as None, for strict JSON."""
    if t.ndim > 1:
        return [_json_floats(row) for row in t]
    return [None if math.isnan(v) else v for v in t.tolist()]


def _n_heads(D0) -> int:
    if not isinstance(D0, Tensor) or D0.ndim not in (3, 4):
        raise ConfigError("D0 must be a tensor shaped (H, d, d) or (n_paths, H, d, d), or a "
                          "LayerSchedule")
    return D0.shape[-3]


def _token_shape(x0) -> tuple[int, int]:
    if not isinstance(x0, Tensor) or x0.ndim not in (2, 3) or x0.shape[-2] < 1:
        raise ConfigError("x0 must be a tensor shaped (n, d) or (n_paths, n, d) with n >= 1 "
                          "tokens")
    return x0.shape[-2], x0.shape[-1]


def _check_tokens(x0: Tensor, n_paths: int, dtype) -> Tensor:
    if not x0.is_floating_point() or not torch.isfinite(x0).all():
        raise ConfigError("x0 must hold finite floating-point numbers (it has NaN/inf or is "
                          "not a float tensor)")
    x = x0.to(dtype)
    if x.ndim == 2:
        x = x.expand(n_paths, *x.shape)
    if x.shape[0] != n_paths:
        raise ConfigError(f"x0 has {x.shape[0]} paths but n_paths={n_paths}")
    if x.shape[-1] < 2:
        raise ConfigError(f"tokens need dimension d >= 2 (the sphere S^(d-1)); got d={x.shape[-1]}")
    dev = (x.norm(dim=-1) - 1).abs().max().item()
    tol = 1e-10 if dtype == torch.float64 else 1e-5
    if not dev <= tol:
        raise ConfigError(
            f"x0 rows must lie on the unit sphere (max | |x_i| - 1 | = {dev:.3g}); "
            "normalise with x0 / x0.norm(dim=-1, keepdim=True)"
        )
    return x.clone()


def _check_weights(D0: Tensor, n_paths: int, d: int, energy: bool, dtype) -> Tensor:
    if not isinstance(D0, Tensor) or D0.ndim not in (3, 4):
        raise ConfigError("D0 must be a tensor shaped (H, d, d) or (n_paths, H, d, d)")
    if not D0.is_floating_point() or not torch.isfinite(D0).all():
        raise ConfigError("D0 must hold finite floating-point numbers (it has NaN/inf or is "
                          "not a float tensor)")
    D = D0.to(dtype)
    if D.ndim == 3:
        D = D.expand(n_paths, *D.shape)
    if D.shape[0] != n_paths or D.shape[-2:] != (d, d):
        raise ConfigError(
            f"D0 is shaped {tuple(D0.shape)}; expected (H, {d}, {d}) or ({n_paths}, H, {d}, {d}) "
            "to match x0 and n_paths"
        )
    asym = (D - D.mT).abs().max().item()
    if energy and asym > 1e-12 * max(1.0, D.abs().max().item()):
        raise ConfigError(
            f"D0 is not symmetric (max |D - D^T| = {asym:.3g}); the energy diagnostics need "
            "symmetric D_h. Symmetrise with (D0 + D0.mT) / 2, or pass energy=False to simulate "
            "general heads without them"
        )
    return (D + D.mT) / 2 if energy else D.clone()  # exactly symmetric (a no-op for Z + Z^T)


@dataclass
class _Run:
    """The right-hand side of one simulation: weights -> heads -> field -> rates."""

    drift: Drift | None
    schedule: LayerSchedule | None
    n_paths: int
    energy: bool
    noise_var: float
    chunk_elems: int
    trusted: bool = False  # a built-in drift on symmetric weights: skip the host-side checks

    def heads(self, D: Tensor | None, t: float) -> tuple[Tensor, Tensor | None]:
        if self.schedule is None:
            return D, None  # B_h = V_h = D_h
        score, value = self.schedule.heads(t)  # (H, d, d)
        return (
            score.expand(self.n_paths, *score.shape),
            value.expand(self.n_paths, *value.shape),
        )

    def evaluate(self, x: Tensor, D: Tensor | None, t: float, ito: bool = True) -> FieldEval:
        """The field at (x, D, t); ``ito=False`` skips the Ito kernel (not needed at T)."""
        score, value = self.heads(D, t)
        ito = ito and self.energy and self.noise_var > 0
        return evaluate_field(
            x, score, value, energy=self.energy, ito=ito, chunk_elems=self.chunk_elems,
            symmetric=True if self.trusted else None,
        )

    def rates(self, x: Tensor, D: Tensor | None, t: float) -> tuple[Rates, FieldEval]:
        ev = self.evaluate(x, D, t)
        f = None if D is None else self.drift(D, t)
        if f is not None and f.shape != D.shape:
            raise ConfigError(f"drift returned shape {tuple(f.shape)}; expected {tuple(D.shape)}")
        if f is not None and self.energy and not self.trusted and not torch.equal(f, f.mT):
            raise ConfigError(
                "the drift returned non-symmetric matrices, which break the energy diagnostics; "
                "return (F + F^T) / 2, or pass energy=False"
            )
        nan = torch.full_like(ev.g2, math.nan)
        if self.energy:
            dE = (f * ev.moment).sum((1, 2, 3)) if f is not None else torch.zeros_like(ev.g2)
            ito = self.noise_var / 4 * ev.ito_kernel if ev.ito_kernel is not None else 0 * dE
        else:
            dE = ito = nan
        return Rates(-ev.velocity, f, torch.stack([dE, ito, ev.g2], dim=1)), ev


def simulate(
    x0: Tensor,
    weights: Tensor | LayerSchedule,
    config: FlowConfig | None = None,
    *,
    progress: Callable[[int, int], None] | None = None,
) -> FlowResult:
    """Integrate the token flow of arXiv 2605.18870 (Eq. 5, Sec. 6), batched over paths.

    Args:
        x0: initial tokens on the unit sphere, (n, d) shared by all paths or (P, n, d).
        weights: initial symmetric head weights D(0), (H, d, d) or (P, H, d, d), evolved by
            dD = f(D, t) dt + sigma dW; or a :class:`LayerSchedule` of general heads
            (e.g. :func:`heads_from_model`), whose energy diagnostics are undefined.
        config: a :class:`FlowConfig` (default: ``FlowConfig()``).
        progress: optional callback ``progress(step, n_steps)``.

    ``FlowConfig(dtype=torch.float32)`` runs the tokens, weights and kernels in float32 and
    sums the energy, its balance terms and G^2 in float64 (all recorded series are float64).
    """
    cfg = FlowConfig() if config is None else config
    if not isinstance(cfg, FlowConfig):
        raise ConfigError(f"config must be a FlowConfig, not {type(cfg).__name__}")
    if progress is not None and not callable(progress):
        raise ConfigError(f"progress={progress!r} must be a callable progress(step, n_steps)")
    x, D, run, graphed = _prepare(x0, weights, cfg)
    rec = _Recorder(cfg, x)
    gen = torch.Generator(device=x.device).manual_seed(cfg.seed)
    if graphed:
        from tokengeo.flows.graph import graphed_euler_run

        x, D = graphed_euler_run(run.rates, x, D, rec.cum, n_steps=cfg.n_steps, dt=cfg.dt,
                                 noise_var=run.noise_var, generator=gen,
                                 record_every=cfg.record_every, record=rec.record,
                                 progress=progress)
    else:
        x, D = _eager_run(run, x, D, cfg, rec, gen, progress)
    T = cfg.n_steps * cfg.dt
    rec.record_eval(T, run.evaluate(x, D, T, ito=False), x, D)
    return rec.result(x, D, config=_config_dict(cfg, run, x, D, graphed))


def _prepare(x0, weights, cfg: FlowConfig) -> tuple[Tensor, Tensor | None, _Run, bool]:
    """Checked tokens (P, n, d), weights (P, H, d, d) or None (a schedule), the right-hand
    side and whether the steps run as CUDA graphs."""
    n_heads = weights.score.shape[1] if isinstance(weights, LayerSchedule) else _n_heads(weights)
    n_tokens, d = _token_shape(x0)
    check_flow_memory(n_paths=cfg.n_paths, n_tokens=n_tokens, d=d, n_heads=n_heads,
                      n_records=cfg.n_steps // cfg.record_every + 2,
                      trajectory=cfg.record_trajectory, itemsize=cfg.dtype.itemsize,
                      chunk_elems=cfg.chunk_elems)
    x = _check_tokens(x0, cfg.n_paths, cfg.dtype)
    if isinstance(weights, LayerSchedule):
        schedule, D, drift_fn, noise_var = _check_schedule(weights, cfg, x), None, None, 0.0
    else:
        schedule, noise_var = None, cfg.noise_var
        D = _check_weights(weights, cfg.n_paths, x.shape[-1], cfg.energy, cfg.dtype)
        drift_fn = resolve_drift(cfg.drift)
    if noise_var > 0 and not TABLEAUX[cfg.integrator].allows_noise:
        raise ConfigError(
            f"integrator={cfg.integrator!r} is for deterministic weights; use 'euler' or 'heun' "
            f"with noise_var={noise_var} > 0"
        )
    graphable = (x.device.type == "cuda" and cfg.integrator == "euler" and schedule is None
                 and isinstance(cfg.drift, str) and cfg.energy)
    if cfg.cuda_graph and not graphable:
        raise ConfigError("cuda_graph=True needs tokens and weights on a CUDA device, "
                          "integrator='euler', a named drift and energy=True; pass "
                          "cuda_graph=None to graph only where it applies")
    graphed = graphable if cfg.cuda_graph is None else bool(cfg.cuda_graph)
    run = _Run(drift_fn, schedule, cfg.n_paths, cfg.energy, noise_var, cfg.chunk_elems,
               trusted=graphed)
    return x, D, run, graphed


def _check_schedule(schedule: LayerSchedule, cfg: FlowConfig, x: Tensor) -> LayerSchedule:
    """The schedule in the tokens' dtype and device, checked against them and T."""
    if cfg.energy:
        raise ConfigError(
            "a LayerSchedule has general (non-symmetric) heads, for which the energy is "
            "undefined; pass energy=False"
        )
    if cfg.record_weights:
        raise ConfigError("record_weights keeps SDE weights D(t); a LayerSchedule's weights "
                          "are its layers (schedule.score, schedule.value): pass "
                          "record_weights=False")
    schedule = schedule.to(cfg.dtype, x.device)
    if schedule.score.shape[-1] != x.shape[-1]:
        raise ConfigError(
            f"the schedule's heads act on d={schedule.score.shape[-1]} but x0 has "
            f"d={x.shape[-1]}"
        )
    if cfg.T > schedule.n_layers + 1e-9:
        raise ConfigError(f"T={cfg.T} exceeds the schedule's {schedule.n_layers} layers")
    return schedule


def _eager_run(run: _Run, x: Tensor, D: Tensor | None, cfg: FlowConfig, rec: _Recorder,
               gen: torch.Generator, progress) -> tuple[Tensor, Tensor | None]:
    """The step loop on the host (CPU, or CUDA not graphed); returns the final (x, D)."""
    tableau, sigma, n_steps = TABLEAUX[cfg.integrator], math.sqrt(run.noise_var), cfg.n_steps
    for k in range(n_steps):
        t = k * cfg.dt
        noise = None
        if D is not None and run.noise_var > 0:
            noise = sigma * symmetric_increment(D.shape, cfg.dt, gen, dtype=cfg.dtype,
                                                device=x.device)
        x_new, D_new, quad, ev0 = rk_step(run.rates, x, D, t, cfg.dt, tableau, noise)
        if k % cfg.record_every == 0:
            rec.record_eval(t, ev0, x, D)
        rec.cum[:, :3] += quad
        if cfg.energy and noise is not None:
            rec.cum[:, 3] += (noise * ev0.moment).sum((1, 2, 3))
        x, D = x_new, D_new
        if progress is not None:
            progress(k + 1, n_steps)
    return x, D


class _Recorder:
    """The recorded series of one run, and the running balance sums ``cum`` (P, 4):
    dE_int, ito_int, G2_int, mart_int, summed in float64 whatever the dtype."""

    def __init__(self, cfg: FlowConfig, x: Tensor) -> None:
        self.cfg = cfg
        self.rec: dict[str, list[Tensor]] = {k: [] for k in ("t", "E", "G2", "cum", "x", "D")}
        self.cum = x.new_zeros(cfg.n_paths, 4, dtype=torch.float64)

    def record(self, t: float, E: Tensor | None, g2: Tensor, finite: bool, cum_now: Tensor,
               x_now: Tensor, D_now: Tensor | None = None) -> None:
        if not finite:
            raise ConfigError(
                f"the flow became non-finite at t={t:.4g}: exp(<x_i, B x_j>) overflows; use "
                "float64, smaller weights or a smaller dt"
            )
        rec = self.rec
        rec["t"].append(torch.tensor(t, dtype=torch.float64))
        rec["E"].append(E if self.cfg.energy else torch.full_like(g2, math.nan))
        rec["G2"].append(g2)
        rec["cum"].append(cum_now.clone())
        if self.cfg.record_trajectory:
            rec["x"].append(x_now.clone())
        if self.cfg.record_weights:
            rec["D"].append(D_now.clone())

    def record_eval(self, t: float, ev: FieldEval, x: Tensor, D: Tensor | None) -> None:
        self.record(t, ev.energy, ev.g2, bool(torch.isfinite(ev.velocity).all()), self.cum, x,
                    D)

    def result(self, x: Tensor, D: Tensor | None, *, config: dict) -> FlowResult:
        rec, energy = self.rec, self.cfg.energy
        cum = torch.stack(rec["cum"], dim=1)  # (P, R, 4)
        E = torch.stack(rec["E"], dim=1)  # (P, R)
        dE_int, ito_int, G2_int, mart_int = cum.unbind(-1)
        if not energy:
            mart_int = torch.full_like(mart_int, math.nan)
        residual = (E - E[:, :1]) - (dE_int + ito_int - G2_int + mart_int)
        return FlowResult(
            t=torch.stack(rec["t"]), E=E, G2=torch.stack(rec["G2"], dim=1), dE_int=dE_int,
            ito_int=ito_int, G2_int=G2_int, mart_int=mart_int, residual=residual,
            energy_defined=energy, x_final=x,
            x=torch.stack(rec["x"], dim=1) if self.cfg.record_trajectory else None,
            weights=D,
            weight_path=torch.stack(rec["D"], dim=1) if self.cfg.record_weights else None,
            config=config,
        )


def _config_dict(cfg: FlowConfig, run: _Run, x: Tensor, D: Tensor | None,
                 graphed: bool) -> dict[str, Any]:
    """The run's settings as recorded in :attr:`FlowResult.config` (JSON-able)."""
    drift = cfg.drift if isinstance(cfg.drift, str) else getattr(cfg.drift, "__name__",
                                                                 "callable")
    schedule = run.schedule
    return dict(
        drift=drift, noise_var=run.noise_var, T=cfg.T, dt=cfg.dt, n_steps=cfg.n_steps,
        n_paths=cfg.n_paths, seed=cfg.seed, integrator=cfg.integrator,
        record_every=cfg.record_every, dtype=str(cfg.dtype).split(".")[-1],
        n_tokens=x.shape[1], d=x.shape[2],
        n_heads=schedule.score.shape[1] if schedule is not None else D.shape[1],
        weights="schedule" if schedule is not None else "sde", cuda_graph=graphed,
    )
