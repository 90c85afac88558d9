"""``tokengeo reproduce``: run the declarative suites and write the report.

Each suite is a :class:`~tokengeo.experiments.suite.Suite` (``SUITE`` in its module: the
settings schema, ``cells(settings, ctx)``, ``summarise(settings, results, ctx)``); its
settings are the ``[quick]``, ``[full]`` or ``[paper]`` table of ``suites/<name>.toml`` (copy
the folder and pass ``--config-dir`` to edit them); ``[paper]`` holds the papers' sizes, with
``${NAME}`` placeholders for the data and models the user supplies
(:mod:`tokengeo.experiments.user_data`). Every suite's settings are checked against its
schema before any folder is created, and then cross-checked as a whole
(:mod:`tokengeo.experiments.validation`). Finished cells are cached under ``OUT/cells`` and
never recomputed. :func:`dry_run` lists a mode's cells and their estimated cost instead.
"""

from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

from tokengeo.checks import check_output_folder, is_whole
from tokengeo.errors import ConfigError
from tokengeo.experiments.cells import Cell, CellResult, CellStore
from tokengeo.experiments.decidability import check_decidable
from tokengeo.experiments.executors import ExecutorConfig, run_cells, write_files
from tokengeo.experiments.placement import (
    DeviceConfig,
    check_devices,
    check_gpu_share,
    check_share,
    place_all,
    visible_gpus,
    where_ran,
)
from tokengeo.experiments.progress import CellProgress
from tokengeo.experiments.report import SuiteOutput, text_table, write_report
from tokengeo.experiments.run_record import RunMeter, read_segments, run_object
from tokengeo.experiments.settings import check_settings
from tokengeo.experiments.suite import SKIP, Suite, SuiteContext
from tokengeo.experiments.summary import source_commit
from tokengeo.experiments.user_data import FLAG, Unresolved, fill_paths, placeholder_names
from tokengeo.experiments.validation import cell_value_problem, check_only, check_suite
from tokengeo.io import read_toml, write_bytes
from tokengeo.outfolder import output_folder

# name -> module (in run order); each has a settings file suites/<name>.toml
SUITES: dict[str, str] = {
    "laplacian-images": "tokengeo.experiments.suites.laplacian_images",
    "laplacian-language": "tokengeo.experiments.suites.laplacian_language",
    "laplacian-mechanism": "tokengeo.experiments.suites.laplacian_mechanism",
    "ltransformer": "tokengeo.experiments.suites.ltransformer",
    "flows": "tokengeo.experiments.suites.flows",
    "similarity": "tokengeo.experiments.suites.similarity",
    "dino": "tokengeo.experiments.suites.dino",
    "retrofit": "tokengeo.experiments.suites.retrofit",
}
BUILTIN_CONFIG_DIR = Path(__file__).parent / "suites"


# paper: the papers' sizes, on data the user supplies; gpu: sized for one GPU
MODES = ("quick", "full", "paper", "gpu")


@dataclass
class ReproduceConfig:
    out: Path
    mode: str = "quick"  # one of MODES
    only: tuple[str, ...] = ()
    config_dir: Path = BUILTIN_CONFIG_DIR
    data_paths: dict[str, str] = field(default_factory=dict)  # placeholder name -> path
    devices: DeviceConfig = field(default_factory=DeviceConfig)  # --device, --gpus-per-cell
    seed: int = 0  # --seed: added to every seed the suites' settings name (shift_seeds)
    rejudge: bool = False  # --rejudge: compute no cell, judge the stored ones

    def suites(self) -> list[str]:
        if self.mode not in MODES:
            raise ConfigError(f"mode={self.mode!r}; choose one of {list(MODES)}")
        check_only(self.only)
        unknown = [s for s in self.only if s not in SUITES]
        if unknown:
            raise ConfigError(f"unknown suite(s) {unknown}; available: {list(SUITES)}")
        return list(self.only) or list(SUITES)


TABLES = ("common", *MODES)


def load_settings(config_dir: Path, suite: str, mode: str) -> dict:
    """The ``[common]`` table merged with the ``[mode]`` table of ``<suite>.toml``; a mode
    table that holds only ``skip = "reason"`` takes the ``[full]`` table's settings (the
    skipped suite's report still names its model and data)."""
    folder = Path(config_dir)
    if not folder.is_dir():
        what = "is a file" if folder.exists() else "not found"
        raise ConfigError(f"--config-dir {folder} {what}; give a folder of suite TOML files "
                          f"(copy {BUILTIN_CONFIG_DIR})")
    path = folder / f"{suite}.toml"
    if not path.exists():
        raise ConfigError(f"suite config {path} not found; copy {BUILTIN_CONFIG_DIR} and edit it")
    data = read_toml(path, f"suite config {path}")
    unknown = sorted(set(data) - set(TABLES))
    if unknown:
        raise ConfigError(f"{path}: unknown table(s) {unknown}; a suite file holds only "
                          f"{['[' + t + ']' for t in TABLES]}")
    if mode not in data:
        raise ConfigError(f"{path} has no [{mode}] table; add one (copy {BUILTIN_CONFIG_DIR} "
                          "and pass --config-dir) or leave this suite out with --only")
    if not all(isinstance(data.get(t, {}), dict) for t in TABLES):
        raise ConfigError(f"{path}: {list(TABLES)} must be tables")
    table = data[mode]
    if set(table) == {SKIP} and "full" in data:  # skipped: [full]'s settings for the report
        table = {**data["full"], **table}
    return {**data.get("common", {}), **table}


