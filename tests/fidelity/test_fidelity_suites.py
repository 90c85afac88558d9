"""Issue #17 items 6-7: the Laplacian suites' new geometry claims (NC2, per-image spectra),
the quick settings' shape (k in {0, H/2, H}, >= 5 seeds in full, DINO in the quick run) and
the scheduling cost hints of the long cells."""

import tomllib
from pathlib import Path

import pytest
import torch
from helpers.claim_tree import every_claim

from tokengeo.errors import ConfigError
from tokengeo.experiments.cells import CellResult
from tokengeo.experiments.reproduce import BUILTIN_CONFIG_DIR, ReproduceConfig, plan_suite
from tokengeo.experiments.suite import SuiteContext
from tokengeo.experiments.suites import dino, laplacian_images
from tokengeo.probes.spectrum import per_item_components


def _settings(suite: str, mode: str) -> dict:
    data = tomllib.loads((BUILTIN_CONFIG_DIR / f"{suite}.toml").read_text())
    return {**data.get("common", {}), **data[mode]}


def _slow_per_item(tokens: torch.Tensor, threshold: float) -> float:
    counts = []
    for item in tokens.double():  # (T, D)
        lam = torch.linalg.eigvalsh(torch.cov(item.T, correction=0)).flip(0).clamp_min(0)
        share = lam.cumsum(0) / lam.sum()
        counts.append(int(next(i for i, s in enumerate(share) if s >= threshold - 1e-9)) + 1)
    return sum(counts) / len(counts)


@pytest.mark.parametrize("threshold", [0.5, 0.9, 0.99])
def test_per_item_components_matches_a_per_item_covariance_loop(threshold):
    g = torch.Generator().manual_seed(0)
    scales = torch.logspace(0, -2, 6)  # decaying spectrum: counts differ between thresholds
    x = torch.randn(7, 20, 6, generator=g) * scales + torch.randn(7, 1, 6, generator=g) * 5
    assert per_item_components(x, threshold) == pytest.approx(_slow_per_item(x, threshold))


def test_per_item_components_is_rank_per_item_not_pooled():
    # each item lies on its own line (rank 1), in a different direction: pooled rank is 3
    g = torch.Generator().manual_seed(1)
    dirs = torch.eye(3)
    x = torch.randn(3, 10, 1, generator=g) * dirs[:, None, :]  # (3, 10, 3)
    assert per_item_components(x, 0.99) == 1.0
    assert per_item_components(torch.ones(2, 5, 3), 0.99) == 0.0  # no variance: 0


@pytest.mark.parametrize("bad", [torch.zeros(4, 3), torch.zeros(2, 1, 3)])
def test_per_item_components_refuses_bad_shapes(bad):
    with pytest.raises(ConfigError, match="tokens"):
        per_item_components(bad, 0.99)


def test_classification_geometry_reports_nc2_and_per_image_spectra():
    from tokengeo.data import load_dataset
    from tokengeo.models.registry import create_model
    from tokengeo.probes.collapse import neural_collapse_sequences
    from tokengeo.probes.run_geometry import classification_geometry, final_tokens
    from tokengeo.train.tasks import ImageClassification

    torch.manual_seed(0)
    data = load_dataset("digits")
    model = create_model("vit-tiny", d_model=16, n_layers=1, patch_size=2,
                         **ImageClassification.model_sizes(data))
    task = ImageClassification(data, model.config)
    geo = classification_geometry(model, task, "test", 64)
    h, mask, _, y = final_tokens(model, task, "test", 64)
    nc = neural_collapse_sequences(h, y, mask)
    assert geo["nc2_equinorm"] == pytest.approx(nc.nc2_equinorm)
    assert geo["nc2_max_angle"] == pytest.approx(nc.nc2_max_angle)
    assert geo["components_99_per_image"] == pytest.approx(per_item_components(h, 0.99))
    assert 1 <= geo["components_99_per_image"] <= h.shape[1]


def _fake_image_results(settings: dict, nc2: dict[int, list[float]]) -> dict:
    results = {}
    for k in settings["ks"]:
        for i, s in enumerate(settings["seeds"]):
            geo = {"within_sequence_share": 0.5, "between_class_share": 0.2, "nc1": 1.0,
                   "nc2_etf_error": nc2[k][i], "nc2_equinorm": 0.1, "nc2_max_angle": 0.2,
                   "components_99": 20,  # per image: not tied over seeds
                   "components_99_interp": 19.5 - 0.1 * k + 0.01 * i,
                   "components_99_per_image": 10.0 - k + 0.1 * i * (1 + k)}
            geo["layers"] = [dict(geo)]
            value = {"final": {"test": {"accuracy": 0.8}}, "geometry": geo, "wall_time_s": 1}
            results[f"k={k}-s{s}"] = CellResult(f"k={k}-s{s}", value)
    return results


