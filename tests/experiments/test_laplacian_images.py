"""The image suite's claims over every k and every block, from fake cell results: a trend
claim per metric, the k = H headline, the ks between as a family, per-layer families; and
the settings rule that the ks hold 0, H // 2 and H."""

import pytest
from helpers.claim_tree import every_claim, repeated_findings
from helpers.smoothing_rows import fake_smoothing

from tokengeo.errors import ConfigError
from tokengeo.experiments.cells import CellResult
from tokengeo.experiments.suite import SuiteContext
from tokengeo.experiments.suites import laplacian_images as images
from tokengeo.experiments.suites import laplacian_sweep as lap
from tokengeo.experiments.validation import check_suite

HEADS, LAYERS, SEEDS = 4, 3, [0, 1, 2, 3, 4, 5]
SETTINGS = {"ks": list(range(HEADS + 1)), "seeds": SEEDS, "geometry_examples": 10,
            "train": {"model": "vit-tiny", "data": "fashion-mnist",
                      "model_overrides": {"n_layers": LAYERS, "d_model": 32}}}
KEYS = ("within_sequence_share", "between_class_share", "nc1", "nc2_etf_error",
        "components_99", "components_99_interp", "components_99_per_image", "nc2_equinorm",
        "nc2_max_angle")


def _geometry(k: int, seed: int, sign: float, late_only: bool = False) -> dict:
    """Geometry of one cell: every metric moves by ``sign`` × k in the paper's direction
    (sign -1: against it), plus a seed effect and a little noise; per block, the effect
    grows with depth (none before the last block when ``late_only``)."""
    noise = 0.001 * ((seed * 7 + k * 3) % 5)

    def at(strength: float) -> dict:
        e = sign * strength * k
        return {"within_sequence_share": 0.6 - 0.02 * e + 0.01 * seed + noise,
                "between_class_share": 0.2 + 0.01 * e + 0.005 * seed + noise,
                "nc1": 2.0 - 0.1 * e + 0.05 * seed + noise,
                "nc2_etf_error": 0.8 - 0.03 * e + 0.02 * seed + noise,
                "components_99": 20 - round(e) - (seed % 2),
                "components_99_interp": 19.6 - e - 0.5 * (seed % 2) + noise,
                "components_99_per_image": 10.0 - 0.5 * e + 0.1 * seed + noise,
                "nc2_equinorm": 0.1, "nc2_max_angle": 0.2}
    layers = [at(0.0 if late_only and b < LAYERS - 1 else (b + 1) / LAYERS)
              for b in range(LAYERS)]
    return {**at(1.0), "layers": layers}


def _results(sign: float = 1.0, late_only: bool = False, smooth: float = 1.0) -> dict:
    out = {}
    for k in SETTINGS["ks"]:
        for s in SEEDS:
            acc = 0.85 + sign * 0.004 * k + 0.01 * s + 0.0005 * ((s + k) % 3)
            value = {"final": {"test": {"accuracy": acc}}, "wall_time_s": 1.0, "step": 10,
                     "parameters": {"total": 1}, "geometry": _geometry(k, s, sign, late_only),
                     "smoothing": fake_smoothing(k, s, HEADS, LAYERS, smooth)}
            out[f"k={k}-s{s}"] = CellResult(f"k={k}-s{s}", value)
    return out


def _summary(tmp_path, results):
    return images.summarise(SETTINGS, results, SuiteContext.under(tmp_path, images.NAME))


ROWS = [m for m in images.GEOMETRY if m.name not in images.TABLE_ONLY]  # each one row


def _by_text(out) -> dict:
    return every_claim(out.claims)


@pytest.fixture(scope="module")
def summary(tmp_path_factory):
    """The summary of results where every metric moves with k the paper's way."""
    return _summary(tmp_path_factory.mktemp("images"), _results())


def test_every_metric_gets_headline_family_trend_and_per_layer_claims(summary):
    out = summary
    texts = _by_text(out)
    for m in [images.ACCURACY, *ROWS]:
        head = texts[f"k={HEADS} (all heads Laplacian): {m.text}"]
        assert head.quantity.startswith(f"{m.name}(k={HEADS}) − {m.name}(k=0)")
        assert head.verdict == "reproduced"
        between = next(c for t, c in texts.items() if t.startswith(f"{m.text}, at k < H"))
        assert [x.label for x in between.members] == ["k=1", "k=2", "k=3"]
        trend = next(c for t, c in texts.items() if t.startswith(f"{m.text} at every step"))
        assert [x.label for x in trend.members] == ["k=0→k=1", "k=1→k=2", "k=2→k=3",
                                                    "k=3→k=4"]
        assert trend.rule_of_family == "all" and trend.verdict == "reproduced"
    assert texts[f"k={HEADS} (all heads Laplacian): {images.ACCURACY.text}"].paper_effect \
        == pytest.approx(images.IMAGENET_GAIN / 100)
    layer = [c for c in texts.values() if "(per layer)" in c.text]
    assert len(layer) == len(ROWS)
    assert all([m.label for m in c.members] == ["block 1", "block 2", "block 3"]
               for c in layer)
    assert all(c.verdict == "reproduced" for c in layer)