@dataclass
class SuitePlan:
    """One suite's settings, context and cells, before anything runs."""

    name: str
    suite: Suite
    settings: dict
    ctx: SuiteContext
    cells: list[Cell]
    unresolved: list[Unresolved] = field(default_factory=list)  # placeholders (dry run)

    @property
    def fig_dir(self) -> Path:
        return self.ctx.figure_dir

    def summarise(self, results: dict[str, CellResult]) -> SuiteOutput:
        return self.suite.summarise(self.settings, results, self.ctx)


def suite_of(name: str) -> Suite:
    """The :class:`Suite` that suite ``name``'s module (``SUITES[name]``) defines as ``SUITE``."""
    module = importlib.import_module(SUITES[name])
    suite = getattr(module, "SUITE", None)
    if not isinstance(suite, Suite):
        raise TypeError(f"suite module {module.__name__} defines no SUITE; define SUITE = "
                        "tokengeo.experiments.suite.Suite(name, title, paper, settings, "
                        "cells, summarise) with cells(settings, ctx) and "
                        "summarise(settings, results, ctx)")
    return suite


def plan_suite(name: str, cfg: ReproduceConfig, paths_required: bool = True,
               kind: str = "cpu") -> SuitePlan:
    """``name``'s settings, checked, and its cells placed on device ``kind``
    (:func:`~tokengeo.experiments.placement.place`); ``${NAME}`` placeholders are filled
    from ``cfg.data_paths`` (an unresolved one is refused unless not ``paths_required``)."""
    suite = suite_of(name)
    where = Path(cfg.config_dir) / f"{name}.toml"
    settings = shift_seeds(load_settings(cfg.config_dir, name, cfg.mode), cfg.seed)
    settings, unresolved = fill_paths(name, where, settings, cfg.data_paths, paths_required)
    check_settings(name, where, settings, suite.schema)
    check_suite(suite, where, settings)  # as a whole
    check_decidable(suite, str(where), settings)  # every claim's test can decide
    ctx = SuiteContext.under(cfg.out, name, settings)
    cells = place_all(suite.plan(settings, ctx), kind, _share(where, settings))
    return SuitePlan(name, suite, settings, ctx, cells, unresolved)


def shift_seeds(settings: dict, offset: int) -> dict:
    """``settings`` with ``offset`` added to every ``seed = N`` and every element of every
    ``seeds = [...]`` at any depth (``--seed``: an independent replicate of the run whose
    cells, keyed by their settings, never mix with the default seeds' cached cells). A
    suite whose settings name no seed (flows, similarity: their draws are fixed by the
    papers' set-ups) is unchanged."""
    if not offset:
        return settings

    def shift(key: str, value):
        if isinstance(value, dict):
            return {k: shift(k, v) for k, v in value.items()}
        if key == "seed" and is_whole(value):
            return value + offset
        if key == "seeds" and isinstance(value, list) and all(map(is_whole, value)):
            return [v + offset for v in value]
        return value

    return {k: shift(k, v) for k, v in settings.items()}


def _share(where: Path, settings: dict) -> float | None:
    """The suite's ``gpus_per_cell`` (what its CUDA cells ask Ray for), checked."""
    if "gpus_per_cell" not in settings:
        return None
    try:
        return check_share(settings["gpus_per_cell"])
    except ConfigError as exc:
        raise ConfigError(f"{where}: {str(exc).replace('--gpus-per-cell', 'gpus_per_cell =')}"
                          ) from None


def plan_all(cfg: ReproduceConfig, paths_required: bool = True,
             kind: str = "cpu") -> list[SuitePlan]:
    """Every chosen suite planned (all settings checked) before anything is written; a
    ``--data-path`` name that no chosen suite uses is refused (a misspelt one)."""
    names = cfg.suites()
    used: set[str] = set()
    for n in names:
        used |= placeholder_names(load_settings(cfg.config_dir, n, cfg.mode))
    unused = sorted(set(cfg.data_paths) - used)
    if unused:
        raise ConfigError(f"{FLAG} {unused[0]} is used by none of the chosen suites in "
                          f"--{cfg.mode} mode; they need {sorted(used) or 'no paths'}")
    return [plan_suite(n, cfg, paths_required, kind) for n in names]


