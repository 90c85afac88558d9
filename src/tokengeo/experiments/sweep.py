"""Sweeps: one cell function over variants × seeds, with typed results, and the claims and
tables that compare variants paired by seed."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokengeo.experiments.cells import Cell, CellResult
from tokengeo.experiments.claims import Claim
from tokengeo.experiments.stats import Region, log_ratio, mean_interval, paired_difference
from tokengeo.experiments.suite import SuiteContext
from tokengeo.experiments.training import TRAIN_FIELDS, train_cell


@dataclass(frozen=True)
class TrainResult:
    """What :func:`~tokengeo.experiments.training.train_cell` returns, typed."""

    final: dict[str, dict[str, float]]  # split -> metric -> value
    parameters: dict[str, int]
    wall_time_s: float
    step: int
    geometry: dict[str, float] | None = None
    smoothing: list[dict] | None = None  # rows of tokengeo.probes.smoothing.head_smoothing
    curve: list[dict] | None = None  # {"step", "metrics", "geometry"} along training
    step_s: float | None = None  # median seconds of a training step (None: an older cell)
    peak_memory_bytes: int | None = None  # peak CUDA memory allocated (CUDA cells only)
    sublayers: list[dict] | None = None  # per attention sublayer: share_before, share_after

    @classmethod
    def from_value(cls, v: dict) -> TrainResult:
        return cls(v["final"], v.get("parameters", {}), float(v.get("wall_time_s", 0.0)),
                   int(v.get("step", 0)), v.get("geometry"), v.get("smoothing"),
                   v.get("curve"), v.get("step_s"), v.get("peak_memory_bytes"),
                   v.get("sublayer_smoothing"))

    def metric(self, split: str, name: str) -> float:
        return float(self.final[split][name])


@dataclass(frozen=True)
class Sweep:
    """Variants × seeds of one cell function; every cell key is built here, once.

    ``variants`` maps a label to the overrides of the base config; ``cell(label, seed,
    config) -> (fn, kwargs)`` makes a cell's work (default: a training run in the suite's
    run folder); ``parse`` turns a cell's stored value into the typed result the suite
    reads (default :class:`TrainResult`)."""

    suite: str
    variants: dict[str, dict]
    seeds: tuple[int, ...]
    base: dict
    fields: tuple[str, ...] = ()
    cost: float = 1.0
    parse: Callable[[dict], Any] = TrainResult.from_value
    what: str = ""  # the cells' label prefix ("DINO", "retrofit")

    def key(self, label: str, seed: int) -> str:
        return f"{label}-s{seed}"

    def config(self, label: str, seed: int) -> dict:
        return {**self.base, **self.variants[label], "seed": seed}

    def cells(self, make: Callable[[str, int, dict], tuple]) -> list[Cell]:
        """One cell per (variant, seed): ``make(label, seed, config)`` gives ``(fn, kwargs)``
        or ``(fn, kwargs, fields, cost)`` where variants differ in what they return."""
        out = []
        for label in self.variants:
            for seed in self.seeds:
                fn, kwargs, *more = make(label, seed, self.config(label, seed))
                fields, cost = more if more else (self.fields, self.cost)
                name = f"{self.what} {label}".strip()
                out.append(Cell(self.suite, self.key(label, seed), fn, kwargs,
                                label=f"{name}, seed {seed}", fields=fields, cost=cost,
                                on_device="run_dir" in kwargs))  # a training run
        return out

    def results(self, results: dict[str, CellResult], skipped: str | None = None,
                labels: list[str] | None = None) -> SweepResults:
        return SweepResults(self, results, labels or list(self.variants), skipped)


def run_folder(ctx: SuiteContext, suite: str, label: str, seed: int, cfg: dict) -> str:
    """A training run's folder: edited settings give a new folder (a digest of the config)."""
    return str(ctx.runs(suite) / f"{label}-s{seed}-{config_digest(cfg)}")


def training_sweep(suite: str, settings: dict, variants: dict[str, dict],
                   geometry: str | None, fields: tuple[str, ...] = (),
                   train: dict | None = None) -> Sweep:
    """A sweep of :func:`train_cell` over ``variants`` × the settings' seeds; ``fields``:
    further (dotted) result fields the suite reads (a cached cell without them is
    recomputed, its run resuming at its final checkpoint)."""
    fields = TRAIN_FIELDS + (("geometry",) if geometry is not None else ()) + tuple(fields)
    return Sweep(suite, variants, tuple(settings["seeds"]),
                 dict(train if train is not None else settings["train"]), fields,
                 float(settings.get("cell_cost", 1.0)))  # ~1-thread CPU s: long ones first


