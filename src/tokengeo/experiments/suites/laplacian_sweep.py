"""The sweep both Laplacian-heads suites share: a model trained with k of H heads Laplacian in
every layer, k in the settings' list, several seeds; its settings schema, cells, the per-k
table and figure, and the claims over k and over blocks (Zhang & Papyan, arXiv 2602.09297:
accuracy rises nearly monotonically with k, the best ViT has all heads Laplacian; the
geometry figures are per layer).

For one metric (:class:`KMetric`), :func:`k_finding` gives ONE tallied row, an "any" family
over its readings: the k = H headline, the ks between as a family, the trend over every k and,
optionally, the per-block family (:func:`layer_claim`); :func:`finding` builds such a row;
:func:`layer_table` / :func:`layer_figure` the metric by block and k. ``laplacian_images``
and ``laplacian_language`` choose their task's metrics."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokengeo.experiments.cells import Cell, CellResult
from tokengeo.experiments.claims import Claim, family
from tokengeo.experiments.settings import Setting, train_table
from tokengeo.experiments.stats import Region, mean_interval
from tokengeo.experiments.suite import SuiteContext
from tokengeo.experiments.suites import plateau
from tokengeo.experiments.suites import smoothing_sign as smoothing
from tokengeo.experiments.suites.plateau import curve_value
from tokengeo.experiments.sweep import (
    Sweep,
    SweepResults,
    difference_claim,
    k_label,
    k_variants,
    line_figure,
    metric_table,
    model_label,
    training_cells,
    training_sweep,
)

SETTINGS = {  # common to both suites' TOML: [common] + [quick] or [full]
    "seeds": Setting("int_list"),
    "ks": Setting("int_list"),
    "geometry_split": Setting("str", required=False),
    "geometry_examples": Setting("int", required=False, lo=1),
    "train": Setting("table", check=train_table),
    "cell_cost": Setting("number", required=False),
    "smoothing_examples": Setting("int", required=False, lo=1),
    "curve_every": Setting("int", required=False, lo=1),
    "gpus": Setting("int", required=False, lo=1),  # > 1: each cell DDP under torchrun
    "gpus_per_cell": Setting("number", required=False),  # of a GPU per cell on Ray: 1 or 1/n
}
PAPER = ("Zhang & Papyan, \"Laplacian Heads Improve Transformers by Smoothing Token "
         "Representations\", arXiv 2602.09297")
PAPER_KEY = "Zhang & Papyan (Laplacian heads)"


def labels(settings: dict) -> list[str]:
    return [k_label(k) for k in settings["ks"]]


def smoothing_examples(settings: dict) -> int:
    """Held-out examples of each cell's smoothing sign (one forward pass): the setting,
    default :data:`~tokengeo.experiments.suites.smoothing_sign.DEFAULT_EXAMPLES`, in every
    mode (``--gpu`` included); 0 for DDP cells (``gpus`` > 1: torchrun records no smoothing
    sign, and :func:`check` refuses the setting there)."""
    if settings.get("gpus", 1) > 1:
        return 0
    return settings.get("smoothing_examples", smoothing.DEFAULT_EXAMPLES)


def sweep(suite: str, settings: dict, geometry: str, fields: tuple[str, ...] = ()) -> Sweep:
    curve = ("curve",) if settings.get("curve_every") else ()
    signs = (smoothing.FIELD, smoothing.SUBLAYERS) if smoothing_examples(settings) else ()
    return training_sweep(suite, settings, k_variants(settings["ks"]), geometry,
                          (*fields, *signs, *curve))


def cells(suite: str, settings: dict, ctx: SuiteContext, geometry: str,
          fields: tuple[str, ...] = ()) -> list[Cell]:
    """Every (k, seed) cell; each also measures its heads' smoothing sign on
    ``smoothing_examples`` held-out examples (one forward pass)."""
    return training_cells(sweep(suite, settings, geometry, fields), settings, ctx, geometry,
                          smoothing_examples=smoothing_examples(settings),
                          curve_every=settings.get("curve_every", 0))


def smoothing_output(suite: str, res: SweepResults, settings: dict, **fields) -> list[Claim]:
    """The smoothing-sign claims (:mod:`~tokengeo.experiments.suites.smoothing_sign`): the
    Laplacian heads of k = H every block, the attention heads of k = 0 as the control."""
    heads = headline_ks(settings)[0]
    return smoothing.smoothing_claims(suite, res, depth(settings), k_label(heads), k_label(0),
                                      **fields)


def add_smoothing(out, res: SweepResults, settings: dict, fig_dir: Path) -> None:
    """The smoothing table (k = 0, H/2, H) and one figure per block (heads of every k)."""
    heads, half = headline_ks(settings)
    n = depth(settings)
    missing = next(filter(None, (smoothing.missing_rows(res, lab) for lab in labels(settings))),
                   None)
    if missing:
        out.notes.append(f"No smoothing-sign table or figures: {missing}.")
        return
    shown = [k_label(k) for k in (0, half, heads)]
    out.tables.append(smoothing.smoothing_table(res, shown, n))
    out.tables.append(smoothing.sublayer_table(res, shown, n))
    for layer in range(n):
        out.add_figure(smoothing.smoothing_figure, fig_dir / f"smoothing_block{layer + 1}.png",
                       res, labels(settings), layer, model_label(settings["train"]))


def results(suite: str, settings: dict, cell_results: dict[str, CellResult],
            ctx: SuiteContext, geometry: str, fields: tuple[str, ...] = ()) -> SweepResults:
    return sweep(suite, settings, geometry, fields).results(cell_results, ctx.skipped)


def per_k_table(res: SweepResults, columns: dict[str, Callable]) -> tuple:
    header, rows = metric_table(res, {**columns, "train s": lambda r: r.wall_time_s})
    return "by number of Laplacian heads (mean ± std over seeds)", header, rows


def k_figure(path: Path, settings: dict, res: SweepResults, series: dict[str, Callable],
             ylabel: str, title: str | None = None) -> Path:
    """A figure of each getter in ``series`` against k; the title names the trained model."""
    t = settings["train"]
    return line_figure(path, list(settings["ks"]),
                       {name: [res.values(lab, get) for lab in labels(settings)]
                        for name, get in series.items()},
                       "Laplacian heads per layer (k)", ylabel,
                       title or f"{model_label(t)} on {t.get('data')}")


# ---- claims over every k and every layer (Zhang & Papyan: accuracy and geometry per k, per layer)

GEOMETRY_LAYERS = "geometry.layers"  # a cached cell without per-layer geometry is recomputed


@dataclass(frozen=True)
class KMetric:
    """One quantity the Laplacian suites judge over k: ``name`` as tables and quantities
    show it, ``get(result)`` its value at the final layer, ``higher`` the paper's direction,
    ``text`` the claim without its k ("within-sequence variance share falls"), ``paper`` the
    paper's statement; ``paper_effect`` the paper's number for all heads Laplacian (in the
    claim's unit: a log ratio when ``ratio``); ``geometry_key`` the key of the cell's
    ``geometry`` dict, for the per-layer claims (None: no per-layer value)."""

    name: str
    get: Callable[[Any], float]
    higher: bool
    text: str
    paper: str
    source: str
    paper_effect: float | None = None
    discrete: bool = False
    ratio: bool = False
    geometry_key: str | None = None
    catalogue: str | None = None  # the catalogue entry its row tests (None: a new question)


def headline_ks(settings: dict) -> tuple[int, int]:
    """(H, H // 2): all heads Laplacian (the paper's best ViT, 12 of 12 heads) and half of
    them. ``ks`` holds 0, H // 2 and H (checked by
    :func:`check`), so H is its largest."""
    heads = max(settings["ks"])
    return heads, heads // 2


def check(where: str, settings: dict) -> None:
    """A Laplacian sweep's ``ks``: as every suite over k, and holding 0, H // 2 and H, the
    ks its claims compare (:func:`~tokengeo.experiments.validation.check_ks`); no learning
    curve or smoothing sign asked of DDP cells (``gpus`` > 1), which record neither."""
    from tokengeo.errors import ConfigError
    from tokengeo.experiments.validation import check_ks

    check_ks(where, settings, headline=True)
    plateau.check(where, settings)
    gpus = settings.get("gpus", 1)
    for name in ("smoothing_examples", "curve_every"):
        if gpus > 1 and name in settings:
            raise ConfigError(f"{where}: {name} needs gpus = 1 (a cell on gpus = {gpus} "
                              "trains under torchrun, which records no learning curve or "
                              f"smoothing sign); drop {name} or set gpus = 1")


def depth(settings: dict) -> int:
    """Blocks of the suite's model (its registry config with the TOML's overrides)."""
    from tokengeo.models.registry import get_entry

    train = settings["train"]
    overrides = {k: v for k, v in (train.get("model_overrides") or {}).items()
                 if k != "n_laplacian"}
    return int(get_entry(train["model"]).config(**overrides).n_layers)


def layer_metric(key: str, layer: int) -> Callable[[Any], float]:
    """Getter of geometry number ``key`` of block ``layer``'s output (0-based): the residual
    stream after that block, before the final norm."""
    return lambda r: r.geometry["layers"][layer][key]


def _difference(suite: str, res: SweepResults, m: KMetric, k: int, text: str,
                get: Callable | None = None, name: str | None = None, label: str = "",
                paper_effect: float | None = None, **fields) -> Claim:
    return difference_claim(suite, res, text, m.source, m.paper, k_label(k), k_label(0),
                            name or m.name, get or m.get, m.higher, discrete=m.discrete,
                            ratio=m.ratio, label=label or k_label(k),
                            paper_effect=paper_effect, **fields)


# the readings of one finding, as its members' labels
AT_H, BELOW_H, TREND, EVERY_BLOCK = "k=H", "some k<H", "monotone over k", "every block at k=H"


def monotone_claim(suite: str, res: SweepResults, text: str, source: str, paper: str,
                   labels_by_k: dict[float, str], metric: str, get: Callable, higher: bool,
                   discrete: bool = False, ratio: bool = False, label: str = TREND,
                   how: str = "", **fields) -> Claim:
    """"``metric`` moves monotonically with k": an "all" family over the steps between
    consecutive ks (each step paired by seed, in the paper's direction): it holds when
    every step does (an intersection–union test, Berger 1982), and fails when some step is
    significantly the other way after Holm. With 3 or more ks this is not the k = H
    contrast (a per-seed least-squares slope over k ∈ {0, H/2, H} is exactly that contrast
    / H: it tests no shape); with fewer it is not run, its reason ending with ``how`` (the
    cost and command of one more k, :func:`more_k_hint`)."""
    ks = sorted(labels_by_k)
    if len(ks) < 3:
        reason = f"a monotone trend needs 3 or more k (have {len(ks)})"
        return Claim(suite, text, source, paper, f"{metric}, every step between consecutive k",
                     Region.above(0.0), label=label,
                     not_run=f"{reason}; {how}" if how else reason, **fields)
    steps = [difference_claim(suite, res, f"{metric}: {labels_by_k[a]} → {labels_by_k[b]}",
                              source, paper, labels_by_k[b], labels_by_k[a], metric, get,
                              higher, discrete=discrete, ratio=ratio,
                              label=f"{labels_by_k[a]}→{labels_by_k[b]}", **fields)
             for a, b in itertools.pairwise(ks)]
    return family(suite, text, steps, rule="all", label=label)


def more_k_hint(suite: str, settings: dict) -> str:
    """The cost and the command of one more k in ``suite``'s settings (a not-run reason's
    end): one cell per seed at the suite's ``cell_cost`` hint."""
    seeds = len(settings.get("seeds", ()))
    cost = seeds * float(settings.get("cell_cost", 0.0))
    return (f"one more k costs {seeds} cells, ~{cost:,.0f} core-s: add it to `ks` in a copy "
            f"of {suite}.toml in a folder DIR and run `tokengeo reproduce` with this run's "
            f"mode and `--only {suite} --config-dir DIR`")


