"""The H sweep: the time-averaged strong gradient G² over [T/2, T] against the number of heads.

Massucco et al., arXiv 2605.18870, Sec. 6: with OU weights G² vanishes like O(1/H); with
the oscillating weights of the paper's figures it does not fall with H (b ≈ 0). Per drift:
the authors' three-point linear-space fit of a·H^b and the log-log OLS over every H, the
local slopes d log G²/d log H, and whether one power law fits them at all (a step between
two H is not an exponent).
"""

from __future__ import annotations

import math
from pathlib import Path

from tokengeo.experiments.claims import Claim
from tokengeo.experiments.report import SuiteOutput
from tokengeo.experiments.stats import Interval, Region
from tokengeo.experiments.suites.flows.common import DRIFT_LABEL, SOURCE, mean

EXPONENT_CLAIMS = {  # drift: (text, paper's value, region maker, kind, effect, catalogue id)
    "ou": ("OU weights: time-averaged G² scales like H^b with b ≈ −1", "b ≈ −1 (G² ~ 1/H)",
           lambda tol: Region.around(-1.0, tol), "paper", -1.0, "pde.ou-gradient-vanishes"),
    "inphase": ("in-phase oscillating weights (the paper's figure, commit 496b2f6): G² ~ H^b "
                "with b ≈ 0", "b ≈ 0", lambda tol: Region.around(0.0, tol), "paper", 0.0,
                "pde.oscillating-gradient-persists"),
    "oscillating": ("per-head oscillating weights (the authors' current code, commit "
                    "693474c): G² falls with H, slope < 0", "b ≈ 0 (for the figures' code)",
                    lambda tol: Region.below(-tol), "new", None, None),
}


def power_law_shape(local: list[dict], tol: float) -> str | None:
    """None when one power law G² ~ H^b fits: some b lies within ``tol`` of every local
    slope d log G² / d log H (of its interval, for a stochastic run), i.e.
    ``max(lo) − min(hi) ≤ 2 tol``; else the shape, in words. An exponent is quoted only
    where a power law fits (a step between two H is not an exponent)."""
    if len(local) < 2:
        return None
    lows = [s["slope"] if s["exact"] else s["lo"] for s in local]
    highs = [s["slope"] if s["exact"] else s["hi"] for s in local]
    if max(lows) - min(highs) <= 2 * tol:
        return None
    steep = min(local, key=lambda s: s["slope"])
    flat = max(local, key=lambda s: s["slope"])
    return (f"not a power law in H: the local slope d log G²/d log H runs from "
            f"{steep['slope']:+.2f} (H {steep['h0']}→{steep['h1']}) to {flat['slope']:+.2f} "
            f"(H {flat['h0']}→{flat['h1']}), more than ±{tol:g} apart")


def estimate_interval(est: dict, vals: list[dict]) -> Interval:
    """A :class:`tokengeo.flows.fits.Estimate` (as a dict) of the H sweep ``vals``: one
    ``deterministic`` number for noiseless runs, else its bootstrap interval over paths,
    keeping avg G² of every path at every H, H-major (what the bootstrap resamples)."""
    if est["exact"]:
        return Interval.exact_value(est["value"], "deterministic")
    flat = tuple(g for v in vals for g in v["summary"]["g2_avg"])  # H-major: (H P,)
    return Interval(est["value"], est["lo"], est["hi"], est["n"], 0.0,
                    method="bootstrap over paths", values=flat)


def fits_detail(fits, slope_word: str = "b") -> str:
    local = ", ".join(
        f"{s['h0']}→{s['h1']}: {s['slope']:+.2f}"
        + ("" if s["exact"] else f" [{s['lo']:+.2f}, {s['hi']:+.2f}]") for s in fits.local)
    pl = fits.paper_linear_b_interval
    pb = fits.loglog_b_paper_heads
    return (f"authors' linear-space curve_fit on H={fits.paper_heads}: {slope_word} = "
            f"{fits.paper_linear_b:.3f}"
            + ("" if pl.exact else f" [{pl.lo:.3f}, {pl.hi:.3f}]")
            + f"; log-log OLS on those H: {slope_word} = {pb.value:.3f}; log-log OLS on all H: "
            f"{slope_word} = {fits.loglog_b.value:.3f}. Local slopes d log G²/d log H: "
            f"{local}. Mean avg G² by H: " + ", ".join(
                f"H={h}: {m:.4g}" for h, m in zip(fits.heads, fits.means, strict=True)))


