"""Finished cells of the flows suite, made by hand, and the suite's summary of them: what the
tests of tokengeo.experiments.suites.flows judge."""

from __future__ import annotations

from tokengeo.experiments.cells import CellResult
from tokengeo.experiments.suite import SuiteContext
from tokengeo.experiments.suites import flows
from tokengeo.experiments.suites.flows import common, identity

HEADS = [1, 4, 16]
T = [0.0, 1.0, 2.0, 3.0, 4.0]


def flow_value(H: int, g2: float, w2: list[float], cos_T: list[float], stationary: float = 0.05):
    """A finished flow cell's value: G² flat at ``g2`` on every path, the cloud's late W₂
    movement ``w2`` and mean cosine at T per path."""
    P = len(w2)
    w2 = [w * (1 + 0.01 * k) for k, w in enumerate(w2)]  # paths differ a little
    return {"summary": {
        "n_heads": H, "seconds": 1.0, "g2_avg": [g2 * (1 + 0.01 * k) for k in range(P)],
        "E_T": [1.0] * P,
        "residual_T": [0.01] * P, "relative_residual_T": [0.01] * P,
        "terms_T": {"G2_int": [2.0] * P, "dE_int": [0.0] * P, "ito_int": [0.0] * P,
                    "mart_int": [0.0] * P},
        "clusters_T": [1] * P, "mean_cosine_T": cos_T, "mean_cosine_0": 0.0, "clusters_0": 6,
        "t_sampled": [0.0, 4.0], "clusters_t": [[6, 1]] * P,
        "mean_cosine_t": [[0.0, c] for c in cos_T], "w2_late": w2,
        "mean_weights_eig": [-1.0, 2.0],
        "stationarity_T": {"grad_norm2": [0.0] * P, "relative": [stationary] * P,
                           "field_relative": [stationary] * P},
        "stationarity_random": {"grad_norm2": [1.0] * P, "relative": [0.3] * P,
                                "field_relative": [0.3] * P}},
        "t": T, "G2": [[g2] * len(T)] * P, "E_mean": [1.0] * len(T), "figures": []}


def convergence_value(H: int, identity_limit: float, gap: float):
    return {"convergence": {
        "n_heads": H, "drift": "x", "noise_var": 0.0, "dts": [0.04, 0.02, 0.01],
        "terms": {}, "balances": {"identity": [[0.1], [0.05], [identity_limit + 0.025]]},
        "dissipated": [1.0],
        "limits": {"identity": [identity_limit], "chain": [identity_limit - gap],
                   "gap": [gap], "arith": [-0.25], "power": [0.8], "metric": [0.7],
                   "strong": [1.3], "explicit": [-1.2]}}}


def stability_value():
    part = {"sizes": [0.1, 0.01, 0.001], "max_distance": [[1.0]] * 3,
            "constant": [[1.0]] * 3, "energy_gap": [[1e-3]] * 3, "slopes": [0.99, 1.0, 1.01],
            "slope": {"value": 1.0, "lo": 0.98, "hi": 1.02, "n": 3, "exact": False}}
    return {"tokens": part, "weights": part}


def suite_settings(**changes):
    return {"heads": HEADS, "preset": {}, "exponent_tolerance": 0.3,
            "residual_tolerance": 0.05, "control_heads": [16], "residual_heads": [1, 2],
            "theory": {"dt_heads": [1, 4], "heads": 4},
            "long_run": {"T": 8.0, "heads": [4, 16]}} | changes


def suite_results(ou_w2=0.02, inphase_w2=0.6, osc_w2=0.6, long_w2=0.6, osc_cos=0.0, H4_gap=0.17):
    """A run in which OU settles (G² ~ 1/H, still), both oscillating drifts keep moving with
    a flat G², and the H = 4 identity has a kinetic gap."""
    cells = {}
    for H in HEADS:
        cells[f"ou-H{H}"] = flow_value(H, 0.5 / H, [ou_w2] * 3, [0.0] * 3)
        cells[f"inphase-H{H}"] = flow_value(H, 0.4, [inphase_w2], [0.0])
        cells[f"oscillating-H{H}"] = flow_value(H, 0.3, [osc_w2], [osc_cos])
    for H in (4, 16):
        cells[f"long-oscillating-H{H}"] = flow_value(H, 0.3, [long_w2], [0.0])
    cells["ou-H2"] = flow_value(2, 0.25, [ou_w2] * 3, [0.0] * 3)
    cells["attractive-H16"] = flow_value(16, 0.0, [0.0], [0.999])
    cells["ou-quiet-H16"] = flow_value(16, 0.0, [0.0], [0.0], stationary=0.01)
    for drift in common.DRIFTS:  # the static flows at D̄ cluster
        P = 3 if drift == "ou" else 1
        cells[f"static-{drift}-H16"] = {"summary": {
            "mean_cosine_T": [0.99] * P, "clusters_T": [1] * P, "mean_weights_eig": [-2, -1]}}
    for drift in identity.IDENTITY_DRIFTS:
        cells[f"identity-{drift}-H1"] = convergence_value(1, 1e-4, 0.0)
        cells[f"identity-{drift}-H4"] = convergence_value(4, H4_gap, H4_gap)
        cells[f"theory-stability-{drift}"] = stability_value()
    cells["theory-stability-inphase"] = stability_value()
    return {k: CellResult(k, v) for k, v in cells.items()}


def summarise_cells(tmp_path, results, settings=None):
    return flows.summarise(settings or suite_settings(), results,
                           SuiteContext(tmp_path, tmp_path / "figures"))


def tallied_row(out, entry):
    return next(c for c in out.claims if c.catalogue == entry and c.kind in ("paper",
                                                                              "stand-in"))

