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

from tokengeo.experiments.cells import Cell, CellResult
from tokengeo.experiments.report import SuiteOutput
from tokengeo.experiments.settings import Setting, train_table
from tokengeo.experiments.sweep import (
    SweepResults,
    difference_claim,
    k_variants,
    line_figure,
    metric_table,
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
    claims = [
        difference_claim(NAME, sweep, f"{lab} Laplacian heads lower validation bits per char",
                         SRC, "better downstream averages with 5 of 10 heads Laplacian",
                         lab, "k=0", "val bits/char", _bpc, higher=False)
        for lab in labels[1:]
    ]
    claims.append(difference_claim(
        NAME, sweep, f"{full} (all heads Laplacian): fewer components for 99% of variance",
        SRC, "547.7 → 430.4 components (mean per sequence)", full, "k=0",
        "PCs for 99% per sequence", _per_sequence, higher=False))
    claims.append(difference_claim(
        NAME, sweep, f"{full}: next-token classes more separable (CDNV falls)", SRC,
        "stronger linguistic collapse", full, "k=0", "CDNV", geo("cdnv_mean"), higher=False))
    out = SuiteOutput(NAME, TITLE, PAPER, claims)
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
        f"{settings['train']['model']} on {settings['train']['data']}")
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
