"""Helpers for suites that train one model over settings × seeds and compare settings."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

from tokengeo.experiments.cells import Cell, CellResult
from tokengeo.experiments.claims import Claim
from tokengeo.experiments.stats import Region, log_ratio, mean_interval, paired_difference
from tokengeo.experiments.training import TRAIN_FIELDS, train_cell


def training_cells(suite: str, settings: dict, variants: dict[str, dict],
                   geometry: str | None, fields: tuple[str, ...] = ()) -> list[Cell]:
    """One cell per (variant, seed); ``variants`` maps a label to TrainConfig overrides.

    ``fields``: further (dotted) result fields the suite reads; a cached cell without them
    is recomputed (its training run resumes at its final checkpoint)."""
    runs = Path(settings["_out_dir"]) / "runs" / suite
    base = dict(settings["train"])
    fields = TRAIN_FIELDS + (("geometry",) if geometry is not None else ()) + tuple(fields)
    cost = float(settings.get("cell_cost", 1.0))  # ~1-thread CPU s of one run: long ones first
    cells = []
    for label, overrides in variants.items():
        for seed in settings["seeds"]:
            cfg = {**base, **overrides, "seed": seed}
            run = f"{label}-s{seed}-{config_digest(cfg)}"  # edited settings: a new run
            cells.append(Cell(suite, f"{label}-s{seed}", train_cell,
                              {"run_dir": str(runs / run), "config": cfg,
                               "geometry": geometry,
                               "geometry_split": settings.get("geometry_split", "test"),
                               "geometry_examples": settings.get("geometry_examples", 1000)},
                              label=f"{label}, seed {seed}", fields=fields, cost=cost))
    return cells


def k_variants(ks: list[int]) -> dict[str, dict]:
    """One training variant per number k of Laplacian heads per layer."""
    return {f"k={k}": {"n_laplacian": k} for k in ks}


def geometry_metric(key: str) -> Callable[[dict], float]:
    """Getter of a token-geometry number from a training cell's result."""
    return lambda v: v["geometry"][key]


def config_digest(cfg: dict) -> str:
    return hashlib.sha256(json.dumps(cfg, sort_keys=True).encode()).hexdigest()[:8]


class SweepResults:
    """Per-variant lists over seeds of any metric, and the first reason a cell did not run."""

    def __init__(self, results: dict[str, CellResult], labels: list[str], seeds: list[int]):
        self.results, self.labels, self.seeds = results, labels, seeds

    def not_run(self) -> str | None:
        return next((r.not_run for r in self.results.values() if r.not_run), None)

    def values(self, label: str, get: Callable[[dict], float]) -> list[float]:
        return [float(get(self.results[f"{label}-s{s}"].value)) for s in self.seeds]


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


def model_label(train: dict) -> str:
    """The trained model as a figure title names it: its registry name and the overrides
    that change it (``vit-tiny (d_model=32, patch_size=7)``), so no title names a model
    that was not trained."""
    over = ", ".join(f"{k}={v}" for k, v in sorted(train.get("model_overrides", {}).items()))
    return f"{train.get('model', '—')} ({over})" if over else str(train.get("model", "—"))


def metric_table(sweep: SweepResults, columns: dict[str, Callable[[dict], float]],
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