def dry_run(cfg: ReproduceConfig, jobs: int, out=print,
            executor: ExecutorConfig | None = None) -> list:
    """Print the mode's cells per suite and their estimated cost (core-hours here); run
    nothing and write nothing (:mod:`tokengeo.experiments.dry_run`). ``executor``'s
    ``--gpus-per-cell`` is refused exactly as the run would refuse it."""
    from tokengeo.experiments.dry_run import dry_run_report

    cfg = replace(cfg, out=Path(cfg.out).resolve())  # cells hash paths relative to it
    gpus = visible_gpus()
    gpu_mode = cfg.mode == "gpu" and cfg.devices.device == "auto"  # planned for its GPU
    kind = "cuda" if gpu_mode else cfg.devices.kind(len(gpus), lenient=True)
    check_gpu_share(cfg.devices, kind, executor or ExecutorConfig("serial"))
    plans = plan_all(cfg, paths_required=False, kind=kind)
    return dry_run_report(cfg.mode, plans, CellStore(cfg.out), jobs, out, gpus=len(gpus))


NOT_STORED = ("not among the stored cells (--rejudge computes none: run without it to "
              "compute the cell)")


def compute_cells(cells: list[Cell], store: CellStore, executor: ExecutorConfig,
                  log, progress: bool | None = None, compute: bool = True,
                  meter: RunMeter | None = None) -> dict[tuple[str, str], CellResult]:
    """Every cell's result: cached ones read from disk, the rest run by ``executor`` (with
    ``compute`` false, reported as not run: :data:`NOT_STORED`).

    The driver saves each result as it arrives, so an interrupted run (Ctrl-C, a failing
    cell, a lost worker) resumes with only the missing cells. ``meter`` counts the cells to
    compute and those computed.
    """
    results: dict[tuple[str, str], CellResult] = {}
    todo = []
    for cell in cells:
        cached = store.load(cell, log)
        why = None if cached is None else cell_value_problem(cached, cell.fields)
        if why is not None:  # edited or damaged numbers: never trusted into the report
            log(f"[{cell.suite}] {cell.label or cell.key}: cached cell "
                f"{store.path(cell).name} {why}; recomputing")
            cached = None
        if cached is None:
            todo.append(cell)
        else:
            results[cell.suite, cell.key] = CellResult(cell.key, cached, cached=True)
    if len(todo) < len(cells):
        log(f"{len(cells) - len(todo)} of {len(cells)} cells read from {store.root}")
    if todo and not compute:
        log(f"{len(todo)} of {len(cells)} cells are not stored: reported as not run")
        results.update({(c.suite, c.key): CellResult(c.key, None, NOT_STORED) for c in todo})
        todo = []
    if todo:
        log(f"{len(todo)} of {len(cells)} cells to compute")
    if meter is not None:
        meter.cells_to_compute = len(todo)
    with CellProgress(len(todo), enabled=progress) as bar:
        for cell, outcome in run_cells(todo, executor):
            write_files(outcome.files, write_bytes)
            if outcome.not_run is None:
                store.save(cell, outcome.value, outcome.seconds)
                if meter is not None:
                    meter.cells_computed += 1
                    meter.checkpoint()
            results[cell.suite, cell.key] = CellResult(cell.key, outcome.value, outcome.not_run)
            how = f"not run: {outcome.not_run}" if outcome.not_run else f"{outcome.seconds:.1f} s"
            bar.done(f"[{cell.suite}] {cell.label or cell.key}: {how}", log)
    return results


def reproduce(cfg: ReproduceConfig, log=None, executor: ExecutorConfig | None = None,
              progress: bool | None = None) -> tuple[Path, list[SuiteOutput]]:
    """Run the chosen suites, write ``report.html`` / ``report.md``; return (path, outputs).

    ``executor`` says where cells run (default: serially in this process); the report does
    not depend on it. ``progress`` forces the cells' bar on or off (default: on a
    terminal outside CI).
    """
    log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    with RunMeter(cfg.mode, cfg.seed, source_commit()) as meter:  # the whole call
        executor = executor or ExecutorConfig("serial")
        executor.validate()
        cfg = replace(cfg, out=Path(cfg.out).resolve())  # cells hash paths relative to it
        names = cfg.suites()
        check_output_folder("--out", cfg.out)  # writable; the --out rule once settings pass
        kind, executor = place_executor(cfg.devices, executor, cfg.mode)
        plans = plan_all(cfg, kind=kind)  # every setting and supplied path checked first
        check_devices(cfg.devices, kind, [c for p in plans for c in p.cells], executor,
                      len(executor.gpus) if kind == "cuda" else 0)
        # new, empty, or a previous reproduce (resumed in place): locked and marked
        with output_folder(cfg.out, "reproduce", resume=True):
            if not cfg.rejudge:
                meter.attach(cfg.out)
            try:
                return _run(cfg, plans, names, executor, log, progress, meter)
            finally:
                _record(cfg, meter)