def finding(suite: str, text: str, readings: list[Claim], **fields) -> Claim:
    """One tallied row for one claim of the paper: an ``any`` family over its pre-specified
    readings (each labelled; a reading may itself be a family). The paper's "Laplacian heads
    do X" holds when some reading holds after Holm's adjustment across the readings, and
    fails when every reading fails (:mod:`tokengeo.experiments.claims`). A reading that did
    not run while others did is left out and named in the detail (a missing reading tests
    nothing); when none ran, the finding is not run."""
    ran = [r for r in readings if not r.verdict.startswith("not run")]
    left = [r for r in readings if r not in ran] if ran else []
    if fields.get("primary") not in {r.label for r in ran or readings}:
        fields.pop("primary", None)  # the paper's setting did not run: no primary reading
    out = family(suite, text, ran or readings, rule="any", **fields)
    if left:
        out.detail = " ".join([out.detail, "Left out (not run): " + "; ".join(
            f"{r.label}: {r.verdict.removeprefix('not run: ')}" for r in left) + "."]).strip()
    return out


def k_finding(suite: str, res: SweepResults, settings: dict, m: KMetric, blocks: bool = False,
              **fields) -> Claim:
    """One finding per metric (``m.text``), paired by seed with k = 0, at the final layer:
    its readings (members, rule "any") are

    1. ``k=H``: k = H (all heads Laplacian, the paper's headline setting) against k = 0,
       with the paper's effect when it gives one;
    2. ``some k<H``: an "any" family over every k with 0 < k < H (k = H // 2 among them);
    3. ``monotone over k``: every step between consecutive ks in the paper's direction
       (:func:`monotone_claim`);
    4. with ``blocks``, ``every block at k=H``: the "all" family over the blocks'
       outputs (:func:`layer_claim`).

    ``fields``: further :class:`Claim` fields of every claim (kind, proxy). The row
    carries ``m.catalogue`` (the paper's claim it tests; a metric without one makes a
    ``new`` row) and reads ``k=H``, the paper's setting, as its primary reading: an
    inconclusive row whose k = H reading is significantly opposite is
    :data:`~tokengeo.experiments.stats.CONTRADICTED`."""
    heads, half = headline_ks(settings)
    ks = sorted(settings["ks"])
    readings = [_difference(suite, res, m, heads,
                            f"{k_label(heads)} (all heads Laplacian): {m.text}",
                            paper_effect=m.paper_effect, label=AT_H, **fields)]
    between = [k for k in ks if 0 < k < heads]
    members = [_difference(suite, res, m, k, f"{k_label(k)}: {m.text}", **fields)
               for k in between]
    readings.append(family(suite, f"{m.text}, at k < H (some of k = "
                           f"{', '.join(map(str, between))}; H/2 = {half})", members,
                           rule="any", label=BELOW_H))
    readings.append(monotone_claim(suite, res, f"{m.text} at every step of k = "
                                   f"{', '.join(map(str, ks))} (monotone)", m.source, m.paper,
                                   {k: k_label(k) for k in ks}, m.name, m.get, m.higher,
                                   discrete=m.discrete, ratio=m.ratio,
                                   how=more_k_hint(suite, settings), **fields))
    if blocks:
        readings.append(layer_claim(suite, res, settings, m, label=EVERY_BLOCK, **fields))
    return finding(suite, m.text, readings, paper_effect=m.paper_effect, primary=AT_H,
                   catalogue=m.catalogue,
                   kind=fields.get("kind", "paper") if m.catalogue else "new")


