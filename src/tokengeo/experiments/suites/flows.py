"""Suite ``flows``: Massucco et al. (arXiv 2605.18870), Sec. 6, tokens on S².

One cell per (weight drift, number of heads H): Monte Carlo paths of the token SDE/ODE with
the preset's settings, reduced to the time-averaged strong gradient G² over [T/2, T], the
energy-balance residual and clustering at T. The H-exponent b of avg G² ~ c H^b is fitted per
drift with a bootstrap interval over paths.
"""

from __future__ import annotations

from pathlib import Path

import torch

from tokengeo.experiments.cells import Cell, CellResult, draw_figures, figure_notes
from tokengeo.experiments.claims import Claim
from tokengeo.experiments.report import SuiteOutput
from tokengeo.experiments.settings import Setting
from tokengeo.experiments.stats import Interval, Region, mean_interval

SETTINGS = {  # suites/flows.toml: [common] + [quick] or [full]
    "exponent_tolerance": Setting("number"),
    "residual_tolerance": Setting("number"),
    "heads": Setting("int_list", lo=1),
    "figure_heads": Setting("int", required=False, lo=1),
    "preset": Setting("table", check=lambda table, where: _check_preset(table, where)),
}


def _check_preset(table: dict, where: str) -> None:
    """Every drift's preset with these fields, at the largest H (sizes, steps, memory)."""
    from tokengeo.errors import ConfigError
    from tokengeo.flows.presets import get_preset

    for preset in DRIFTS.values():
        try:
            get_preset(preset, **table)
        except ConfigError as exc:
            raise ConfigError(f"{where}: {exc}") from None

TITLE = "Transformer PDE: multi-head attention as a time-dependent Wasserstein gradient flow"
PAPER = ("Massucco, Del Grande, Carioni, Brune, Schönlieb, \"Multi-Headed Transformer "
         "Architectures as Time-dependent Wasserstein Gradient Flows\", arXiv 2605.18870")
SOURCE = "Massucco et al. 2026, Sec. 6 (S² experiment)"
DRIFTS = {"ou": "s2-ou", "oscillating": "s2-oscillating"}


def flow_cell(preset: str, n_heads: int, overrides: dict, figure_dir: str | None) -> dict:
    """Run one (preset, H) and return its per-path summary and G² series."""
    import time

    from tokengeo.flows.presets import get_preset
    from tokengeo.flows.scaling import summarize_run
    from tokengeo.flows.simulate import simulate

    p = get_preset(preset, **overrides)
    x0, D0 = p.initial_state(n_heads)
    t0 = time.perf_counter()
    res = simulate(x0, D0, record_trajectory=figure_dir is not None, **p.simulate_kwargs())
    seconds = time.perf_counter() - t0
    run = summarize_run(res, n_heads, seconds, threshold=0.99)
    out = {"summary": run.__dict__, "t": res.t.tolist(), "G2": res.G2.tolist(),
           "E_mean": res.mean("E").tolist(), "figures": []}
    if figure_dir is not None:
        draw_figures(out, lambda: _figures(res, preset, n_heads, Path(figure_dir)))
    return out


def _figures(res, preset: str, n_heads: int, folder: Path) -> list[str]:
    from tokengeo.flows.plots import plot_balance, plot_snapshots

    folder.mkdir(parents=True, exist_ok=True)
    snap = folder / f"{preset}-H{n_heads}-sphere.png"
    bal = folder / f"{preset}-H{n_heads}-balance.png"
    plot_snapshots(res, snap)
    plot_balance(res, bal)
    return [str(snap), str(bal)]


def cells(settings: dict) -> list[Cell]:
    overrides = dict(settings["preset"])
    fig_h = settings.get("figure_heads")
    out = []
    for drift, preset in DRIFTS.items():
        for H in settings["heads"]:
            fig_dir = settings.get("_figure_dir") if H == fig_h else None
            out.append(Cell("flows", f"{drift}-H{H}", flow_cell,
                            {"preset": preset, "n_heads": H, "overrides": overrides,
                             "figure_dir": fig_dir}, label=f"{drift} weights, H={H}"))
    return out


