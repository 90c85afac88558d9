"""The H-scaling experiment: time-averaged strong gradient against the number of heads.

arXiv 2605.18870, Sec. 6: for each H, run the preset's Monte Carlo paths, average G^2 over the
second half [T/2, T] of each path, and fit mean_paths(avg G^2) ~ c H^b on a log-log scale
(b ~ -1 reported for Ornstein-Uhlenbeck weights, b ~ 0 for oscillating weights). Every run
also reports its energy balance: the residual at T and its size relative to the terms.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields, replace

import torch

from tokengeo.flows.diagnostics import (
    PowerLawFit,
    count_clusters,
    fit_power_law,
    mean_cosine,
    time_average,
)
from tokengeo.flows.presets import FlowPreset
from tokengeo.flows.simulate import FlowResult, simulate


@dataclass
class HeadRun:
    """Summary of the runs at one H."""

    n_heads: int
    seconds: float
    g2_avg: list[float]  # per path: time average of G^2 over [T/2, T]
    E_T: list[float]
    residual_T: list[float]  # per path: balance residual at T
    relative_residual_T: list[float]  # |residual| / (|dE_int| + ito + G2_int + |mart|) at T
    terms_T: dict[str, list[float]]  # per path: each balance term at T
    clusters_T: list[int]  # clusters at cosine >= cluster_threshold
    mean_cosine_T: list[float]


@dataclass
class ScalingResult:
    preset: dict
    runs: list[HeadRun]
    fit: PowerLawFit | None  # None with fewer than 2 distinct H
    cluster_threshold: float
    total_seconds: float
    results: dict[int, FlowResult] = field(default_factory=dict, repr=False)

    def to_dict(self) -> dict:
        return {
            "preset": self.preset,
            "runs": [asdict(r) for r in self.runs],
            "fit": None if self.fit is None else self.fit.to_dict(),
            "cluster_threshold": self.cluster_threshold,
            "total_seconds": self.total_seconds,
        }


def summarize_run(result: FlowResult, n_heads: int, seconds: float, threshold: float) -> HeadRun:
    """Per-path end-of-run numbers of one :class:`FlowResult`."""
    T = float(result.t[-1])
    terms = {k: getattr(result, k)[:, -1] for k in ("dE_int", "ito_int", "G2_int", "mart_int")}
    scale = sum(v.abs() for v in terms.values())
    residual = result.residual[:, -1]
    return HeadRun(
        n_heads=n_heads,
        seconds=seconds,
        g2_avg=time_average(result.t, result.G2, T / 2).tolist(),
        E_T=result.E[:, -1].tolist(),
        residual_T=residual.tolist(),
        relative_residual_T=(residual.abs() / scale).tolist(),
        terms_T={k: v.tolist() for k, v in terms.items()},
        clusters_T=count_clusters(result.x_final, threshold).tolist(),
        mean_cosine_T=mean_cosine(result.x_final).tolist(),
    )


def on_cpu(result: FlowResult) -> FlowResult:
    """``result`` with every tensor moved to the CPU (a no-op for a CPU run)."""
    moved = {f.name: getattr(result, f.name).cpu() for f in fields(result)
             if isinstance(getattr(result, f.name), torch.Tensor)}
    return replace(result, **moved)


def run_h_scaling(
    preset: FlowPreset,
    heads: tuple[int, ...] | None = None,
    *,
    cluster_threshold: float = 0.99,
    keep_results: bool = False,
    trajectory_for: int | None = None,
    log: Callable[[str], None] | None = None,
    on_run: Callable[[HeadRun], None] | None = None,
    progress: Callable[[int, int], None] | None = None,
    device: str | torch.device = "cpu",
    **config_changes,
) -> ScalingResult:
    """Run ``preset`` for each H in ``heads`` (default: ``preset.scaling_heads``) and fit.

    ``trajectory_for`` records the trajectory of the run with that H (for figures);
    ``keep_results`` keeps every :class:`FlowResult` in ``ScalingResult.results``;
    ``on_run`` is called with each H's summary as soon as it is done; ``progress`` is passed
    to :func:`simulate`; ``device`` is where the runs go (the initial state is drawn on the
    CPU, so every device starts from the same tokens and weights; the kept results come back
    to the CPU); ``config_changes`` change the preset's
    :class:`~tokengeo.flows.simulate.FlowConfig` (e.g. ``chunk_elems``).
    """
    heads = tuple(preset.scaling_heads if heads is None else heads)
    runs, results = [], {}
    start = time.perf_counter()
    for H in heads:
        x0, D0 = (t.to(device) for t in preset.initial_state(H))  # (P, n, d), (P, H, d, d)
        config = preset.flow_config(**config_changes | {"record_trajectory": H == trajectory_for})
        t0 = time.perf_counter()
        result = on_cpu(simulate(x0, D0, config, progress=progress))
        seconds = time.perf_counter() - t0
        runs.append(summarize_run(result, H, seconds, cluster_threshold))
        if keep_results or H == trajectory_for:
            results[H] = result
        if on_run is not None:
            on_run(runs[-1])
        if log is not None:
            log(f"H={H}: {seconds:.1f} s, mean avg G2 = {torch.tensor(runs[-1].g2_avg).mean():.4g}")
    fit = None
    if len(set(heads)) >= 2:
        samples = [torch.tensor(r.g2_avg) for r in runs]
        fit = fit_power_law(list(heads), samples, seed=preset.seed)
    return ScalingResult(
        preset=asdict(preset),
        runs=runs,
        fit=fit,
        cluster_threshold=cluster_threshold,
        total_seconds=time.perf_counter() - start,
        results=results,
    )
