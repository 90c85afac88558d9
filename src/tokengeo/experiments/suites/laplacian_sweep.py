"""The sweep both Laplacian-heads suites share: a model trained with k of H heads Laplacian in
every layer, k in the settings' list, several seeds; its settings schema, cells and the
per-k table and figure. ``laplacian_images`` and ``laplacian_language`` add their task's
claims (Zhang & Papyan, arXiv 2602.09297)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tokengeo.experiments.cells import Cell, CellResult
from tokengeo.experiments.settings import Setting, train_table
from tokengeo.experiments.suite import SuiteContext
from tokengeo.experiments.sweep import (
    Sweep,
    SweepResults,
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
}
PAPER = ("Zhang & Papyan, \"Laplacian Heads Improve Transformers by Smoothing Token "
         "Representations\", arXiv 2602.09297")
PAPER_KEY = "Zhang & Papyan (Laplacian heads)"


def labels(settings: dict) -> list[str]:
    return [f"k={k}" for k in settings["ks"]]


def sweep(suite: str, settings: dict, geometry: str, fields: tuple[str, ...] = ()) -> Sweep:
    return training_sweep(suite, settings, k_variants(settings["ks"]), geometry, fields)


def cells(suite: str, settings: dict, ctx: SuiteContext, geometry: str,
          fields: tuple[str, ...] = ()) -> list[Cell]:
    return training_cells(sweep(suite, settings, geometry, fields), settings, ctx, geometry)


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
