"""Suite ``ltransformer``: El Ichi et al. (arXiv 2603.05727), text classification.

The baseline text encoder and the L-Transformer (p DCT slices, each a narrow transformer)
of the same width, trained with the same budget on tweet sentiment (the offline stand-in
for IMDB), for every positional-encoding strategy α; plus the encoder-parameter ratio at the
paper's width d = 768.
"""

from __future__ import annotations

from pathlib import Path

from tokengeo.experiments.cells import Cell, CellResult
from tokengeo.experiments.claims import Claim
from tokengeo.experiments.report import SuiteOutput
from tokengeo.experiments.settings import Setting, train_table
from tokengeo.experiments.stats import Interval, Region
from tokengeo.experiments.sweep import (
    SweepResults,
    difference_claim,
    metric_table,
    training_cells,
)

SETTINGS = {  # suites/ltransformer.toml: [common] + [quick] or [full]
    "seeds": Setting("int_list"),
    "baseline_model": Setting("str"),
    "l_model": Setting("str"),
    "alphas": Setting("str_list"),
    "accuracy_tolerance": Setting("number"),
    "l_overrides": Setting("table", required=False),
    "train": Setting("table", check=train_table),
}

NAME = "ltransformer"
TITLE = "L-Transformer: a transformer split into spectral slices"
PAPER = ("El Ichi, Jbilou, El Guide, Dufrenois, \"Structured Multidimensional Representation "
         "Learning for Large Language Models\", arXiv 2603.05727")
SRC = "El Ichi et al. 2026, experiments (IMDB, AG News)"


def _acc(v: dict) -> float:
    return v["final"]["test"]["accuracy"]


def _variants(settings: dict) -> dict[str, dict]:
    base_over = dict(settings["train"].get("model_overrides", {}))
    out = {"baseline": {"model": settings["baseline_model"], "model_overrides": base_over}}
    for alpha in settings["alphas"]:
        over = {**base_over, **settings.get("l_overrides", {}), "alpha": alpha}
        out[f"L alpha={alpha}"] = {"model": settings["l_model"], "model_overrides": over}
    return out


def cells(settings: dict) -> list[Cell]:
    variants = {k.replace(" ", "_").replace("=", "-"): v for k, v in _variants(settings).items()}
    return training_cells(NAME, settings, variants, geometry=None)


def encoder_ratio(baseline: str, l_model: str, d_model: int, p: int) -> float:
    """Encoder (block) parameters of the L-Transformer / of the baseline at width d."""
    from tokengeo.models.registry import create_model

    base = create_model(baseline, d_model=d_model, device="meta")
    lt = create_model(l_model, d_model=d_model, p=p, device="meta")
    return lt.num_parameters(only_blocks=True) / base.num_parameters(only_blocks=True)


def summarise(settings: dict, results: dict[str, CellResult], fig_dir: Path) -> SuiteOutput:
    labels = [k.replace(" ", "_").replace("=", "-") for k in _variants(settings)]
    sweep = SweepResults(results, labels, list(settings["seeds"]))
    tol = float(settings["accuracy_tolerance"])
    claims = []
    for lab in labels[1:]:
        c = difference_claim(NAME, sweep, f"{lab}: accuracy within {100 * tol:g} point of baseline",
                             SRC, "IMDB 80.77 → 82.02 (d = 128)", lab, "baseline",
                             "test accuracy", _acc, higher=True)
        c.region = Region.above(-tol)
        claims.append(c)
    ratio = encoder_ratio(settings["baseline_model"], settings["l_model"], 768, 4)
    claims.append(Claim(NAME, "about 1/p of the encoder parameters (p = 4, d = 768)", SRC,
                        "28.4M → 7.1M (25%)", "encoder parameters L / baseline",
                        Region(0.24, 0.27, "within [0.24, 0.27]"),
                        measured=Interval.exact_value(ratio)))
    out = SuiteOutput(NAME, TITLE, PAPER, claims)
    if sweep.not_run():
        return out
    cols = {"test acc": _acc, "encoder params": lambda v: v["parameters"]["encoder"],
            "total params": lambda v: v["parameters"]["total"],
            "train s": lambda v: v["wall_time_s"]}
    header, rows = metric_table(sweep, cols)
    out.tables.append(("by model (mean ± std over seeds)", header, rows))
    out.notes.append(f"Training: {settings['train']}; seeds {settings['seeds']}. Step time and "
                     "peak memory at d in {128, 256, 768}: benchmarks/ltransformer.py.")
    return out
