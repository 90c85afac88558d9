"""laplacian-mechanism: the line angle of (a, b), the claims from fake cell results with
known answers, the settings it refuses, and its cell keeping fixed (a, b) fixed."""

from __future__ import annotations

import math

import pytest
from helpers.claim_tree import every_claim

from tokengeo.errors import ConfigError
from tokengeo.experiments.cells import CellResult
from tokengeo.experiments.suite import SuiteContext
from tokengeo.experiments.suites import laplacian_mechanism as mech

LAYERS, HEADS, K = 2, 4, 2
SEEDS = [0, 1, 2, 3]
SETTINGS = {"seeds": SEEDS, "k": K, "path_points": 5, "geometry_examples": 10,
            "train": {"model": "vit-tiny", "data": "digits", "weight_decay": 0.0,
                      "model_overrides": {"n_layers": LAYERS}}}


@pytest.mark.parametrize("ab,psi", [((0, 1), 90), ((1, -1), 135), ((1, 1), 45), ((1, 0), 0),
                                    ((-1, 1), 135), ((3, -3), 135), ((0, -2), 90),
                                    ((0.25, 0.5), math.degrees(math.atan2(2, 1)))])
def test_line_angle_ignores_scale_and_sign(ab, psi):
    assert mech.line_angle(*ab) == pytest.approx(psi)


def test_line_distance_wraps_at_180():
    assert mech.line_distance(175.0, 5.0) == pytest.approx(10.0)
    assert mech.line_distance(45.0, 135.0) == pytest.approx(90.0)


def test_the_variants_and_their_coefficients():
    ab = mech.coefficients(SETTINGS)
    # t = 0.5 is (0.5, 0): 0.5 V mixes no tokens, so the path skips it
    assert ab == {"learned": None, "t=0": (0.0, 1.0), "t=0.25": (0.25, 0.5),
                  "t=0.75": (0.75, -0.5), "t=1": (1.0, -1.0), "V+PV": (1.0, 1.0)}
    assert mech.path_ts({"path_points": 4}) == pytest.approx([0, 1 / 3, 2 / 3, 1])
    cfg = mech.sweep(SETTINGS).config("t=0.25", 3)
    assert cfg["n_laplacian"] == K and cfg["head_kind"] == "mixed" and cfg["seed"] == 3
    assert cfg["model_overrides"] == {"n_layers": LAYERS, "mixed_init": "attention"}


def _value(seed: int, within_last: float, acc: float, ab) -> dict:
    """A cell's value: shares at depths 0..LAYERS, the last heads at ``ab``."""
    within = [0.9 - 0.01 * d for d in range(LAYERS)] + [within_last]
    row = [[0.0, 1.0]] * (HEADS - K) + [list(ab)] * K
    return {"final": {"test": {"accuracy": acc}}, "parameters": {}, "wall_time_s": 1.0,
            "step": 10, "layers": {"within_sequence_share": within,
                                   "between_class_share": [0.05] * (LAYERS + 1)},
            "coefficients": [row] * LAYERS,
            "smoothing": [{"layer": layer, "head": h, "kind": "attention" if h < HEADS - K
                           else "mixed", "variance_derivative": -ab[0] + 0.01 * seed,
                           "rayleigh": 0.0} for layer in range(LAYERS) for h in range(HEADS)]}


def _results(learned_ab, control_within: float, slope: float) -> dict[str, CellResult]:
    """Path cells whose last-depth share is 0.8 + slope·t (+ seed noise); accuracy rises."""
    out = {}
    sweep = mech.sweep(SETTINGS)
    for s in SEEDS:
        noise = 0.002 * ((s * 7) % 3 - 1)
        cells = {mech.LEARNED: _value(s, 0.8, 0.9, (learned_ab[0] + noise, learned_ab[1])),
                 mech.CONTROL: _value(s, control_within + 3 * noise, 0.9, (1.0, 1.0))}
        for t in mech.path_ts(SETTINGS):
            seed_slope = slope * (1 + 0.1 * (s - 1.5))  # seeds differ: a finite interval
            cells[mech.path_label(t)] = _value(s, 0.8 + seed_slope * t + noise,
                                               0.85 + 0.05 * t * (1 + 0.1 * s), (t, 1 - 2 * t))
        for label, value in cells.items():
            key = sweep.key(label, s)
            out[key] = CellResult(key, value)
    return out


def _claims(tmp_path, results) -> dict[str, object]:
    ctx = SuiteContext(tmp_path, tmp_path / "figures")
    out = mech.summarise(SETTINGS, results, ctx)
    return every_claim(out.claims), out


