"""The flows suite's claims: opposite claims have disjoint regions; deterministic runs are one
number judged against the claim's stated margin; the paper's "b ≈ 0" is an equivalence."""

from types import SimpleNamespace

import torch

from tokengeo.experiments.stats import NOT_REPRODUCED, REPRODUCED
from tokengeo.experiments.suites import flows


def _settling(tol=0.5):
    return SimpleNamespace(tolerance=tol, verdict="stationary", exponent=-1.0,
                           exponent_split=4, trend=[0.0, 0.0])


def _claims(trend: float, deterministic: bool):
    trends = [torch.tensor([trend, trend]), torch.tensor([trend, trend])]
    return [flows._settling_claim(d, _settling(), trends, [1, 8], deterministic)
            for d in ("ou", "inphase")]


def test_settles_and_never_settles_cannot_both_hold():
    for trend in (-0.6, -0.5, -0.2, 0.0, 0.3, 0.5, 0.7, 2.0):
        settles, never = _claims(trend, deterministic=True)
        both = settles.verdict == REPRODUCED and never.verdict == REPRODUCED
        assert not both, trend
    settles, never = _claims(0.0, deterministic=True)  # a flat G²
    assert settles.verdict == REPRODUCED and never.verdict == NOT_REPRODUCED
    a, b = settles.region, never.region
    assert a.high <= b.low or b.high <= a.low  # disjoint


def test_a_deterministic_run_is_one_number_judged_against_the_margin():
    settles, _ = _claims(0.1, deterministic=True)
    d = settles.to_dict("P")
    assert d["interval"]["method"] == "deterministic" and d["interval"]["values"] == [
        torch.tensor(0.1).item()]
    assert d["interval"]["margin"] == 0.5 and d["margin"] == 0.5


def test_the_in_phase_exponent_claim_states_its_equivalence_margin():
    text, paper, region, kind, effect, proxy = flows.EXPONENT_CLAIMS["inphase"]
    assert effect == 0.0
    est = {"value": 0.0014, "lo": 0.0014, "hi": 0.0014, "n": 1, "exact": True}
    iv = flows._interval(est)
    assert iv.method == "deterministic" and iv.fmt() == "0.0014 (deterministic)"


def test_tautological_slopes_are_verified_and_the_identity_is_tallied():
    claims = flows._theory_claims({"theory": {"dt_heads": [1, 10], "heads": 10}}, {})
    kinds = {c.text: c.kind for c in claims}
    identity = next(k for t, k in kinds.items() if t.startswith("energy–dissipation identity"))
    assert identity == "paper"  # the paper states it: tallied
    slopes = [k for t, k in kinds.items() if "Grönwall" in t or "continuity" in t]
    assert slopes and set(slopes) == {"construction"}  # slopes ≈ 1 hold for any smooth ODE


def _slopes(values, exact=True):
    return [{"h0": h, "h1": h * 2, "slope": v, "lo": v - 0.05, "hi": v + 0.05, "exact": exact}
            for h, v in zip((1, 2, 4, 8), values, strict=False)]


def test_an_exponent_is_quoted_only_where_a_power_law_fits():
    assert flows.power_law_shape(_slopes([-1.0, -0.9, -1.1]), 0.3) is None
    # a step between H = 2 and 8, flat beyond (the per-head drift): no exponent
    shape = flows.power_law_shape(_slopes([-0.1, -3.5, -2.0, -0.2]), 0.3)
    assert shape.startswith("not a power law") and "−" not in shape and "-3.50" in shape
    # stochastic slopes: overlapping intervals within the tolerance still fit
    assert flows.power_law_shape(_slopes([-1.0, -1.5], exact=False), 0.3) is None


def _ou_cell(residuals, g2):
    from tokengeo.experiments.cells import CellResult

    return CellResult("k", {"summary": {"residual_T": residuals, "terms_T": {"G2_int": g2},
                                        "stationarity_T": [0.0]}})


def test_only_the_h1_identity_is_judged_the_signed_residual_beyond_is_reported():
    """Issue 40 items 6 and 11: the H = 1 identity is the tallied claim; the signed residual
    at H > 1 (no identity stated there) is a table and the identity claim's detail, never a
    tallied `paper` row."""
    settings = {"heads": [1, 4], "residual_heads": [1, 2, 10], "residual_tolerance": 0.05}
    results = {"ou-H1": _ou_cell([1e-4, -2e-4], [1.0, 1.0]),
               "ou-H2": _ou_cell([-0.3, -0.1], [1.0, 2.0])}
    new = flows._new_claims({**settings, "control_heads": [1, 4]}, results)
    assert not [c for c in new if "residual" in c.text]
    title, header, rows = flows._residual_table(settings, results)
    assert [r[:2] for r in rows] == [["H=1", "judged (the identity claim)"],
                                     ["H=2", "reported, not judged"],
                                     ["H=10", "cell missing"]]
    assert rows[1][2] == f"{(-0.3 - 0.05) / 2:+.3e}"
    signed = {1: flows._residual_signed(settings, results)[1],
              2: flows._residual_signed(settings, results)[2]}
    claim = flows._balance_claim(signed, 0.05)
    assert claim.kind == "paper" and claim.verdict == REPRODUCED
    assert "H > 1 (not judged" in claim.detail and "-3.00e-01" in claim.detail