def layer_claim(suite: str, res: SweepResults, settings: dict, m: KMetric,
                k: int | None = None, rule: str = "all", label: str = "", **fields) -> Claim:
    """A family over the blocks of the model: ``m`` of block l's output at k (default H)
    against k = 0, one member per block, paired by seed (the paper's geometry figures are
    per layer). Rule "all": the effect holds after every block."""
    if m.geometry_key is None:
        raise ValueError(f"metric {m.name!r} has no per-layer value (geometry_key)")
    k = headline_ks(settings)[0] if k is None else k
    members = [_difference(suite, res, m, k, f"{k_label(k)}, block {layer + 1}: {m.text}",
                           get=layer_metric(m.geometry_key, layer),
                           name=f"{m.name} (block {layer + 1})", label=f"block {layer + 1}",
                           **fields)
               for layer in range(depth(settings))]
    where = "after every block" if rule == "all" else "after some block"
    return family(suite, f"{k_label(k)}: {m.text}, {where} (per layer)", members, rule=rule,
                  label=label)


def layer_table(res: SweepResults, settings: dict, name: str, key: str) -> tuple:
    """Rows: block; columns: k; cells: mean ± std over seeds of geometry ``key``."""
    ks = sorted(settings["ks"])
    rows = []
    for layer in range(depth(settings)):
        row = [f"block {layer + 1}"]
        for k in ks:
            iv = mean_interval(res.values(k_label(k), layer_metric(key, layer)))
            row.append(f"{iv.mean:.4g} ± {iv.std:.2g}")
        rows.append(row)
    return (f"{name} after each block, by k (mean ± std over seeds)",
            ["block", *(k_label(k) for k in ks)], rows)


