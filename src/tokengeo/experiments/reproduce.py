"""``tokengeo reproduce``: run the declarative suites and write the report.

Each suite is a module with ``TITLE``, ``PAPER``, ``cells(settings) -> list[Cell]`` and
``summarise(settings, results, fig_dir) -> SuiteOutput``; its settings are the ``[quick]``
or ``[full]`` table of ``suites/<name>.toml`` (copy the folder and pass ``--config-dir`` to
edit them). Finished cells are cached under ``OUT/cells`` and never recomputed.
"""

from __future__ import annotations

import importlib
import sys
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

from tokengeo.errors import ConfigError
from tokengeo.experiments.cells import CellResult, CellStore
from tokengeo.experiments.report import SuiteOutput, summary_rows, text_table, write_report

# name -> module (in run order); each has a settings file suites/<name>.toml
SUITES: dict[str, str] = {
    "laplacian-images": "tokengeo.experiments.suites.laplacian_images",
    "laplacian-language": "tokengeo.experiments.suites.laplacian_language",
    "ltransformer": "tokengeo.experiments.suites.ltransformer",
    "flows": "tokengeo.experiments.suites.flows",
    "similarity": "tokengeo.experiments.suites.similarity",
    "dino": "tokengeo.experiments.suites.dino",
}
BUILTIN_CONFIG_DIR = Path(__file__).parent / "suites"


@dataclass
class ReproduceConfig:
    out: Path
    mode: str = "quick"  # quick | full
    only: tuple[str, ...] = ()
    config_dir: Path = BUILTIN_CONFIG_DIR

    def suites(self) -> list[str]:
        if self.mode not in ("quick", "full"):
            raise ConfigError(f"mode={self.mode!r}; choose 'quick' or 'full'")
        unknown = [s for s in self.only if s not in SUITES]
        if unknown:
            raise ConfigError(f"unknown suite(s) {unknown}; available: {list(SUITES)}")
        return list(self.only) or list(SUITES)


def load_settings(config_dir: Path, suite: str, mode: str) -> dict:
    path = Path(config_dir) / f"{suite}.toml"
    if not path.exists():
        raise ConfigError(f"suite config {path} not found; copy {BUILTIN_CONFIG_DIR} and edit it")
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from None
    if mode not in data:
        raise ConfigError(f"{path} has no [{mode}] table")
    return {**data.get("common", {}), **data[mode]}


def run_suite(name: str, cfg: ReproduceConfig, store: CellStore, log) -> SuiteOutput:
    module = importlib.import_module(SUITES[name])
    settings = load_settings(cfg.config_dir, name, cfg.mode)
    fig_dir = cfg.out / "figures" / name
    fig_dir.mkdir(parents=True, exist_ok=True)
    settings["_figure_dir"] = str(fig_dir)
    settings["_out_dir"] = str(cfg.out)
    cells = module.cells(settings)
    results: dict[str, CellResult] = {}
    for i, cell in enumerate(cells, 1):
        t0 = time.perf_counter()
        res = store.run(cell)
        how = ("cached" if res.cached else f"not run: {res.not_run}" if res.not_run
               else f"{time.perf_counter() - t0:.1f} s")
        log(f"[{name} {i}/{len(cells)}] {cell.label or cell.key}: {how}")
        results[cell.key] = res
    return module.summarise(settings, results, fig_dir)


def reproduce(cfg: ReproduceConfig, log=None) -> tuple[Path, list[SuiteOutput]]:
    """Run the chosen suites, write ``report.html`` / ``report.md``; return (path, outputs)."""
    log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    names = cfg.suites()
    cfg.out.mkdir(parents=True, exist_ok=True)
    store = CellStore(cfg.out)
    outputs = [run_suite(n, cfg, store, log) for n in names]
    preamble = [
        f"Mode: {cfg.mode}. Suites: {', '.join(names)}. Intervals are 95% Student-t intervals "
        "over seeds or Monte Carlo paths; each verdict follows the rule written under its claim.",
        "Laptop scale: small models, offline stand-in data sets; honest negatives are results.",
    ]
    path = write_report(cfg.out, outputs, "tokengeo reproduction report", preamble)
    return path, outputs


def summary_text(outputs: list[SuiteOutput]) -> str:
    from tokengeo.experiments.report import SUMMARY_HEADER

    return text_table(SUMMARY_HEADER, summary_rows(outputs))
