"""Two budgets per cell (a constant-rate tail after the cosine, ``decay_steps``), the plateau
reading computed from the cells' learning curves, and the [gpu] table's cells measuring the
new numbers (the finite smoothing steps, the sublayer shares, the object tokens, the two
budgets) when trained at a tiny size on the CPU."""

from pathlib import Path

import pytest

from tokengeo.errors import ConfigError
from tokengeo.experiments import reproduce as rp
from tokengeo.experiments.cells import CellResult
from tokengeo.experiments.stats import mean_interval, paired_difference
from tokengeo.experiments.suite import SuiteContext
from tokengeo.experiments.suites import laplacian_images as images
from tokengeo.experiments.suites import plateau
from tokengeo.train import TrainConfig
from tokengeo.train.schedule import WarmupCosine

# ---- the schedule


def test_rate_holds_min_lr_after_decay_steps(tmp_path):
    from tokengeo.train import Trainer

    cfg = TrainConfig(model="vit-tiny", data="digits", steps=6, decay_steps=3, warmup=1,
                      lr=1e-2, min_lr=1e-3, eval_every=0, device="cpu", out=str(tmp_path),
                      model_overrides={"d_model": 8, "n_layers": 1, "patch_size": 4})
    trainer = Trainer(cfg, progress=False)
    cosine = WarmupCosine(1e-2, 1e-3, 1, 3)
    assert [trainer.schedule(s) for s in range(3)] == [cosine(s) for s in range(3)]
    assert [trainer.schedule(s) for s in range(3, 6)] == [1e-3] * 3
    plain = Trainer(TrainConfig(**{**cfg.to_dict(), "decay_steps": None,
                                   "out": str(tmp_path / "b")}), progress=False)
    assert plain.schedule(3) > 1e-3  # without a tail the cosine runs to steps


@pytest.mark.parametrize("decay", [0, 7, -1])
def test_decay_steps_outside_warmup_to_steps_is_refused(decay):
    with pytest.raises(ConfigError, match="decay_steps"):
        TrainConfig(steps=6, warmup=1, decay_steps=decay).validate()


# ---- the reading


def test_status_from_the_interval_of_the_change():
    assert plateau.status(mean_interval([0.001, 0.0012, 0.0008])) == "at plateau"
    assert plateau.status(mean_interval([0.01, 0.012, 0.011])) == "not at plateau"
    assert plateau.status(mean_interval([0.0, 0.006, -0.004])) == "undecided"


SETTINGS = {"seeds": [0, 1, 2], "ks": [0, 2, 4], "curve_every": 5,
            "train": {"model": "vit-tiny", "data": "digits", "steps": 20, "decay_steps": 10,
                      "model_overrides": {"n_layers": 1, "n_heads": 4}}}


def _acc(k: int, seed: int, step: int) -> float:
    """k = 0 flat after step 10; k = 4 still climbing (+2 points), 1 point below at 20."""
    late = {0: 0.0, 2: 0.001, 4: 0.02}[k] + 0.0001 * seed if step == 20 else 0.0
    return 0.9 - 0.01 * (k == 4) * 3 + 0.001 * seed + late + 0.0003 * ((seed * k) % 3)


def _fake_results() -> dict:
    out = {}
    for k in SETTINGS["ks"]:
        for s in SETTINGS["seeds"]:
            curve = [{"step": step, "metrics": {"accuracy": _acc(k, s, step)}, "geometry": None}
                     for step in (5, 10, 15, 20)]
            out[f"k={k}-s{s}"] = CellResult(f"k={k}-s{s}", {
                "final": {"test": {"accuracy": _acc(k, s, 20)}}, "curve": curve, "step": 20})
    return out