def test_images_suite_judges_nc2_and_per_image_spectra(tmp_path):
    settings = {"ks": [0, 1, 2], "seeds": [0, 1, 2],
                "train": {"model": "vit-tiny", "data": "fashion-mnist",
                          "model_overrides": {"n_heads": 2, "n_layers": 1}}}
    closer = {0: [0.9, 0.8, 0.85], 1: [0.7, 0.6, 0.66], 2: [0.5, 0.45, 0.52]}  # nearer the ETF
    ctx = SuiteContext.under(tmp_path, "laplacian-images")
    out = laplacian_images.summarise(settings, _fake_image_results(settings, closer), ctx)
    head = "k=2 (all heads Laplacian): "
    by_text = every_claim(out.claims)  # the k = H readings are members of their findings
    nc2 = next(c for t, c in by_text.items() if t.startswith(head) and "simplex ETF" in t)
    assert nc2.verdict == "reproduced"
    # the per-image spectra repeat the pooled count's claim (the LM's and DINO's, a new
    # question for a ViT): a table column, not a row of their own
    assert not any("each image" in t for t in by_text)
    farther = {0: closer[2], 1: closer[1], 2: closer[0]}
    out = laplacian_images.summarise(settings, _fake_image_results(settings, farther), ctx)
    nc2 = next(c for t, c in every_claim(out.claims).items()
               if t.startswith(head) and "simplex ETF" in t)
    assert nc2.verdict == "not reproduced"
    header = out.tables[0][1]
    assert {"NC2 norm std/mean", "NC2 |cos+1/(C-1)|", "PCs 99% per image"} <= set(header)


@pytest.mark.parametrize("suite,heads", [("laplacian-images", 4), ("laplacian-language", 4)])
def test_quick_ks_are_none_half_all_and_full_has_three_seeds(suite, heads):
    quick, full = _settings(suite, "quick"), _settings(suite, "full")
    assert quick["ks"] == [0, heads // 2, heads]
    assert len(full["seeds"]) >= 3 and {0, heads // 2, heads} <= set(full["ks"])


def test_dino_quick_and_full_keep_none_and_all_but_one_head(tmp_path):
    quick, full = _settings("dino", "quick"), _settings("dino", "full")
    H = dino.backbone_config(quick).n_heads
    assert not quick.get("skip")
    assert quick["ks"] == [0, H - 1]
    assert full["ks"] == [0, dino.backbone_config(full).n_heads - 1]  # the 2.5 h budget
    assert dino.backbone_config(full).patch_size == 4  # 7 x 7 = 49 patch tokens
    plan = plan_suite("dino", ReproduceConfig(out=tmp_path, mode="quick"))
    assert len(plan.cells) == 2 * len(quick["ks"]) * len(quick["seeds"])  # DINO + random
    claims = every_claim(dino._claims(quick, dino._sweep(quick).results(
        {}, skipped="not yet"))).values()  # the k readings are members of one finding
    assert any(f"k={H - 1} of {H} Laplacian heads raise linear-probe accuracy" in c.text
               for c in claims)
    assert not any("segmentation" in c.text for c in claims)  # dropped: its sanity check failed
    assert "went to laplacian-images" in full["skip"]  # --full gave DINO's budget to the images


def test_long_quick_cells_carry_their_cost_hint(tmp_path):
    for suite in ("laplacian-images", "laplacian-language", "dino"):
        plan = plan_suite(suite, ReproduceConfig(out=tmp_path, mode="quick"))
        trained = [c for c in plan.cells if not c.key.startswith("random")]
        assert all(c.cost == _settings(suite, "quick")["cell_cost"] > 1 for c in trained)


def test_a_skipped_suite_still_reports_every_claim_not_run(tmp_path):
    text = (BUILTIN_CONFIG_DIR / "dino.toml").read_text()
    text = text.replace("[quick]", '[quick]\nskip = "too long here"', 1)
    (tmp_path / "dino.toml").write_text(text)
    cfg = ReproduceConfig(out=tmp_path / "out", only=("dino",), config_dir=Path(tmp_path))
    from tokengeo.experiments.reproduce import reproduce

    _, (out,) = reproduce(cfg, log=lambda m: None)
    assert out.claims and all(c.verdict == "not run: too long here" for c in out.claims)