def layer_figure(path: Path, settings: dict, res: SweepResults, key: str, ylabel: str,
                 title: str) -> Path:
    """A figure of geometry ``key`` against the block, one line per k."""
    ks = sorted(settings["ks"])
    layers = range(depth(settings))
    return line_figure(path, [layer + 1 for layer in layers],
                       {k_label(k): [res.values(k_label(k), layer_metric(key, layer))
                                   for layer in layers] for k in ks},
                       "block (residual stream after it)", ylabel, title)


# ---- learning curves (cells with ``curve_every``: metrics and geometry along training)


def curve_steps(res: SweepResults) -> list[int]:
    """The steps of the learning curve (those of the first cell)."""
    first = res.typed(res.labels[0], res.seeds[0])
    return [p["step"] for p in first.curve or ()]


def curve_table(res: SweepResults, settings: dict, columns: dict[str, tuple[str, str]]) -> tuple:
    """Rows: (k, step); columns: mean ± std over seeds of each (where, key) of the curve."""
    rows = []
    for k in sorted(settings["ks"]):
        for step in curve_steps(res):
            row = [k_label(k), str(step)]
            for where, key in columns.values():
                iv = mean_interval(res.values(k_label(k), curve_value(step, where, key)))
                row.append(f"{iv.mean:.4g} ± {iv.std:.2g}")
            rows.append(row)
    return ("along training, by k (mean ± std over seeds)", ["setting", "step", *columns], rows)


def curve_figure(path: Path, settings: dict, res: SweepResults, where: str, key: str,
                 ylabel: str, title: str) -> Path:
    """``key`` of the learning curve against the step, one line per k."""
    steps = curve_steps(res)
    return line_figure(path, steps,
                       {k_label(k): [res.values(k_label(k), curve_value(s, where, key))
                                   for s in steps] for k in sorted(settings["ks"])},
                       "training step", ylabel, title)