def _settling_ratio(value: dict) -> list[float]:
    """Per path: mean G² over the last 10% of time / mean G² over the first 10%."""
    t, g2 = torch.tensor(value["t"]), torch.tensor(value["G2"])  # (R,), (P, R)
    T = float(t[-1])
    early, late = t <= 0.1 * T, t >= 0.9 * T
    return (g2[:, late].mean(1) / g2[:, early].mean(1)).tolist()


def summarise(settings: dict, results: dict[str, CellResult], fig_dir: Path) -> SuiteOutput:
    from tokengeo.flows.diagnostics import fit_power_law

    heads = list(settings["heads"])
    claims, rows, figures = [], [], []
    expected = {"ou": (-1.0, "b ≈ −1 (G² ~ 1/H)"), "oscillating": (0.0, "b ≈ 0")}
    tol = float(settings["exponent_tolerance"])
    residuals: list[float] = []
    for drift in DRIFTS:
        res = [results[f"{drift}-H{H}"] for H in heads]
        missing = next((r.not_run for r in res if r.value is None), None)
        target, paper = expected[drift]
        claim = Claim("flows", f"{drift} weights: time-averaged G² scales like H^b",
                      SOURCE, paper, "the fitted exponent b (bootstrap over paths)",
                      Region.around(target, tol))
        if missing:
            claim.not_run = missing
            claims.append(claim)
            continue
        vals = [r.value for r in res]
        fit = fit_power_law(heads, [torch.tensor(v["summary"]["g2_avg"]) for v in vals])
        claim.measured = Interval(fit.exponent, fit.ci_low, fit.ci_high,
                                  len(vals[0]["summary"]["g2_avg"]), 0.0)
        claim.detail = "mean avg G² by H: " + ", ".join(
            f"H={h}: {m:.4g}" for h, m in zip(heads, fit.mean, strict=True))
        claims.append(claim)
        settle = [x for v in vals for x in _settling_ratio(v)]
        region = Region.below(0.1) if drift == "ou" else Region.above(0.1)
        claims.append(Claim(
            "flows", f"{drift} weights: the token cloud "
            + ("settles to a stationary configuration" if drift == "ou" else "never settles"),
            SOURCE, "qualitative (Fig. 3–4)", "late/early mean G² (last vs first 10% of time)",
            region, measured=mean_interval(settle)))
        for v in vals:
            s = v["summary"]
            residuals += s["relative_residual_T"]
            rows.append([drift, str(s["n_heads"]), f"{s['seconds']:.1f}",
                         f"{sum(s['g2_avg']) / len(s['g2_avg']):.4g}",
                         f"{max(map(abs, s['relative_residual_T'])):.2e}",
                         f"{sum(s['clusters_T']) / len(s['clusters_T']):.1f}",
                         f"{sum(s['mean_cosine_T']) / len(s['mean_cosine_T']):.3f}"])
            figures += [Path(f) for f in v.get("figures", [])]
    if residuals:
        claims.append(Claim(
            "flows", "the energy-dissipation balance closes in every run", SOURCE,
            "closes (Eq. 5 / EDI)", "|residual| / sum of |terms| at T, all runs and paths",
            Region.below(float(settings["residual_tolerance"])),
            measured=mean_interval(residuals),
            detail=f"largest relative residual {max(residuals):.2e}"))
    table = ("runs", ["drift", "H", "seconds", "mean avg G² [T/2,T]", "max rel. residual",
                      "clusters at T", "mean ⟨xi,xj⟩ at T"], rows)
    notes = [f"Settings: {settings['preset']}, H in {heads}. Residual: Euler left-point sums "
             "of the discrete balance; for H > 1 it measures how far the multi-head flow is "
             "from the single-energy identity, as the paper reports it.",
             *figure_notes(results)]
    return SuiteOutput("flows", TITLE, PAPER, claims, figures, [table], notes)
