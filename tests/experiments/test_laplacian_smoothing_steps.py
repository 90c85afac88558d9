"""The Laplacian suites' smoothing tables carry the finite-step measures and the sublayer
shares of every cell (tokengeo.experiments.suites.smoothing_sign)."""

import pytest
from helpers.smoothing_rows import fake_smoothing, fake_sublayers

from tokengeo.experiments.cells import CellResult
from tokengeo.experiments.suite import SuiteContext
from tokengeo.experiments.suites import laplacian_images as images

SEEDS = [0, 1, 2]
SETTINGS = {"seeds": SEEDS, "ks": [0, 2, 4], "geometry_examples": 10, "smoothing_examples": 8,
            "train": {"model": "vit-tiny", "data": "digits", "steps": 10,
                      "model_overrides": {"n_layers": 2, "n_heads": 4}}}


def _geometry(k: int, s: int) -> dict:
    at = {"within_sequence_share": 0.5, "between_class_share": 0.2, "nc1": 1.0,
          "nc2_etf_error": 0.3, "components_99": 5, "components_99_interp": 5.0,
          "components_99_per_image": 4.0, "nc2_equinorm": 0.1, "nc2_max_angle": 0.2,
          "object_share": 0.3 + 0.01 * k + 0.001 * s * (1 + k % 3), "object_images": 5}
    return {**at, "layers": [dict(at) for _ in range(2)]}


def _results() -> dict:
    out = {}
    for k in SETTINGS["ks"]:
        for s in SEEDS:
            value = {"final": {"test": {"accuracy": 0.9 + 0.01 * s}}, "wall_time_s": 1.0,
                     "step": 10, "parameters": {"total": 1}, "geometry": _geometry(k, s),
                     "smoothing": fake_smoothing(k, s, 4, 2),
                     "sublayer_smoothing": fake_sublayers(s, 2)}
            out[f"k={k}-s{s}"] = CellResult(f"k={k}-s{s}", value)
    return out


def test_tables_carry_steps_and_sublayer_shares(tmp_path):
    out = images.summarise(SETTINGS, _results(), SuiteContext.under(tmp_path, images.NAME))
    title, header, rows = next(t for t in out.tables if t[0].startswith("smoothing sign"))
    assert "k=4 laplacian ΔE_P/E_P" in header and "k=4 laplacian ΔVar/Var (ε=1)" in header
    col = header.index("k=4 laplacian ΔE_P/E_P")
    # k = 4: every head Laplacian, d = −(0.2 + 0.01 s + 0.003 h), Dirichlet 1.5 d
    want = 1.5 * -(0.2 + 0.01 + 0.003 * 1.5)
    assert float(rows[0][col].split(" ± ")[0]) == pytest.approx(want, rel=1e-3)
    title, header, rows = next(t for t in out.tables if t[0].startswith("within-sequence "
                                                                          "share of the token"))
    assert header[1:4] == ["k=0 share before", "k=0 share after", "k=0 after − before"]
    assert [r[0] for r in rows] == ["block 1", "block 2"]
    assert float(rows[1][3].split(" ± ")[0]) == pytest.approx(-0.05)


def test_object_share_per_k_and_per_block(tmp_path):
    out = images.summarise(SETTINGS, _results(), SuiteContext.under(tmp_path, images.NAME))
    per_k = next(t for t in out.tables if t[0].startswith("by number of Laplacian heads"))
    assert "object/background η²" in per_k[1]
    title, header, rows = next(t for t in out.tables if t[0].startswith("object/background"))
    assert header == ["block", "k=0", "k=2", "k=4"] and len(rows) == 2
    assert rows[0][1].startswith("0.301 ")
    row = next(c for c in out.claims if c.text == images.OBJECTS.text)
    assert row.kind == "stand-in" and row.verdict == "reproduced"
    assert row.catalogue == "laplacian.vit-object-background"
    assert [m.label for m in row.members] == ["k=H", "some k<H", "monotone over k",
                                              "every block at k=H"]
    cells = images.cells(SETTINGS, SuiteContext.under(tmp_path, images.NAME))
    assert all({"geometry.object_share", "sublayer_smoothing"} <= set(c.fields) for c in cells)


def test_object_finding_is_not_run_where_no_image_has_both_kinds(tmp_path):
    results = _results()
    for r in results.values():  # every patch foreground: η² undefined
        g = r.value["geometry"]
        for entry in [g, *g["layers"]]:
            entry.update(object_share=float("nan"), object_images=0)
    out = images.summarise(SETTINGS, results, SuiteContext.under(tmp_path, images.NAME))
    row = next(c for c in out.claims if c.text == images.OBJECTS.text)
    assert row.verdict.startswith("not run: cell k=0-s0 has no evaluation image with both")
    assert not any(t[0].startswith("object/background") for t in out.tables)
    assert any(n.startswith("No object/background column or table") for n in out.notes)