def test_claims_read_the_known_answers(tmp_path):
    claims, out = _claims(tmp_path, _results((-0.4, 0.8), 0.9, -0.2))
    turn = next(c for t, c in claims.items() if t.startswith("mixed heads started"))
    assert turn.verdict == "reproduced"  # (−0.4, 0.8): ψ ≈ 116.6° > 90°
    assert turn.measured.mean == pytest.approx(math.degrees(math.atan2(0.8, -0.4)) - 90,
                                               abs=0.5)
    nearer = next(c for t, c in claims.items() if t.startswith("learned mixed heads end"))
    assert nearer.verdict == "reproduced"  # 26.6° from attention, 18.4° from the Laplacian
    trend = next(c for t, c in claims.items() if t.startswith("within-sequence variance share of the last"))
    assert trend.verdict == "reproduced" and trend.measured.mean == pytest.approx(-0.2)
    assert "per t" in trend.detail and "t = 0, 0.25, 0.75, 1" in trend.quantity
    every_depth = next(c for t, c in claims.items() if t.startswith("within-sequence share"))
    # depths 1..L−1: the last layer is the first reading, not repeated in the family
    assert [m.label for m in every_depth.members] == [f"depth {d}" for d in range(1, LAYERS)]
    assert every_depth.members[0].verdict == "no change"  # depth 1 is flat here
    # one row for the finding: the last layer's trend and every earlier depth, its readings
    rows = [c for c in out.claims if "within-sequence" in c.text and "path" in c.text]
    assert len(rows) == 1 and [m.label for m in rows[0].members] == ["last layer",
                                                                      "every earlier block"]
    assert rows[0].members == [trend, every_depth] and rows[0].verdict == "reproduced"
    acc = next(c for t, c in claims.items() if t.startswith("test accuracy rises"))
    assert acc.verdict == "reproduced"
    needs = next(c for t, c in claims.items() if t.startswith("the smoothing needs"))
    assert needs.verdict == "reproduced"  # Laplacian 0.6 < control 0.9
    control = next(c for t, c in claims.items() if t.startswith("adding V back alone"))
    assert control.verdict == "not reproduced"  # control 0.9 > attention 0.8
    assert {c.kind for c in claims.values()} == {"new"}  # the paper's claims: other suites
    assert len(out.tables) == 3 and len(out.figures) == 3, out.notes


def test_claims_say_no_when_heads_turn_the_other_way(tmp_path):
    claims, _ = _claims(tmp_path, _results((0.4, 0.8), 0.5, 0.2))
    turn = next(c for t, c in claims.items() if t.startswith("mixed heads started"))
    assert turn.verdict == "not reproduced"  # (0.4, 0.8): towards V + P V (45°)
    trend = next(c for t, c in claims.items() if t.startswith("within-sequence variance share of the last"))
    assert trend.verdict == "not reproduced"
    needs = next(c for t, c in claims.items() if t.startswith("the smoothing needs"))
    assert needs.verdict == "not reproduced"  # Laplacian 1.0 > control 0.5


def test_a_missing_cell_leaves_every_claim_not_run(tmp_path):
    results = _results((-0.4, 0.8), 0.9, -0.2)
    del results["t=0.75-s1"]
    claims, out = _claims(tmp_path, results)
    for c in claims.values():
        members = c.members or [c]
        assert all(m.verdict.startswith("not run") for m in members), c.text
    assert not out.figures and not out.tables


# ---- settings -------------------------------------------------------------------------


def _check_schema(settings):
    from pathlib import Path

    from tokengeo.experiments.settings import check_settings

    check_settings(mech.NAME, Path("x.toml"), settings, mech.SUITE.schema)


@pytest.mark.parametrize("change,message", [
    ({"weight_decay": 0.05}, r"weight_decay = 0.05 must be 0"),
    ({"n_laplacian": 2}, r"\['n_laplacian'\] are set by the suite"),
    ({"model_overrides": {"mixed_init": "laplacian"}},
     r"\['model_overrides.mixed_init'\] are set by the suite"),
    ({"steps": -1}, r"steps"),
])
def test_bad_train_tables_are_refused(change, message):
    train = {**SETTINGS["train"], **change}
    with pytest.raises(ConfigError, match=message):
        _check_schema({**SETTINGS, "train": train})


def test_weight_decay_must_be_set_to_zero_explicitly():
    train = {k: v for k, v in SETTINGS["train"].items() if k != "weight_decay"}
    with pytest.raises(ConfigError, match=r"weight_decay = 0.05 \(default\) must be 0"):
        _check_schema({**SETTINGS, "train": train})


@pytest.mark.parametrize("name,value,message", [
    ("path_points", 3, r"path_points = 3 must be a whole number >= 4"),
    ("k", 0, r"k = 0 must be a whole number >= 1"),
])
def test_bad_numbers_are_refused(name, value, message):
    with pytest.raises(ConfigError, match=message):
        _check_schema({**SETTINGS, name: value})