def exponent_claim(drift: str, settings: dict, vals: list[dict]):
    """The exponent (or, where no power law fits, the slope) claim of one drift, and its fits."""
    import numpy as np

    from tokengeo.flows.fits import scaling_fits

    heads = list(settings["heads"])
    paper_heads = list(settings.get("paper_fit_heads", heads))
    text, paper, region, kind, effect, entry = EXPONENT_CLAIMS[drift]
    tol = float(settings["exponent_tolerance"])
    fits = scaling_fits(heads, [np.asarray(v["summary"]["g2_avg"]) for v in vals], paper_heads)
    shape = power_law_shape(fits.local, tol)
    claim = Claim(
        "flows", text, SOURCE, paper, "b of the log-log OLS of avg G² on all H (bootstrap "
        "over paths, values: avg G² per H and path, H-major; exact for deterministic runs)",
        region(tol),
        measured=estimate_interval(fits.to_dict()["loglog_b"], vals), detail=fits_detail(fits),
        kind=kind, paper_effect=effect, margin=tol, catalogue=entry)
    if shape is not None:
        if math.isfinite(region(tol).low) and math.isfinite(region(tol).high):  # b ≈ a value
            claim.untestable = shape  # no exponent to compare with the paper's
        else:  # a direction (G² falls with H): still judged, the shape stated, no "b"
            claim.quantity = ("slope of the log-log OLS of avg G² on all H (not an exponent: "
                              "see the shape in the detail)")
            claim.detail = f"{shape}. {fits_detail(fits, 'slope')}"
    return claim, fits


def tokens_words(vals: list[dict]) -> list[str]:
    from tokengeo.flows.diagnostics import describe_tokens

    words = []
    for v in vals:
        s = v["summary"]
        words.append(f"H={s['n_heads']}: " + describe_tokens(
            s.get("mean_cosine_0", float("nan")), mean(s["mean_cosine_T"]),
            s.get("clusters_0", float("nan")), mean(s["clusters_T"])))
    return words


def drift_rows(drift: str, settings: dict, vals: list[dict], out: SuiteOutput,
               fig_dir: Path) -> None:
    """The exponent claim of one drift, its rows of the runs table, notes and figures."""
    import torch

    from tokengeo.experiments.suites.flows.identity import paths, signed
    from tokengeo.flows.diagnostics import g2_trend

    claim, fits = exponent_claim(drift, settings, vals)
    out.claims.append(claim)
    words = tokens_words(vals)
    out.notes.append(f"{DRIFT_LABEL[drift]}, what the tokens do by T: " + "; ".join(words))
    for v, w in zip(vals, words, strict=True):
        s = v["summary"]
        t, g2 = torch.tensor(v["t"]), torch.tensor(v["G2"])  # (R,), (P, R)
        trend = float(g2_trend(t, g2, float(t[-1]) / 2).mean())
        w2 = f"{mean(s['w2_late']):.3g}" if "w2_late" in s else "—"
        out.tables[0][2].append([
            drift, str(s["n_heads"]), str(len(s["g2_avg"])), f"{s['seconds']:.1f}",
            f"{mean(s['g2_avg']):.4g}", f"{trend:+.2f}", w2,
            f"{max(map(signed, paths(v)), key=abs):+.2e}", f"{mean(s['clusters_T']):.1f}",
            f"{mean(s['mean_cosine_T']):.3f}", w.split(":", 1)[1].split(" (")[0].strip()])
        out.figures += [Path(f) for f in v.get("figures", [])]
    _sweep_figures(drift, vals, fits, out, fig_dir)


RUNS_COLUMNS = ["drift", "H", "paths", "seconds", "mean avg G² [T/2,T]",
                "G² trend (decades)", "W₂(μ_T/2, μ_T)", "residual / ∫G² (largest |·|)",
                "clusters at T", "mean ⟨xi,xj⟩ at T", "tokens"]


def _sweep_figures(drift, vals, fits, out: SuiteOutput, fig_dir: Path) -> None:
    import numpy as np

    from tokengeo.flows.plots import plot_g2_by_heads, plot_sweep_fits

    def g2_plot():
        t = np.asarray(vals[0]["t"])
        series = {v["summary"]["n_heads"]: np.asarray(v["G2"]) for v in vals}
        return plot_g2_by_heads(t, series, fig_dir / f"flows-{drift}-g2-by-H.png",
                                title=f"G²(t), {DRIFT_LABEL[drift]}")

    out.add_figure(g2_plot)
    out.add_figure(plot_sweep_fits, fits, fig_dir / f"flows-{drift}-g2-vs-H.png",
                   title=f"G² against H, {DRIFT_LABEL[drift]}")