def training_cells(sweep: Sweep, settings: dict, ctx: SuiteContext,
                   geometry: str | None, smoothing_examples: int = 0,
                   curve_every: int = 0) -> list[Cell]:
    """The sweep's cells, each training its config in its own run folder (under torchrun on
    ``gpus`` processes when the settings ask for more than one); ``smoothing_examples`` > 0:
    each also measures its heads' smoothing signs
    (:func:`~tokengeo.experiments.training.smoothing_fields`); ``curve_every`` > 0: each
    records a learning curve of metrics and geometry every that many steps."""
    gpus = settings.get("gpus", 1)

    def make(label: str, seed: int, cfg: dict):
        kwargs = {"run_dir": run_folder(ctx, sweep.suite, label, seed, cfg), "config": cfg,
                  "geometry": geometry,
                  "geometry_split": settings.get("geometry_split", "test"),
                  "geometry_examples": settings.get("geometry_examples", 1000)}
        if smoothing_examples:
            kwargs["smoothing_examples"] = smoothing_examples
        if curve_every:
            kwargs["curve_every"] = curve_every
        return train_cell, {**kwargs, **({"processes": gpus} if gpus > 1 else {})}
    return sweep.cells(make)


def k_label(k: int) -> str:
    """The label of the variant with k Laplacian heads per layer, ``"k=3"``: its cells, table
    columns, figure legends and claims all name it so."""
    return f"k={k}"


def k_variants(ks: list[int]) -> dict[str, dict]:
    """One training variant per number k of Laplacian heads per layer."""
    return {k_label(k): {"n_laplacian": k} for k in ks}


def geometry_metric(key: str) -> Callable[[TrainResult], float]:
    """Getter of a token-geometry number from a training cell's result."""
    return lambda r: r.geometry[key]


def config_digest(cfg: dict) -> str:
    return hashlib.sha256(json.dumps(cfg, sort_keys=True).encode()).hexdigest()[:8]


class SweepResults:
    """Per-variant lists over seeds of any metric of the typed results, and the first
    reason a cell did not run (the suite skipped, a cell missing or not run)."""

    def __init__(self, sweep: Sweep, results: dict[str, CellResult], labels: list[str],
                 skipped: str | None = None):
        self.sweep, self.results, self.labels, self.skipped = sweep, results, labels, skipped
        self.seeds = list(sweep.seeds)

    def not_run(self) -> str | None:
        if self.skipped:
            return self.skipped
        for label in self.labels:
            for seed in self.seeds:
                r = self.results.get(self.sweep.key(label, seed))
                if r is None:
                    return f"cell {self.sweep.key(label, seed)} missing"
                if r.not_run:
                    return r.not_run
        return None

    def typed(self, label: str, seed: int):
        return self.sweep.parse(self.results[self.sweep.key(label, seed)].value)

    def values(self, label: str, get: Callable[[Any], float]) -> list[float]:
        return [float(get(self.typed(label, s))) for s in self.seeds]

    def raw(self, label: str, seed: int) -> dict:
        return self.results[self.sweep.key(label, seed)].value


def difference_claim(suite: str, sweep: SweepResults, text: str, source: str, paper: str,
                     treated: str, baseline: str, metric: str, get: Callable[[dict], float],
                     higher: bool, discrete: bool = False, ratio: bool = False,
                     **fields) -> Claim:
    """Claim that ``metric`` is higher (or lower) for ``treated`` than ``baseline``, paired
    by seed: a difference (the exact sign-flip test when ``discrete``), or with ``ratio`` a
    log ratio shown as a ratio. ``fields``: further :class:`Claim` fields (kind, proxy,
    paper_effect, label)."""
    if ratio:
        region = Region.ratio_above(1.0) if higher else Region.ratio_below(1.0)
        quantity = f"{metric}({treated}) / {metric}({baseline}), paired by seed"
    else:
        region = Region.above(0.0) if higher else Region.below(0.0)
        quantity = f"{metric}({treated}) − {metric}({baseline}), paired by seed"
    claim = Claim(suite, text, source, paper, quantity, region, **fields)
    missing = sweep.not_run()
    if missing:
        claim.not_run = missing
        return claim
    t, b = sweep.values(treated, get), sweep.values(baseline, get)
    claim.measured = log_ratio(t, b) if ratio else paired_difference(t, b, discrete)
    claim.detail = (f"{metric}: {treated} {mean_interval(t).fmt(4)}, "
                    f"{baseline} {mean_interval(b).fmt(4)}")
    return claim