def test_plateau_reads_both_budgets_of_the_curves(tmp_path):
    from tokengeo.experiments.suites import laplacian_sweep as lap

    res = lap.sweep(images.NAME, {**SETTINGS, "smoothing_examples": 0}, "classification") \
        .results(_fake_results())
    p = plateau.plateau(res, SETTINGS, heads=4)
    assert p.budgets == (10, 20)
    assert p.status == {"k=0": "at plateau", "k=2": "at plateau", "k=4": "not at plateau"}
    seeds = SETTINGS["seeds"]
    want = paired_difference([_acc(4, s, 20) for s in seeds], [_acc(0, s, 20) for s in seeds])
    assert p.gap[1].mean == pytest.approx(want.mean)
    assert p.gap[0].mean == pytest.approx(-0.03 + sum(0.0003 * ((s * 4) % 3) for s in seeds)
                                          / 3)
    title, header, rows = plateau.plateau_table(p)
    assert header == ["setting", "step 10", "step 20", "change", "plateau"]
    assert rows[-1][0] == "gap k=4 − k=0"


def test_a_tail_without_a_curve_point_at_both_budgets_is_refused():
    with pytest.raises(ConfigError, match="curve_every dividing both"):
        plateau.check("laplacian-images.full", {**SETTINGS, "curve_every": 4})
    plateau.check("ok", {**SETTINGS, "curve_every": 10})
    plateau.check("no tail", {**SETTINGS, "train": {"steps": 20}})


# ---- the [gpu] table at a tiny size on the CPU, every cell run


def _tiny_gpu_conf(tmp_path: Path) -> Path:
    """The built-in [gpu] table of laplacian-images, its sizes shrunk, its tail kept."""
    builtin = rp.load_settings(rp.BUILTIN_CONFIG_DIR, "laplacian-images", "gpu")
    t = builtin["train"]
    assert t["decay_steps"] < t["steps"] and builtin["curve_every"]
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "laplacian-images.toml").write_text(
        "[gpu]\nseeds = [0, 1]\nks = [0, 1, 2]\ngeometry_examples = 16\nsmoothing_examples = 8\n"
        "curve_every = 2\ncell_cost = 1\n"
        f'train = {{ model = "{t["model"]}", data = "digits", task = "{t["task"]}", '
        f'steps = 4, decay_steps = 2, batch_size = 16, lr = 1e-2, min_lr = 1e-3, warmup = 1, '
        f'eval_every = 0, final_eval_batches = 2, precision = "{t["precision"]}", '
        f'model_overrides = {{ patch_size = 2, d_model = 8, n_layers = 2, n_heads = 2 }} }}\n')
    return conf


@pytest.mark.slow  # six tiny training cells: ~20 s of CPU
def test_gpu_table_cells_measure_the_new_numbers_on_the_cpu(tmp_path):
    cfg = rp.ReproduceConfig(out=tmp_path / "out", mode="gpu", only=("laplacian-images",),
                             config_dir=_tiny_gpu_conf(tmp_path))
    plan = rp.plan_suite("laplacian-images", cfg)
    results = {c.key: CellResult(c.key, c.fn(**c.kwargs)) for c in plan.cells}
    assert len(results) == 6
    for r in results.values():
        v = r.value
        assert {"variance_step", "dirichlet_step"} <= set(v["smoothing"][0])
        assert [s["layer"] for s in v["sublayer_smoothing"]] == [0, 1]
        assert all(0 < s["share_before"] <= 1 for s in v["sublayer_smoothing"])
        assert [layer["object_share"] >= 0 for layer in v["geometry"]["layers"]] == [True] * 2
        assert [p["step"] for p in v["curve"]] == [2, 4]
    out = images.summarise(plan.settings, results, SuiteContext.under(tmp_path, images.NAME))
    titles = [t[0] for t in out.tables]
    for start in ("test acc at two budgets", "within-sequence share of the token variance "
                  "before", "object/background η² after each block", "smoothing sign"):
        assert any(t.startswith(start) for t in titles), (start, titles)
    assert any(n.startswith("Plateau:") for n in out.notes)
