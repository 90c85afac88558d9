"""Suite ``laplacian-language``: Zhang & Papyan (arXiv 2602.09297), language modelling.

A GPT with k of H heads Laplacian in every layer, k = 0, 1, ..., H (the settings' ``ks``),
several seeds: in ``--full`` a 4-layer GPT on byte-level BPE tokens of Jane Austen's novels
(split by novel), in ``--quick`` a character-level GPT on Shakespeare (split by work; its data
is part of ``make run``'s set-up, Austen's is not). Measured on validation windows:
validation loss (a stand-in for the paper's downstream averages), the spectrum of token
representations and next-token separability ("linguistic collapse": CDNV and nearest-mean
accuracy of tokens grouped by the token that follows), at the final norm and at every
block's output.

One tallied row per finding (:func:`~tokengeo.experiments.suites.laplacian_sweep.finding`),
an "any" family over its readings: k = H (all heads Laplacian) against k = 0, paired by
seed; some k < H (an "any" family); the trend over every k (the mean per-seed slope on k,
Page's L in the detail); for CDNV and NM accuracy also every block's output at k = H and at
k = H/2 ("all" families).

Components for 99% of the variance are counted as the paper does (per validation window,
its tokens centred by the window's mean, then averaged over windows:
:func:`tokengeo.probes.spectrum.per_item_components`); the pooled count (all windows'
tokens in one cloud) is shown next to it.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from tokengeo.experiments.cells import Cell, CellResult
from tokengeo.experiments.claims import Claim, family
from tokengeo.experiments.report import Referee, SuiteOutput
from tokengeo.experiments.suite import Suite, SuiteContext
from tokengeo.experiments.suites import laplacian_sweep as lap
from tokengeo.experiments.summary import UNRECORDED
from tokengeo.experiments.sweep import (
    SweepResults,
    difference_claim,
    k_label,
    metric_table,
    model_label,
)
from tokengeo.experiments.sweep import geometry_metric as geo

SETTINGS = lap.SETTINGS  # laplacian-language.toml: [common] + [quick] or [full]

NAME = "laplacian-language"
TITLE = "Laplacian heads: language modelling"
PAPER = lap.PAPER
SRC = "Zhang & Papyan 2026, Sec. 5.2 (GPT pre-training)"
PER_SEQUENCE = "components_99_per_sequence"  # the paper's count; "components_99" is pooled
PAPER_KEY = lap.PAPER_KEY
COMPONENTS_RATIO = 430.4 / 547.7  # the paper's per-sequence count, all heads Laplacian / none
GEOMETRY_KIND = "language"
# cells cached before these fields existed are recomputed (resuming at the final checkpoint)
FIELDS = (f"geometry.{PER_SEQUENCE}", "geometry.layers")
SEPARABILITY = [  # (name, result key, higher is the paper's direction)
    ("CDNV", "cdnv_mean", False),
    ("next-token NM accuracy", "next_token_nm_accuracy", True),
]
CATALOGUE = {"CDNV": "laplacian.lm-linguistic-collapse",
             "next-token NM accuracy": "laplacian.lm-next-token-separability"}
TRENDS = [  # (what moves, metric name, getter key or None for val loss, higher)
    ("validation loss falls", "val loss", None, False),
    ("fewer components for 99% of each sequence's variance", "PCs 99% per seq.",
     PER_SEQUENCE, False),
    ("CDNV falls (final norm)", "CDNV", "cdnv_mean", False),
    ("next-token nearest-mean accuracy rises (final norm)", "NM acc",
     "next_token_nm_accuracy", True),
    ("within-sequence share of token variance falls", "within-seq share",
     "within_sequence_share", False),
]


def model_shape(settings: dict) -> tuple[int, int]:
    """(H heads, L blocks) of the trained model (its registered config with the overrides).
    The ks the claims need (0, H/2 and H) are checked for every Laplacian sweep by
    :mod:`tokengeo.experiments.validation` before any cell is planned."""
    from tokengeo.experiments.validation import registry_config

    cfg = registry_config(settings["train"])
    return int(cfg.n_heads), int(cfg.n_layers)


def proxy(settings: dict) -> str:
    t = settings["train"]
    return (f"{model_label(t)} on {t.get('data')} (validation loss, nats per token) for a GPT "
            "pre-trained on web text and scored on downstream tasks")


def referee(settings: dict) -> Referee:
    t = settings["train"]
    return Referee(
        question="Do Laplacian heads improve a pre-trained GPT (downstream averages), make "
                 "its token spectra decay faster (547.7 → 430.4 components for 99%) and its "
                 "tokens more separable by the next token?",
        can_say="validation loss of a small GPT (a stand-in for downstream averages, which a "
                "model this size cannot be scored on), the paper's per-sequence component "
                "count as a ratio to k = 0, and CDNV / nearest-mean accuracy of tokens "
                "grouped by their next token, at every block and the final norm.",
        gap=[("model", "GPT, 5 of 10 heads Laplacian", model_label(t)),
             ("data", UNRECORDED, t.get("data", "—")),
             ("steps", UNRECORDED, str(t.get("steps", "—"))),
             ("metric", "downstream task averages", "validation loss"),
             ("k of H", UNRECORDED, ", ".join(map(str, settings["ks"]))),
             ("seeds", UNRECORDED, str(len(settings["seeds"])))])


def val_loss(r) -> float:
    return r.metric("val", "loss")


def _bpc(r) -> float:
    return r.metric("val", "bits_per_char")


def _getter(key: str | None) -> Callable:
    return val_loss if key is None else geo(key)


def cells(settings: dict, ctx: SuiteContext) -> list[Cell]:
    model_shape(settings)
    return lap.cells(NAME, settings, ctx, GEOMETRY_KIND, FIELDS)


def _between(settings: dict, heads: int) -> list[int]:
    return [k for k in sorted(settings["ks"]) if 0 < k < heads]


def _at_k(sweep: SweepResults, k: int, text: str, paper: str, metric: str, get: Callable,
          higher: bool, stand_in: dict, **fields) -> Claim:
    return difference_claim(NAME, sweep, f"{k_label(k)}: {text}", SRC, paper, k_label(k),
                            k_label(0), metric, get, higher, label=k_label(k),
                            **stand_in, **fields)


def _blocks(sweep: SweepResults, k: int, name: str, key: str, word: str, higher: bool,
            layers: int, stand_in: dict, label: str) -> Claim:
    """``name`` at every block's output, k against k = 0 (rule "all": the paper's
    per-layer figures show the effect through depth)."""
    members = [difference_claim(
        NAME, sweep, f"{k_label(k)}: {name} {word} at block {i + 1}", SRC,
        "stronger linguistic collapse, per layer", k_label(k), k_label(0),
        f"{name} (block {i + 1})", lap.layer_metric(key, i), higher, label=f"block {i + 1}",
        **stand_in) for i in range(layers)]
    return family(NAME, f"{k_label(k)}: {name} {word} at every block's output", members,
                  rule="all", label=label)


def _trend(sweep: SweepResults, settings: dict, heads: int, trend: tuple,
           stand_in: dict, label: str = lap.TREND, ratio: bool = False) -> Claim:
    """"``text`` at every step of k": monotone in k
    (:func:`~tokengeo.experiments.suites.laplacian_sweep.monotone_claim`)."""
    text, metric, key, higher = trend
    by_k = {k: k_label(k) for k in sorted(settings["ks"])}
    return lap.monotone_claim(NAME, sweep, f"with more Laplacian heads (k = 0 … {heads}), "
                              f"{text} at every step (monotone)", SRC,
                              "improves with Laplacian heads", by_k, metric, _getter(key),
                              higher, ratio=ratio, label=label, **stand_in)


def _finding(settings: dict, sweep: SweepResults, heads: int, text: str, paper: str,
             metric: str, get: Callable, higher: bool, trend: tuple, stand_in: dict,
             extra: list[Claim] = (), ratio: bool = False,
             paper_effect: float | None = None, catalogue: str | None = None) -> Claim:
    """One tallied row (:func:`~tokengeo.experiments.suites.laplacian_sweep.finding`):
    readings k = H (with the paper's effect), some k < H (an "any" family), the trend over
    k, and ``extra``."""
    below = [_at_k(sweep, k, text, paper, metric, get, higher, stand_in, ratio=ratio)
             for k in _between(settings, heads)]
    readings = [
        _at_k(sweep, heads, text, paper, metric, get, higher, stand_in, ratio=ratio,
              paper_effect=paper_effect),
        family(NAME, f"{text}, at k < H (some of k = "
               f"{', '.join(str(k) for k in _between(settings, heads))})", below,
               rule="any", label=lap.BELOW_H),
        _trend(sweep, settings, heads, trend, stand_in, ratio=ratio), *extra]
    readings[0].label = lap.AT_H
    return lap.finding(NAME, text, readings, primary=lap.AT_H, catalogue=catalogue)


def claims(settings: dict, sweep: SweepResults) -> list[Claim]:
    """One tallied row per finding: validation loss, components for 99%, CDNV and NM
    accuracy (each with its per-block readings at k = H and k = H/2), and the
    within-sequence share's trend."""
    heads, layers = model_shape(settings)
    half = heads // 2
    stand_in = {"kind": "stand-in", "proxy": proxy(settings)}
    trends = {t[1]: t for t in TRENDS}
    out = [
        _finding(settings, sweep, heads, "Laplacian heads lower the validation loss",
                 "better downstream averages with Laplacian heads", "val loss", val_loss,
                 False, trends["val loss"], stand_in,
                 catalogue="laplacian.lm-benchmarks"),
        _finding(settings, sweep, heads, "fewer components for 99% of variance",
                 "547.7 → 430.4 components (mean per sequence), ×0.786 at k = H; fewer "
                 "components (faster-decaying spectra)", "PCs for 99% per sequence",
                 geo(PER_SEQUENCE), False, trends["PCs 99% per seq."], stand_in,
                 ratio=True, paper_effect=math.log(COMPONENTS_RATIO),
                 catalogue="laplacian.lm-spectral-decay"),
    ]
    for (name, key, higher), trend in zip(SEPARABILITY, (trends["CDNV"], trends["NM acc"]),
                                          strict=True):
        word = "falls" if not higher else "rises"
        blocks = [_blocks(sweep, k, name, key, word, higher, layers, stand_in,
                          lap.EVERY_BLOCK if k == heads else f"every block at k={k}")
                  for k in (heads, half)]
        out.append(_finding(settings, sweep, heads, f"{name} {word} at the final norm",
                            "stronger linguistic collapse", name, geo(key), higher, trend,
                            stand_in, extra=blocks, catalogue=CATALOGUE[name]))
    # within-sequence collapse and the smoothing sign are the paper's ViT claims (tallied
    # in laplacian-images): read here as tokengeo's own questions about the LM
    new = {**stand_in, "kind": "new"}
    out.append(_trend(sweep, settings, heads, trends["within-seq share"], new, label=""))
    out += lap.smoothing_output(NAME, sweep, settings, **new)
    return out


def summarise(settings: dict, results: dict[str, CellResult], ctx: SuiteContext) -> SuiteOutput:
    _, layers = model_shape(settings)
    sweep = lap.results(NAME, settings, results, ctx, GEOMETRY_KIND, FIELDS)
    out = SuiteOutput(NAME, TITLE, PAPER, claims(settings, sweep), paper_key=PAPER_KEY,
                      referee=referee(settings))
    if sweep.not_run():
        return out
    cols = {"val loss": val_loss, "val bits/char": _bpc, "PCs 99% per seq.": geo(PER_SEQUENCE),
            "PCs 99% pooled": geo("components_99"), "decay α": geo("decay_alpha"),
            "CDNV": geo("cdnv_mean"), "next-token NM acc": geo("next_token_nm_accuracy"),
            "within-seq share": geo("within_sequence_share")}
    out.tables.append(lap.per_k_table(sweep, cols))
    per_layer = {f"{name} b{i + 1}": lap.layer_metric(key, i)
                 for name, key in (("CDNV", "cdnv_mean"), ("NM", "next_token_nm_accuracy"))
                 for i in range(layers)}
    out.tables.append(("next-token separability at each block's output (mean ± std over "
                       "seeds)", *metric_table(sweep, per_layer)))
    out.add_figure(lap.k_figure, ctx.figure_dir / "loss_vs_k.png", settings, sweep,
                   {"val loss": val_loss}, "validation loss (nats per token)")
    out.add_figure(lap.k_figure, ctx.figure_dir / "components_vs_k.png", settings, sweep,
                   {"per sequence (paper)": geo(PER_SEQUENCE), "pooled": geo("components_99")},
                   "components for 99% variance",
                   f"spectral decay (val), {model_label(settings['train'])}")
    for name, key, _ in SEPARABILITY:
        series = {f"block {i + 1}": lap.layer_metric(key, i) for i in range(layers)}
        series["final norm"] = geo(key)
        out.add_figure(lap.k_figure, ctx.figure_dir / f"{key}_per_layer_vs_k.png", settings,
                       sweep, series, name, f"{name} per layer (val), "
                       f"{model_label(settings['train'])}")
    lap.add_smoothing(out, sweep, settings, ctx.figure_dir)
    out.notes.append(f"Training: {settings['train']}; seeds {settings['seeds']}. Geometry on "
                     f"{settings.get('geometry_examples')} validation windows, at the final "
                     "norm and at each block's output. PCs for 99%: per sequence = each "
                     "window's tokens centred by its own mean, counted, then averaged over "
                     "windows (the paper's definition, used in the claims); pooled = all "
                     "windows' tokens in one cloud. CDNV / NM accuracy: tokens grouped by "
                     "the token that follows them. Smoothing sign: every head of every "
                     "trained model on "
                     f"{lap.smoothing_examples(settings)} "
                     "validation windows (one forward pass).")
    return out


SUITE = Suite(NAME, TITLE, PAPER, SETTINGS, cells, summarise, lap.check)