def trend_claim(suite: str, sweep: SweepResults, text: str, source: str, paper: str,
                labels_by_k: dict[float, str], metric: str, get: Callable[[Any], float],
                higher: bool, variable: str = "k", **fields) -> Claim:
    """Claim that ``metric`` rises (``higher``) or falls with k over the variants
    ``labels_by_k`` {k: label}, every seed at every k: judged on the interval of the mean
    per-seed least-squares slope (:func:`~tokengeo.experiments.trend.trend_over_k`), with
    Page's monotone-trend test in the detail. The keys may be any numbers (a path
    parameter t in [0, 1]); ``variable`` names them in the text. ``fields``: further
    :class:`Claim` fields."""
    from tokengeo.experiments.trend import trend_over_k

    region = Region.above(0.0) if higher else Region.below(0.0)
    ks = sorted(labels_by_k)
    quantity = (f"slope of {metric} on {variable} (least squares per seed, {variable} = "
                f"{', '.join(f'{k:g}' for k in ks)}), mean over seeds")
    claim = Claim(suite, text, source, paper, quantity, region, **fields)
    missing = sweep.not_run()
    if missing:
        claim.not_run = missing
        return claim
    trend = trend_over_k({k: sweep.values(labels_by_k[k], get) for k in ks})
    claim.measured = mean_interval(list(trend.slopes))
    p_dir = trend.p_increasing if higher else trend.p_decreasing
    word = "increasing" if higher else "decreasing"
    claim.detail = (f"{metric} per {variable}: " + ", ".join(
        f"{k:g}: {mean_interval(sweep.values(labels_by_k[k], get)).mean:.4g}" for k in ks)
        + f"; Page's L = {trend.page_l:g}, one-sided p ({word}) = {p_dir:.3g} "
        f"({trend.method})")
    return claim


def model_label(train: dict) -> str:
    """The trained model as a figure title names it: its registry name and the overrides
    that change it (``vit-tiny (d_model=32, patch_size=7)``), so no title names a model
    that was not trained."""
    over = ", ".join(f"{k}={v}" for k, v in sorted(train.get("model_overrides", {}).items()))
    return f"{train.get('model', '—')} ({over})" if over else str(train.get("model", "—"))


def device_columns(sweep: SweepResults) -> dict[str, Callable[[Any], float]]:
    """Columns of step time and peak CUDA memory, each where every cell recorded it."""
    typed = [sweep.typed(lab, s) for lab in sweep.labels for s in sweep.seeds]
    out: dict[str, Callable[[Any], float]] = {}
    if typed and all(r.step_s is not None for r in typed):
        out["step ms"] = lambda r: 1e3 * r.step_s
    if typed and all(r.peak_memory_bytes is not None for r in typed):
        out["peak CUDA MB"] = lambda r: r.peak_memory_bytes / 2**20
    return out


def metric_table(sweep: SweepResults, columns: dict[str, Callable[[Any], float]],
                 digits: int = 4) -> tuple[list[str], list[list[str]]]:
    """Rows: variant; columns: mean ± std over seeds of each metric."""
    header = ["setting", *columns]
    rows = []
    for label in sweep.labels:
        row = [label]
        for get in columns.values():
            iv = mean_interval(sweep.values(label, get))
            row.append(f"{iv.mean:.{digits}g} ± {iv.std:.2g}")
        rows.append(row)
    return header, rows


def line_plot(xs: list[int], series: dict[str, list[list[float]]], xlabel: str, ylabel: str,
              title: str):
    """Figure: mean over seeds of each series against integer ``xs`` (k, H), error bars
    ± one sample std over seeds (stated in the legend's title)."""
    from tokengeo.plotting import MIN_FONT_PT, integer_ticks, new_figure

    fig, axes = new_figure(5.5, 3.8)
    ax = axes[0, 0]
    n_seeds = set()
    for name, per_x in series.items():
        means = [sum(v) / len(v) for v in per_x]
        stds = [(sum((x - m) ** 2 for x in v) / max(len(v) - 1, 1)) ** 0.5
                for v, m in zip(per_x, means, strict=True)]
        n_seeds.update(len(v) for v in per_x)
        ax.errorbar(xs, means, yerr=stds, marker="o", capsize=3, label=name)
    integer_ticks(ax.xaxis)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    n = "/".join(str(k) for k in sorted(n_seeds))
    ax.legend(fontsize=MIN_FONT_PT, title=f"mean, bars ± std over {n} seeds",
              title_fontsize=MIN_FONT_PT)
    return fig


def line_figure(path: Path, xs: list[int], series: dict[str, list[list[float]]],
                xlabel: str, ylabel: str, title: str) -> Path:
    """Write :func:`line_plot` as PNG at ``path``."""
    from tokengeo.plotting import save_figure

    return save_figure(line_plot(xs, series, xlabel, ylabel, title), path)
