"""Suite ``laplacian-language``: Zhang & Papyan (arXiv 2602.09297), language modelling.

A character-level GPT on Shakespeare (split by work) with k of H heads Laplacian in every
layer; validation bits per character, the spectrum of final-layer tokens, and next-token
separability ("linguistic collapse") on validation windows.

Components for 99% of the variance are counted as the paper does (per validation window,
its tokens centred by the window's mean, then averaged over windows:
:func:`tokengeo.probes.spectrum.per_item_components`); the pooled count (all windows'
tokens in one cloud) is shown next to it.
"""

from __future__ import annotations

from pathlib import Path

import math

from tokengeo.experiments.cells import Cell, CellResult
from tokengeo.experiments.claims import family
from tokengeo.experiments.report import Referee, SuiteOutput
from tokengeo.experiments.settings import Setting, train_table
from tokengeo.experiments.sweep import (
    SweepResults,
    difference_claim,
    k_variants,
    line_figure,
    metric_table,
    model_label,
    training_cells,
)
from tokengeo.experiments.sweep import (
    geometry_metric as geo,
)

SETTINGS = {  # suites/laplacian-language.toml: [common] + [quick] or [full]
    "seeds": Setting("int_list"),
    "ks": Setting("int_list"),
    "geometry_split": Setting("str", required=False),
    "geometry_examples": Setting("int", required=False, lo=1),
    "train": Setting("table", check=train_table),
    "cell_cost": Setting("number", required=False),
}

NAME = "laplacian-language"
TITLE = "Laplacian heads: language modelling"
PAPER = ("Zhang & Papyan, \"Laplacian Heads Improve Transformers by Smoothing Token "
         "Representations\", arXiv 2602.09297")
SRC = "Zhang & Papyan 2026, Sec. 5.2 (GPT pre-training)"
PER_SEQUENCE = "components_99_per_sequence"  # the paper's count; "components_99" is pooled
PAPER_KEY = "Zhang & Papyan (Laplacian heads)"
COMPONENTS_RATIO = 430.4 / 547.7  # the paper's per-sequence count, all heads Laplacian / none


def proxy(settings: dict) -> str:
    t = settings["train"]
    return f"{model_label(t)} on {t.get('data')} (bits per char) for a GPT pre-trained on web text"


def referee(settings: dict) -> Referee:
    t = settings["train"]
    return Referee(
        question="Do Laplacian heads improve a pre-trained GPT (downstream averages) and "
                 "make its token spectra decay faster (547.7 → 430.4 components for 99%)?",
        can_say="validation bits per character of a small character-level GPT (a proxy "
                "for downstream averages, which a model this size cannot be scored on) and "
                "the paper's per-sequence component count, as a ratio to k = 0.",
        gap=[("model", "GPT (nanochat scale), 10 heads", model_label(t)),
             ("data", "web-scale pre-training text", t.get("data", "—")),
             ("steps", "full pre-training", str(t.get("steps", "—"))),
             ("metric", "downstream task averages", "validation bits per char"),
             ("seeds", "not stated", str(len(settings["seeds"])))])


def _bpc(v: dict) -> float:
    return v["final"]["val"]["bits_per_char"]


def _per_sequence(v: dict) -> float:
    """The paper's per-sequence count (cells cached before it existed are recomputed: the
    field is among the cells' required fields)."""
    return v["geometry"][PER_SEQUENCE]


def cells(settings: dict) -> list[Cell]:
    return training_cells(NAME, settings, k_variants(settings["ks"]), geometry="language",
                          fields=(f"geometry.{PER_SEQUENCE}",))


def summarise(settings: dict, results: dict[str, CellResult], fig_dir: Path) -> SuiteOutput:
    ks = list(settings["ks"])
    labels = [f"k={k}" for k in ks]
    sweep = SweepResults(results, labels, list(settings["seeds"]))
    full = f"k={max(ks)}"
    stand_in = {"kind": "stand-in", "proxy": proxy(settings)}
    members = [
        difference_claim(NAME, sweep, f"{lab} Laplacian heads lower validation bits per char",
                         SRC, "better downstream averages with 5 of 10 heads Laplacian",
                         lab, "k=0", "val bits/char", _bpc, higher=False, label=lab,
                         **stand_in)
        for lab in labels[1:]
    ]
    claims = [family(NAME, "Laplacian heads lower validation bits per char (some k)",
                     members, rule="any")]
    claims.append(difference_claim(
        NAME, sweep, f"{full} (all heads Laplacian): fewer components for 99% of variance",
        SRC, "547.7 → 430.4 components (mean per sequence), ×0.786", full, "k=0",
        "PCs for 99% per sequence", _per_sequence, higher=False, ratio=True,
        paper_effect=math.log(COMPONENTS_RATIO), **stand_in))
    claims.append(difference_claim(
        NAME, sweep, f"{full}: next-token classes more separable (CDNV falls)", SRC,
        "stronger linguistic collapse", full, "k=0", "CDNV", geo("cdnv_mean"), higher=False,
        **stand_in))
    out = SuiteOutput(NAME, TITLE, PAPER, claims, paper_key=PAPER_KEY,
                      referee=referee(settings))
    if sweep.not_run():
        return out
    cols = {"val bits/char": _bpc, "PCs 99% per seq.": _per_sequence,
            "PCs 99% pooled": geo("components_99"),
            "decay α": geo("decay_alpha"), "CDNV": geo("cdnv_mean"),
            "next-token NM acc": geo("next_token_nm_accuracy"),
            "train s": lambda v: v["wall_time_s"]}
    header, rows = metric_table(sweep, cols)
    out.tables.append(("by number of Laplacian heads (mean ± std over seeds)", header, rows))
    out.add_figure(
        line_figure, fig_dir / "bpc_vs_k.png", ks,
        {"val bits/char": [sweep.values(l, _bpc) for l in labels]},
        "Laplacian heads per layer (k)", "validation bits per character",
        f"{model_label(settings['train'])} on {settings['train']['data']}")
    out.add_figure(
        line_figure, fig_dir / "components_vs_k.png", ks,
        {"per sequence (paper)": [sweep.values(l, _per_sequence) for l in labels],
         "pooled": [sweep.values(l, geo("components_99")) for l in labels]},
        "Laplacian heads per layer (k)", "components for 99% variance", "spectral decay (val)")
    out.notes.append(f"Training: {settings['train']}; seeds {settings['seeds']}. Geometry on "
                     f"{settings.get('geometry_examples')} validation windows. PCs for 99%: per "
                     "sequence = each window's tokens centred by its own mean, counted, then "
                     "averaged over windows (the paper's definition, used in the claim); "
                     "pooled = all windows' tokens in one cloud.")
    return out
