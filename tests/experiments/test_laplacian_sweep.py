"""The shared claims of the Laplacian sweeps, as a language suite would call them: a ratio
metric with the paper's effect at k = H, the family of the ks between, the trend, and the
per-block family read from ``geometry["layers"]``."""

import dataclasses
import math

import pytest

from tokengeo.experiments.cells import CellResult
from tokengeo.experiments.suites import laplacian_sweep as lap
from tokengeo.experiments.sweep import geometry_metric

SETTINGS = {"ks": [0, 1, 2], "seeds": [0, 1, 2, 3],
            "train": {"model": "gpt-tiny", "data": "shakespeare-char",
                      "model_overrides": {"n_layers": 2, "n_heads": 2, "block_size": 32}}}
RATIO = 0.8  # components at k = H over k = 0, every seed


def _sweep():
    results = {}
    for k in SETTINGS["ks"]:
        for s in SETTINGS["seeds"]:
            count = (30.0 + s) * RATIO ** (k / 2) * (1 + 0.001 * ((s * k) % 3))
            layers = [{"components_99_per_sequence": count + 5 - b} for b in range(2)]
            geo = {"components_99_per_sequence": count, "layers": layers}
            results[f"k={k}-s{s}"] = CellResult(f"k={k}-s{s}", {"final": {}, "geometry": geo})
    return lap.sweep("t", SETTINGS, "language").results(results)


METRIC = lap.KMetric("PCs per seq.", geometry_metric("components_99_per_sequence"), False,
                     "fewer components for 99% of variance", "×0.786", "paper §5.2",
                     paper_effect=math.log(0.786), ratio=True,
                     geometry_key="components_99_per_sequence",
                     catalogue="laplacian.lm-spectral-decay")


def test_k_finding_nests_headline_family_and_trend_for_a_ratio_metric():
    row = lap.k_finding("t", _sweep(), SETTINGS, METRIC, kind="stand-in",
                        proxy="a char GPT")
    assert row.text == METRIC.text and row.rule_of_family == "any"
    assert row.kind == "stand-in" and row.verdict == "reproduced"
    head, between, trend = row.members
    assert [m.label for m in row.members] == [lap.AT_H, lap.BELOW_H, lap.TREND]
    assert head.text.startswith("k=2 (all heads Laplacian)")
    assert head.measured.mean == pytest.approx(math.log(RATIO), abs=0.003)
    assert head.paper_effect == pytest.approx(math.log(0.786)) and head.kind == "stand-in"
    assert head.verdict == "reproduced"
    assert [m.label for m in between.members] == ["k=1"]
    assert between.members[0].measured.mean == pytest.approx(0.5 * math.log(RATIO), abs=0.003)
    assert trend.verdict == "reproduced" and trend.rule_of_family == "all"
    assert [m.label for m in trend.members] == ["k=0→k=1", "k=1→k=2"]
    assert all(m.measured.mean < 0 and m.measured.scale == "log" for m in trend.members)
    assert row.catalogue == METRIC.catalogue and row.primary == lap.AT_H
    unlisted = lap.k_finding("t", _sweep(), SETTINGS,
                             dataclasses.replace(METRIC, catalogue=None), kind="stand-in")
    assert unlisted.kind == "new" and unlisted.catalogue is None  # not a paper claim
    assert all(c.proxy == "a char GPT" for c in (head, trend, *between.members))


def test_k_finding_with_blocks_nests_the_all_family():
    row = lap.k_finding("t", _sweep(), SETTINGS, METRIC, blocks=True)
    blocks = row.members[-1]
    assert blocks.label == lap.EVERY_BLOCK and blocks.rule_of_family == "all"
    assert [b.holm_size for b in blocks.members] == [4 * 2, 4 * 2]  # outer 4 × inner 2


def test_a_reading_that_did_not_run_is_left_out_and_named():
    ran = lap.k_finding("t", _sweep(), SETTINGS, METRIC)
    missing = lap.k_finding("t", _sweep(), SETTINGS, METRIC)
    missing.members[2].not_run = "no trend here"
    row = lap.finding("t", "x", missing.members)
    assert [m.label for m in row.members] == [lap.AT_H, lap.BELOW_H]
    assert "monotone over k: no trend here" in row.detail
    assert row.verdict == ran.verdict == "reproduced"


def test_layer_claim_has_one_member_per_block_read_from_the_layers():
    claim = lap.layer_claim("t", _sweep(), SETTINGS, METRIC)
    assert [m.label for m in claim.members] == ["block 1", "block 2"]
    assert claim.rule_of_family == "all" and claim.verdict == "reproduced"
    header, rows = lap.layer_table(_sweep(), SETTINGS, "PCs", "components_99_per_sequence")[1:]
    assert header == ["block", "k=0", "k=1", "k=2"] and rows[1][0] == "block 2"


def test_layer_claim_needs_a_geometry_key():
    no_layers = lap.KMetric("bpc", lambda r: 0.0, False, "bpc falls", "lower", "src")
    with pytest.raises(ValueError, match="per-layer"):
        lap.layer_claim("t", _sweep(), SETTINGS, no_layers)
