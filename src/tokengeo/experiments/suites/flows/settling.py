"""Does the token cloud settle? One definition for every settling claim.

Massucco et al., arXiv 2605.18870, Sec. 6: with OU weights the token cloud relaxes to a
stationary configuration; with non-vanishing oscillating weights it fails to settle and the
gradient does not vanish. tokengeo reads both statements with the same two measurements:

* **moves**: W_2(mu_{T/2}, mu_T) at the largest H, the Wasserstein distance the cloud still
  travels over the second half of the run (flows.transport). Above ``MOVING_W2`` it still
  moves (never settles); below, it has settled. One threshold for both claims, with one
  margin, so no measurement can pass both.
* **level**: the slope b of the log-log OLS of the time-averaged G² over [T/2, T] against
  H. "The gradient does not vanish" reads b > −tol (more heads do not bring G² down);
  "it vanishes with H" reads b < −tol.

"Never settles" holds for a drift when both hold (the cloud moves, and G²'s level does not
fall with H); the paper's claim is judged over every oscillating reading the run has (the
figures' in-phase drift, the authors' current per-head drift, and its long run), all of
which must hold. "Settles" (OU) needs the cloud to stop moving and G² to fall with H.
"""

from __future__ import annotations

from tokengeo.experiments.cells import CellResult
from tokengeo.experiments.claims import Claim, family
from tokengeo.experiments.stats import Interval, Region
from tokengeo.experiments.suites.flows.common import (
    DRIFT_LABEL,
    MOVING_MARGIN,
    MOVING_W2,
    SOURCE,
    finished,
    mean,
    per_path,
)


def level_slope(heads: list[int], vals: list[dict]) -> Interval:
    """b of log(mean avg G² over [T/2, T]) = log c + b log H over every H (exact for
    deterministic runs, else bootstrap over paths; flows.fits.scaling_fits)."""
    import numpy as np

    from tokengeo.experiments.suites.flows.scaling import estimate_interval
    from tokengeo.flows.fits import scaling_fits

    fits = scaling_fits(heads, [np.asarray(v["summary"]["g2_avg"]) for v in vals], heads)
    return estimate_interval(fits.to_dict()["loglog_b"], vals)


def _moves(name: str, label: str, s: dict, H: int, settled: bool) -> Claim:
    region = (Region.below(MOVING_W2, MOVING_MARGIN) if settled
              else Region.above(MOVING_W2, MOVING_MARGIN))
    member = Claim("flows", f"{label}: the cloud {'stops moving' if settled else 'still moves'}"
                   " over [T/2, T]", SOURCE, "qualitative (Fig. 3–4)",
                   f"W₂(μ_T/2, μ_T) (radians), H={H}", region, label=f"{name}: moves",
                   measured=per_path(s["w2_late"]))
    member.detail = f"W₂ per path: {', '.join(f'{w:.3g}' for w in s['w2_late'])}"
    return member


def _level(name: str, label: str, heads: list[int], vals: list[dict], tol: float,
           settled: bool) -> Claim:
    region = Region.below(-tol) if settled else Region.above(-tol)
    member = Claim("flows", f"{label}: the level of G² {'falls' if settled else 'does not fall'}"
                   " with H", SOURCE, "qualitative (Fig. 3–4)",
                   f"slope of log avg G² [T/2, T] against log H, H in {heads}", region,
                   label=f"{name}: level", measured=level_slope(heads, vals))
    member.detail = "mean avg G² by H: " + ", ".join(
        f"H={h}: {mean(v['summary']['g2_avg']):.3g}" for h, v in zip(heads, vals, strict=True))
    return member


def readings(name: str, label: str, heads: list[int], results: dict[str, CellResult],
             prefix: str, tol: float, settled: bool) -> list[Claim] | str:
    """The two members (moves, level) of one drift's run (moves only at a single H), or why
    they are missing."""
    vals = []
    for H in heads:
        r = results.get(f"{prefix}-H{H}")
        if r is None or r.value is None:
            return "cell missing" if r is None else r.not_run
        vals.append(r.value)
    s, missing = finished(results, f"{prefix}-H{max(heads)}", needs="w2_late")
    if s is None:
        return missing
    moves = _moves(name, label, s, max(heads), settled)
    if len(heads) < 2:  # one H (a long run at one H): no level to compare across H
        return [moves]
    return [moves, _level(name, label, heads, vals, tol, settled)]


def never_settles_claim(settings: dict, results: dict[str, CellResult]) -> Claim:
    """The paper's claim for oscillating weights, one tallied row: every oscillating reading
    (in-phase, per-head, the per-head long run) moves and keeps its G² level."""
    tol = float(settings["exponent_tolerance"])
    heads = list(settings["heads"])
    plan = [("inphase", DRIFT_LABEL["inphase"], heads, "inphase"),
            ("oscillating", DRIFT_LABEL["oscillating"], heads, "oscillating")]
    long = settings.get("long_run")
    if long:
        plan.append(("long", f"{DRIFT_LABEL['oscillating']}, run to T = {long['T']:g}",
                     list(long["heads"]), "long-oscillating"))
    return _family(plan, results, tol, settled=False, catalogue="pde.never-settles",
                   text="oscillating weights: the token cloud never settles (it still moves "
                        "in W₂ over [T/2, T] and its G² level does not fall with H)",
                   kind="paper")


def settles_claim(settings: dict, results: dict[str, CellResult]) -> Claim:
    """OU weights: the cloud stops moving and G² falls with H (the disjoint reading)."""
    tol = float(settings["exponent_tolerance"])
    plan = [("ou", DRIFT_LABEL["ou"], list(settings["heads"]), "ou")]
    return _family(plan, results, tol, settled=True, catalogue="pde.ou-relaxes",
                   text="OU weights: the token cloud settles (it stops moving in W₂ over "
                        "[T/2, T] and its G² level falls with H)", kind="paper")


def _family(plan: list, results: dict[str, CellResult], tol: float, *, settled: bool,
            catalogue: str, text: str, kind: str) -> Claim:
    members, missing = [], None
    for name, label, heads, prefix in plan:
        got = readings(name, label, heads, results, prefix, tol, settled)
        if isinstance(got, str):
            missing = missing or got
            continue
        members += got
    rule = (f"moves: W₂(μ_T/2, μ_T) {'<' if settled else '>'} {MOVING_W2:g} rad (margin "
            f"{MOVING_MARGIN:g}); level: b {'<' if settled else '>'} −{tol:g}")
    if not members or missing:
        claim = Claim("flows", text, SOURCE, "qualitative (Fig. 3–4)", rule,
                      Region.above(MOVING_W2, MOVING_MARGIN), kind=kind, catalogue=catalogue,
                      not_run=missing or "no run")
        return claim
    row = family("flows", text, members, rule="all", kind=kind, catalogue=catalogue,
                 quantity=rule, paper_value="qualitative (Fig. 3–4)")
    row.detail = "; ".join(f"{m.label}: {m.measured.mean:+.3g} ({m.detail})" for m in members)
    return row