def test_k_beyond_the_heads_is_refused_before_any_cell(tmp_path):
    from tokengeo.experiments.reproduce import ReproduceConfig, reproduce

    text = mech_toml_of(SETTINGS).replace("k = 2", "k = 5")
    (tmp_path / "laplacian-mechanism.toml").write_text(text)
    cfg = ReproduceConfig(out=tmp_path / "out", only=(mech.NAME,), config_dir=tmp_path)
    with pytest.raises(ConfigError, match=r"k = 5 but model 'vit-tiny' has 4 heads"):
        reproduce(cfg, log=lambda m: None)
    assert not (tmp_path / "out").exists()


def mech_toml_of(settings: dict) -> str:
    t = settings["train"]
    return ("[quick]\nseeds = [0, 1]\nk = 2\npath_points = 4\ngeometry_examples = 4\n"
            f'train = {{ model = "{t["model"]}", data = "{t["data"]}", steps = 1, '
            "batch_size = 4, weight_decay = 0.0, model_overrides = { n_layers = 1 } }\n")


# ---- the cell ---------------------------------------------------------------------------


@pytest.mark.slow  # trains two small ViTs
def test_the_cell_keeps_fixed_heads_fixed_and_lets_learned_ones_move(tmp_path):
    cfg = {"model": "vit-tiny", "data": "digits", "steps": 3, "batch_size": 8, "warmup": 1,
           "lr": 1e-2, "weight_decay": 0.0, "eval_every": 0, "final_eval_batches": 1,
           "n_laplacian": K, "head_kind": "mixed", "seed": 0,
           "model_overrides": {"n_layers": 2, "d_model": 16, "patch_size": 4,
                               "mixed_init": "attention"}}
    fixed = mech.mechanism_cell(str(tmp_path / "fixed"), cfg, [0.25, 0.5], 8)
    learned = mech.mechanism_cell(str(tmp_path / "learned"), cfg, None, 8)
    for row in fixed["coefficients"]:
        assert row == [[0.0, 1.0]] * (HEADS - K) + [[0.25, 0.5]] * K
    moved = [ab for row in learned["coefficients"] for ab in row[HEADS - K:]]
    assert all(ab != [0.0, 1.0] for ab in moved)
    for value in (fixed, learned):
        shares = value["layers"]["within_sequence_share"]
        assert len(shares) == 3 and all(0 < s < 1 for s in shares)


def test_smoothing_table_reads_the_chosen_heads_of_every_block(tmp_path):
    _, out = _claims(tmp_path, _results((1.0, -1.0), 0.8, -0.1))
    title, header, rows = next(t for t in out.tables if t[0].startswith("smoothing sign"))
    assert header == ["variant", "block 1", "block 2"]
    by_label = {r[0]: r for r in rows}
    # the fake chosen heads write −a + 0.01 seed: at t = 1 (a = 1), −1 + 0.015 on average
    assert by_label["t=1"][1].startswith("-0.985")
    assert by_label["t=0"][2].startswith("0.015")


def test_smoothing_claim_judges_the_laplacian_heads_against_attention_ones(tmp_path):
    claims, _ = _claims(tmp_path, _results((1.0, -1.0), 0.8, -0.1))
    lap = claims["t=1: trained Laplacian heads (1, −1) smooth the residual stream (the "
                 "within-sequence variance falls along their output), every block"]
    # the fake chosen heads write −a + 0.01 seed: at t = 1, −0.985 on average in every block
    assert lap.rule_of_family == "all" and len(lap.members) == LAYERS
    # the paper's smoothing claim is tallied in laplacian-images: a new question here
    assert lap.kind == "new" and lap.catalogue is None and lap.verdict == "reproduced"
    assert [m.measured.mean for m in lap.members] == pytest.approx([-0.985] * LAYERS)
    control = next(c for t, c in claims.items() if t.startswith("control, t=0: the same"))
    assert control.kind == "new" and control.verdict != "reproduced"  # +0.015: no smoothing
    assert control.members[0].measured.mean == pytest.approx(0.015)


def test_smoothing_claim_says_no_when_the_laplacian_heads_sharpen(tmp_path):
    results = _results((1.0, -1.0), 0.8, -0.1)
    for key, cell in results.items():
        if key.startswith("t=1-"):
            for row in cell.value["smoothing"]:
                row["variance_derivative"] = -row["variance_derivative"]  # +1 − 0.01 seed
    claims, _ = _claims(tmp_path, results)
    lap = next(c for t, c in claims.items() if t.startswith("t=1: trained Laplacian heads"))
    assert lap.verdict == "not reproduced"