def test_a_reversed_trend_is_not_reproduced(tmp_path):
    texts = _by_text(_summary(tmp_path, _results(sign=-1.0)))
    acc = images.ACCURACY
    trend = next(c for t, c in texts.items() if t.startswith(f"{acc.text} at every step"))
    assert trend.verdict == "not reproduced"
    assert all(m.measured.mean < 0 for m in trend.members)
    assert texts[f"k={HEADS} (all heads Laplacian): {acc.text}"].verdict == "not reproduced"


def test_per_layer_family_reads_each_block_not_the_final_tokens(tmp_path):
    out = _summary(tmp_path, _results(late_only=True))
    within = next(c for c in _by_text(out).values()
                  if c.text.startswith(f"k={HEADS}: within-sequence") and c.members)
    verdicts = [m.verdict for m in within.members]
    assert verdicts[-1] == "reproduced" and verdicts[0] != "reproduced"
    assert within.verdict != "reproduced"  # "after every block" fails at block 1
    assert within.members[-1].measured.mean == pytest.approx(-0.02 * HEADS, abs=0.002)


def test_one_tallied_row_per_finding_its_readings_nested(summary):
    """Issue 40 item 11: each metric is one row, an "any" family of its readings; the ks
    below H an "any" family, the blocks an "all" family inside it."""
    assert repeated_findings(summary.claims) == {}
    rows = {c.text: c for c in summary.claims}
    for m in [images.ACCURACY, *ROWS]:
        row = rows[m.text]
        assert row.rule_of_family == "any" and row.verdict == "reproduced"
        labels = [x.label for x in row.members]
        assert labels == ["k=H", "some k<H", "monotone over k",
                          *(["every block at k=H"] if m is not images.ACCURACY else [])]
        assert row.members[1].rule_of_family == "any"
        assert row.members[-1].rule_of_family == "all"  # monotone steps, or every block
        assert row.paper_effect == row.members[0].paper_effect
        assert row.primary == "k=H" and row.catalogue == m.catalogue
    assert rows[images.GEOMETRY[-2].text].kind == "new"  # spectra: the LM's, DINO's claim
    assert images.GEOMETRY[-1].text not in rows  # the same claim per image: a table
    blocks = rows[images.GEOMETRY[0].text].members[-1]
    assert [b.holm_size for b in blocks.members] == [4 * LAYERS] * LAYERS


def test_tables_hold_every_k_and_every_block(summary):
    out = summary
    per_k = out.tables[0]
    assert [row[0] for row in per_k[2]] == [f"k={k}" for k in SETTINGS["ks"]]
    layer_tables = out.tables[1:1 + len(images.LAYER_TABLES)]
    for _, header, rows in layer_tables:
        assert header == ["block", *(f"k={k}" for k in SETTINGS["ks"])]
        assert [r[0] for r in rows] == ["block 1", "block 2", "block 3"]
    names = {f.name for f in out.figures}
    assert {"within_sequence_share_by_layer.png", "accuracy_vs_k.png"} <= names, out.notes


def test_without_results_every_claim_is_reported_not_run(tmp_path, summary):
    ctx = SuiteContext(tmp_path, tmp_path / "f", skipped="not in this run")
    out = images.summarise(SETTINGS, {}, ctx)
    assert out.claims and all(c.verdict.startswith("not run") for c in out.claims)
    assert [c.text for c in out.claims] == [c.text for c in summary.claims]


def test_cells_ask_for_per_layer_geometry(tmp_path):
    cells = images.cells(SETTINGS, SuiteContext.under(tmp_path, images.NAME))
    assert len(cells) == len(SETTINGS["ks"]) * len(SEEDS)
    assert all("geometry.layers" in c.fields for c in cells)
    assert all("smoothing" in c.fields for c in cells)
    assert {c.kwargs["smoothing_examples"] for c in cells} == {64}


