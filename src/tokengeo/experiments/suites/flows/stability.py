"""Stability in the initial tokens (Grönwall) and continuity in the weights' path (the
Γ-convergence setting), one theory cell per drift (flows.theory).

Massucco et al., arXiv 2605.18870, Sec. 4: a Grönwall estimate gives continuous dependence
on the initial data, and the interaction energies Γ-converge under perturbations of the
weights. Slopes ≈ 1 of the largest distance against the perturbation's size hold for any
smooth ODE: these rows are construction checks of the simulator, not reproductions.
"""

from __future__ import annotations

from tokengeo.experiments.cells import CellResult
from tokengeo.experiments.claims import Claim, family
from tokengeo.experiments.stats import Interval, Region
from tokengeo.experiments.suites.flows.common import DRIFT_LABEL, DRIFTS, THEORY_SOURCE


def stability_cell(preset: str, theory: dict, seed: int) -> dict:
    """Grönwall (tokens eps apart) and weight-path shifts (delta) under one weight path."""
    from tokengeo.flows.presets import get_preset
    from tokengeo.flows.theory import gronwall_stability, weight_perturbation

    p = get_preset(preset, n_tokens=theory["n_tokens"], n_paths=1, seed=seed)
    x0, D0 = p.initial_state(theory["heads"])
    kw = dict(drift=p.drift, noise_var=p.noise_var, T=float(theory["T"]),
              dt=float(theory["dt"]), n_directions=theory["directions"], seed=seed,
              record_every=theory["record_every"])
    tokens = gronwall_stability(x0[0], D0[0], eps=list(theory["eps"]), **kw)
    weights = weight_perturbation(x0[0], D0[0], deltas=list(theory["deltas"]), **kw)
    return {"tokens": tokens.to_dict(), "weights": weights.to_dict()}


PARTS = (
    ("tokens", "Grönwall stability: the largest distance over [0, T] between runs from "
     "tokens ε apart is linear in ε", "slope of log max distance against log ε, over "
     "perturbation directions", "pde.input-stability"),
    ("weights", "continuity in the weights' path (the Γ-convergence setting): trajectories "
     "converge at rate δ as the path is shifted by δ", "slope of log max distance against "
     "log δ, over directions", "pde.weight-perturbation"),
)


def _interval(est: dict) -> Interval:
    """A :class:`tokengeo.flows.fits.Estimate` (as a dict) as a t interval over directions,
    with the per-direction slopes it came from."""
    if est["exact"]:
        return Interval.exact_value(est["value"], "deterministic")
    return Interval(est["value"], est["lo"], est["hi"], est["n"], 0.0, method="t",
                    values=tuple(est.get("values", ())))


def stability_claims(settings: dict, results: dict[str, CellResult]) -> list[Claim]:
    """One row per catalogue entry (tokens, weights), its members the drifts: each must hold."""
    return [_part_row(settings["theory"], results, *part) for part in PARTS]


def _part_row(theory: dict, results: dict[str, CellResult], part: str, text: str,
              quantity: str, entry: str) -> Claim:
    members, missing = [], None
    for drift in DRIFTS:
        r = results.get(f"theory-stability-{drift}")
        if r is None or r.value is None:
            missing = missing or ("cell missing" if r is None else r.not_run)
            continue
        members.append(_member(theory, drift, r.value[part], text, quantity))
    row_text = f"{text}, under every weight path"
    if missing or not members:
        return Claim("flows", row_text, THEORY_SOURCE, "continuous dependence (theorem)",
                     quantity, Region.around(1.0, 0.1), kind="construction", catalogue=entry,
                     not_run=missing or "no run")
    row = family("flows", row_text, members, rule="all", kind="construction",
                 catalogue=entry)
    row.detail = "; ".join(f"{m.label}: {m.detail}" for m in members)
    return row


def _member(theory: dict, drift: str, st: dict, text: str, quantity: str) -> Claim:
    claim = Claim("flows", f"{DRIFT_LABEL[drift]}: {text}", THEORY_SOURCE,
                  "continuous dependence (theorem)", quantity, Region.around(1.0, 0.1),
                  kind="construction", label=DRIFT_LABEL[drift])
    claim.measured = _interval(st["slope"] | {"values": st.get("slopes", ())})
    consts = [max(row) for row in st["constant"]]
    gaps = [max(row) for row in st["energy_gap"]]
    claim.detail = (f"H={theory['heads']}; size → largest distance / size (max over "
                    "directions): " + ", ".join(f"{e:g} → {c:.3g}" for e, c in
                                                zip(st["sizes"], consts, strict=True))
                    + "; |E(T) gap|: " + ", ".join(f"{g:.2e}" for g in gaps))
    return claim