def _record(cfg: ReproduceConfig, meter: RunMeter) -> None:
    """Append this call's segment to OUT/run.json (once; interrupted calls too) when it
    had cells to compute."""
    if meter.recorded:
        return
    meter.end()
    meter.recorded = True
    meter.checkpoint()  # the segment as it ended


def _run(cfg: ReproduceConfig, plans: list[SuitePlan], names: list[str],
         executor: ExecutorConfig, log, progress: bool | None, meter: RunMeter
         ) -> tuple[Path, list[SuiteOutput]]:
    """Every cell computed (or read), the suites summarised, the report written."""
    for plan in plans:
        plan.fig_dir.mkdir(parents=True, exist_ok=True)
    store = CellStore(cfg.out)
    results = compute_cells([c for p in plans for c in p.cells], store, executor, log,
                            progress, compute=not cfg.rejudge, meter=meter)
    outputs = [p.summarise({c.key: results[p.name, c.key] for c in p.cells}) for p in plans]
    for plan, output in zip(plans, outputs, strict=True):
        line = where_ran(plan.cells, [results[plan.name, c.key].value for c in plan.cells])
        if line:
            output.notes.append(line)
    preamble = [
        f"Mode: {cfg.mode}. Suites: {', '.join(names)}. Intervals are 95% intervals over seeds, "
        "independent draws of inputs or Monte Carlo paths (Student-t; an exact sign-flip test "
        "for integer or tied measures; ratios on the log scale); each verdict follows the rule "
        "written under its claim. The tally counts the claims a paper makes (as stated or "
        "through a named stand-in); sanity checks and tokengeo's own questions are counted "
        "apart.",
        SCALE[cfg.mode],
    ]
    if cfg.seed:
        preamble.append(f"Seeds: every seed of the suites' settings shifted by {cfg.seed} "
                        f"(--seed {cfg.seed}).")
    from tokengeo.experiments.cell_times import cell_times

    times = cell_times({p.name: p.cells for p in plans}, store)
    meter.finished = True
    _record(cfg, meter)  # this call's time ends here: the report holds it
    run = run_object(read_segments(cfg.out), cfg.mode, cfg.seed)
    path = write_report(cfg.out, outputs, "tokengeo reproduction report", preamble,
                        mode=cfg.mode, cells=times, run=run)
    return path, outputs


SCALE = {  # the report's second preamble line, per mode
    "quick": "Laptop scale: small models, offline stand-in data sets; honest negatives are "
             "results.",
    "full": "Laptop scale: small models, offline stand-in data sets; honest negatives are "
            "results.",
    "paper": "The papers' sizes ([paper] tables), on the data and models supplied with "
             "--data-path; honest negatives are results.",
    "gpu": "GPU scale ([gpu] tables): models sized for one GPU, offline stand-in data sets; "
           "each suite's notes say where its cells ran; honest negatives are results.",
}


def place_executor(devices: DeviceConfig, executor: ExecutorConfig, mode: str = "quick"
                   ) -> tuple[str, ExecutorConfig]:
    """The device kind of this run (``--device``; CUDA without a GPU refused, except on a
    Ray cluster given by address, checked when it connects; ``--gpu`` never falls back to
    the CPU unasked) and the executor with the GPUs its local workers share and the share a
    Ray cell asks for."""
    gpus = visible_gpus()
    kind = devices.kind(len(gpus), lenient=executor.executor == "ray"
                        and executor.ray_address is not None)
    if mode == "gpu" and kind == "cpu" and devices.device == "auto":
        raise ConfigError("--gpu sizes its cells for a GPU and no CUDA device is visible here; "
                          "give --device cuda (a Ray cluster's GPUs, with --ray-address) or "
                          "--device cpu to train the [gpu] tables on the CPU (hours)")
    if kind != "cuda":
        return kind, executor
    return kind, replace(executor, gpus=tuple(gpus), gpu_share=devices.gpus_per_cell)


def summary_text(outputs: list[SuiteOutput]) -> str:
    """The report's summary table (:func:`tokengeo.reporting.document.summary_table`) for
    the terminal."""
    from tokengeo.reporting.document import summary_table

    table = summary_table({"claims": [c.to_dict(s.paper_name) for s in outputs
                                      for c in s.claims]})
    return text_table(list(table.header), [list(r) for r in table.rows])
