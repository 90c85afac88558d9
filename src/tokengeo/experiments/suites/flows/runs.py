"""The flow cells: one (preset, H) run reduced to what the claims read, and the static flow
at a drift's own time-averaged weights (the clustering control)."""

from __future__ import annotations

import time
from pathlib import Path

import torch

from tokengeo.experiments.cells import draw_figures
from tokengeo.experiments.suites.flows.common import deterministic


def flow_cell(preset: str, n_heads: int, overrides: dict, figure_dir: str | None) -> dict:
    """Run one (preset, H) and return its per-path summary and G² series."""
    from tokengeo.flows.diagnostics import CLUSTER_COSINE, count_clusters, mean_cosine
    from tokengeo.flows.presets import get_preset
    from tokengeo.flows.scaling import summarize_run
    from tokengeo.flows.simulate import simulate

    p = get_preset(preset, **overrides)
    if deterministic(p):
        p = get_preset(preset, **(overrides | {"n_paths": 1}))
    x0, D0 = p.initial_state(n_heads)
    t0 = time.perf_counter()
    res = simulate(x0, D0, p.flow_config(record_trajectory=True, record_weights=True))
    seconds = time.perf_counter() - t0
    run = summarize_run(res, n_heads, seconds, threshold=CLUSTER_COSINE)
    summary = run.__dict__ | {"mean_cosine_0": float(mean_cosine(x0[0])),
                              "clusters_0": int(count_clusters(x0[0], CLUSTER_COSINE))}
    summary |= late_state(res, p)
    out = {"summary": summary, "t": res.t.tolist(), "G2": res.G2.tolist(),
           "E_mean": res.mean("E").tolist(), "figures": []}
    if figure_dir is not None:
        draw_figures(out, lambda: _figures(res, preset, n_heads, Path(figure_dir)))
    return out


def late_state(res, preset) -> dict:
    """Clusters and mean <x_i, x_j> over time (11 records), how far the cloud still moves
    over [T/2, T] (W_2(mu_{T/2}, mu_T), flows.transport), the spectrum of the time-averaged
    weights D̄ over [T/2, T], and how far the tokens at T (and uniform random tokens, a
    baseline) are from a stationary point of E(x; D̄) (flows.diagnostics)."""
    from tokengeo.flows.diagnostics import (
        CLUSTER_COSINE,
        clusters_over_time,
        energy_stationarity,
        time_averaged_weights,
    )
    from tokengeo.flows.presets import initial_tokens
    from tokengeo.flows.transport import late_movement

    index, clusters, cosine = clusters_over_time(res.x, CLUSTER_COSINE)
    T = float(res.t[-1])
    D_bar = time_averaged_weights(res.t, res.weight_path, T / 2)  # (P, H, d, d)
    eig = torch.linalg.eigvalsh(D_bar)  # (P, H, d)
    P, n, d = res.x_final.shape
    gen = torch.Generator().manual_seed(preset.seed)
    uniform = initial_tokens("uniform", n, d, 0.0, gen, dtype=res.x_final.dtype)
    return {"t_sampled": res.t[index].tolist(), "clusters_t": clusters.tolist(),
            "mean_cosine_t": cosine.tolist(), "w2_late": late_movement(res.t, res.x),
            "mean_weights_eig": [float(eig.min()), float(eig.max())],
            "stationarity_T": energy_stationarity(res.x_final, D_bar).to_dict(),
            "stationarity_random": energy_stationarity(uniform.expand(P, n, d),
                                                       D_bar).to_dict()}


def _figures(res, preset: str, n_heads: int, folder: Path) -> list[str]:
    from tokengeo.flows.plots import plot_balance, plot_series, plot_snapshots

    folder.mkdir(parents=True, exist_ok=True)
    snap = folder / f"{preset}-H{n_heads}-sphere.png"
    bal = folder / f"{preset}-H{n_heads}-balance.png"
    energy = folder / f"{preset}-H{n_heads}-energy.png"
    plot_snapshots(res, snap)
    plot_balance(res, bal)
    plot_series(res, "E", energy)
    return [str(snap), str(bal), str(energy)]


def weight_records(preset, n_heads: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The weight path D(t) that :func:`flow_cell`'s run of ``preset`` sees, at its record
    times: (t (R,), D (P, R, H, d, d)). The weights do not depend on the tokens, so the same
    Euler steps and the same noise draws (``flow_config().seed``, one draw per step, as
    :func:`tokengeo.flows.simulate.simulate` makes them on the CPU) give the same path."""
    import math

    from tokengeo.flows.weights import resolve_drift, symmetric_increment

    cfg = preset.flow_config()
    _, D = preset.initial_state(n_heads)
    f, gen, sigma = resolve_drift(cfg.drift), torch.Generator().manual_seed(cfg.seed), \
        math.sqrt(cfg.noise_var)
    times, path = [], []
    for k in range(cfg.n_steps):
        if k % cfg.record_every == 0:
            times.append(k * cfg.dt)
            path.append(D.clone())
        step = D + f(D, k * cfg.dt) * cfg.dt
        if cfg.noise_var > 0:
            step = step + sigma * symmetric_increment(D.shape, cfg.dt, gen, dtype=D.dtype)
        D = step
    times.append(cfg.n_steps * cfg.dt)
    path.append(D)
    return torch.tensor(times, dtype=torch.float64), torch.stack(path, dim=1)


def static_mean_cell(preset: str, n_heads: int, overrides: dict) -> dict:
    """The static control of a drift: the tokens under frozen weights D̄, each path's own
    time average of the drift's weights over [T/2, T] (:func:`weight_records`), from the
    same initial tokens, to the same T. Returns the mean <x_i, x_j> and clusters at T per
    path, and D̄'s spectrum."""
    from tokengeo.flows.diagnostics import (
        CLUSTER_COSINE,
        count_clusters,
        mean_cosine,
        time_averaged_weights,
    )
    from tokengeo.flows.presets import get_preset
    from tokengeo.flows.simulate import FlowConfig, simulate

    p = get_preset(preset, **overrides)
    if deterministic(p):
        p = get_preset(preset, **(overrides | {"n_paths": 1}))
    t, path = weight_records(p, n_heads)
    D_bar = time_averaged_weights(t, path, p.T / 2)  # (P, H, d, d)
    D_bar = (D_bar + D_bar.mT) / 2
    x0, _ = p.initial_state(n_heads)
    res = simulate(x0, D_bar, FlowConfig(drift="frozen", noise_var=0.0, T=p.T, dt=p.dt,
                                         n_paths=p.n_paths, record_every=p.record_every))
    eig = torch.linalg.eigvalsh(D_bar)
    return {"summary": {"mean_cosine_T": mean_cosine(res.x_final).tolist(),
                        "clusters_T": count_clusters(res.x_final, CLUSTER_COSINE).tolist(),
                        "mean_weights_eig": [float(eig.min()), float(eig.max())]}}
