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

import math

from tokengeo.experiments.cells import Cell, CellResult
from tokengeo.experiments.claims import family
from tokengeo.experiments.report import Referee, SuiteOutput
from tokengeo.experiments.suite import Suite, SuiteContext
from tokengeo.experiments.suites import laplacian_sweep as lap
from tokengeo.experiments.summary import UNRECORDED
from tokengeo.experiments.sweep import difference_claim, model_label
from tokengeo.experiments.sweep import geometry_metric as geo

SETTINGS = lap.SETTINGS  # laplacian-language.toml: [common] + [quick] or [full]

NAME = "laplacian-language"
TITLE = "Laplacian heads: language modelling"
PAPER = lap.PAPER
SRC = "Zhang & Papyan 2026, Sec. 5.2 (GPT pre-training)"
PER_SEQUENCE = "components_99_per_sequence"  # the paper's count; "components_99" is pooled
PAPER_KEY = lap.PAPER_KEY
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
        gap=[("model", "GPT, 5 of 10 heads Laplacian", model_label(t)),
             ("data", UNRECORDED, t.get("data", "—")),
             ("steps", UNRECORDED, str(t.get("steps", "—"))),
             ("metric", "downstream task averages", "validation bits per char"),
             ("seeds", UNRECORDED, str(len(settings["seeds"])))])


GEOMETRY_KIND = "language"
FIELDS = (f"geometry.{PER_SEQUENCE}",)  # cells cached before it existed are recomputed


def _bpc(r) -> float:
    return r.metric("val", "bits_per_char")


_per_sequence = geo(PER_SEQUENCE)  # the paper's per-sequence count


def cells(settings: dict, ctx: SuiteContext) -> list[Cell]:
    return lap.cells(NAME, settings, ctx, GEOMETRY_KIND, FIELDS)


def summarise(settings: dict, results: dict[str, CellResult], ctx: SuiteContext) -> SuiteOutput:
    ks = list(settings["ks"])
    labels = lap.labels(settings)
    sweep = lap.results(NAME, settings, results, ctx, GEOMETRY_KIND, FIELDS)
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
            "next-token NM acc": geo("next_token_nm_accuracy")}
    out.tables.append(lap.per_k_table(sweep, cols))
    out.add_figure(lap.k_figure, ctx.figure_dir / "bpc_vs_k.png", settings, sweep,
                   {"val bits/char": _bpc}, "validation bits per character")
    out.add_figure(lap.k_figure, ctx.figure_dir / "components_vs_k.png", settings, sweep,
                   {"per sequence (paper)": _per_sequence, "pooled": geo("components_99")},
                   "components for 99% variance",
                   f"spectral decay (val), {model_label(settings['train'])}")
    out.notes.append(f"Training: {settings['train']}; seeds {settings['seeds']}. Geometry on "
                     f"{settings.get('geometry_examples')} validation windows. PCs for 99%: per "
                     "sequence = each window's tokens centred by its own mean, counted, then "
                     "averaged over windows (the paper's definition, used in the claim); "
                     "pooled = all windows' tokens in one cloud.")
    return out


SUITE = Suite(NAME, TITLE, PAPER, SETTINGS, cells, summarise)