def _smoothing_claims(out):
    texts = _by_text(out)
    lap_claim = texts[f"k={HEADS}: trained Laplacian heads smooth the residual stream (the "
                      "within-sequence variance falls along their output), every block"]
    control = texts["control, k=0: attention heads smooth the residual stream, every block"]
    return lap_claim, control


def test_smoothing_claim_family_over_blocks_with_attention_control(summary):
    lap_claim, control = _smoothing_claims(summary)
    assert [m.label for m in lap_claim.members] == ["block 1", "block 2", "block 3"]
    assert lap_claim.kind == "stand-in" and control.kind == "new"
    assert lap_claim.verdict == "reproduced"
    # the per-seed mean over the 4 Laplacian heads: −(0.2 + 0.01 s + 0.003 · 1.5)
    expected = -(0.2 + 0.01 * sum(SEEDS) / len(SEEDS) + 0.0045)
    assert lap_claim.members[0].measured.mean == pytest.approx(expected)
    assert control.verdict == "not reproduced"  # the fake attention heads sharpen
    table = next(t for t in summary.tables if t[0].startswith("smoothing sign"))
    assert table[1][:3] == ["block", "k=0 attention dVar/Var", "k=0 attention Rayleigh"]
    names = {f.name for f in summary.figures}
    assert {f"smoothing_block{b}.png" for b in (1, 2, 3)} <= names, summary.notes


def test_sharpening_laplacian_heads_are_not_reproduced(tmp_path):
    lap_claim, _ = _smoothing_claims(_summary(tmp_path, _results(smooth=-1.0)))
    assert lap_claim.verdict == "not reproduced"
    assert all(m.measured.mean > 0 for m in lap_claim.members)


def test_cells_without_smoothing_rows_say_so(tmp_path):
    results = _results()
    for r in results.values():
        del r.value["smoothing"]
    out = _summary(tmp_path, results)
    lap_claim, _ = _smoothing_claims(out)
    assert "has no smoothing rows" in lap_claim.verdict
    assert any("No smoothing-sign table" in n for n in out.notes)


def test_headline_ks_and_depth_come_from_the_settings():
    assert lap.headline_ks(SETTINGS) == (HEADS, HEADS // 2)
    assert lap.depth(SETTINGS) == LAYERS


@pytest.mark.parametrize("ks,missing", [([0, 1, 4], "k = 2"), ([0, 2, 3], "k = 4"),
                                        ([0, 1, 3], "k = 2, 4")])
def test_ks_must_hold_half_and_all_heads(ks, missing):
    with pytest.raises(ConfigError, match=f"lacks {missing};.*H = 4 heads"):
        check_suite(images.SUITE, "x.toml", {**SETTINGS, "ks": ks})


def test_one_head_cannot_make_a_sweep():
    train = {**SETTINGS["train"], "model_overrides": {"n_heads": 1, "d_model": 32}}
    with pytest.raises(ConfigError, match="n_heads >= 2"):
        check_suite(images.SUITE, "x.toml", {**SETTINGS, "ks": [0, 1], "train": train})


@pytest.mark.parametrize("suite", [images.NAME, "laplacian-language"])
def test_every_k_of_the_heads_is_accepted(suite):
    from tokengeo.experiments.suites import laplacian_language

    owner = images if suite == images.NAME else laplacian_language
    check_suite(owner.SUITE, "x.toml", SETTINGS if suite == images.NAME else
                {**SETTINGS, "train": {"model": "gpt-tiny", "data": "shakespeare-char"}})


def test_full_settings_train_a_deep_vit_to_its_plateau(tmp_path):
    """Issue 42: 3000 steps (the plateau the TOML measured), >= 6 seeds, a learning curve
    every 750 steps; k in {0, H/2, H} (the budget: every k does not fit)."""
    from tokengeo.experiments.reproduce import ReproduceConfig, plan_suite

    plan = plan_suite(images.NAME, ReproduceConfig(out=tmp_path, mode="full"))
    settings = plan.settings
    over = settings["train"]["model_overrides"]
    heads = lap.headline_ks(settings)[0]
    assert lap.depth(settings) >= 6 and over["patch_size"] == 4 and over["d_model"] >= 32
    assert settings["train"]["data"] == "fashion-mnist" and len(settings["seeds"]) >= 6
    assert settings["train"]["steps"] >= 3000 and settings["curve_every"] == 750
    assert settings["ks"] == [0, heads // 2, heads]
    assert len(plan.cells) == len(settings["ks"]) * len(settings["seeds"])
