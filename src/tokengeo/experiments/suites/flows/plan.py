"""The flows suite's settings (suites/flows.toml), their checks, and the cells they plan."""

from __future__ import annotations

from tokengeo.errors import ConfigError
from tokengeo.experiments.cells import Cell
from tokengeo.experiments.settings import Setting
from tokengeo.experiments.suite import SuiteContext
from tokengeo.experiments.suites.flows.common import (
    CONTROL_LABEL,
    CONTROLS,
    DRIFT_LABEL,
    DRIFTS,
    FIELDS,
    LONG_PRESET,
)
from tokengeo.experiments.suites.flows.identity import identity_cells
from tokengeo.experiments.suites.flows.runs import flow_cell, static_mean_cell
from tokengeo.experiments.suites.flows.stability import stability_cell

THEORY_KEYS = {"n_tokens": int, "T": float, "dt": float, "heads": int, "dt_heads": list,
               "dts": list, "eps": list, "deltas": list, "directions": int,
               "record_every": int}


def check(where: str, settings: dict) -> None:
    """``heads`` distinct and at least two (the O(1/H) fit needs two H); ``figure_heads``
    one of them."""
    from tokengeo.experiments.validation import check_distinct

    heads = list(settings.get("heads", []))
    check_distinct(where, "heads", heads)
    if len(heads) < 2:
        raise ConfigError(f"{where}: heads = {heads!r} must hold at least two head counts "
                          "(the O(1/H) fit needs two H), e.g. [1, 4, 16]")
    figure = settings.get("figure_heads")
    if figure is not None and figure not in heads:
        raise ConfigError(f"{where}: figure_heads = {figure!r} must be one of heads = "
                          f"{heads!r}")


def _check_theory(table: dict, where: str) -> None:
    unknown, missing = sorted(set(table) - set(THEORY_KEYS)), sorted(set(THEORY_KEYS) - set(table))
    if unknown or missing:
        raise ConfigError(f"{where}: theory needs exactly the keys {sorted(THEORY_KEYS)}; "
                          f"unknown {unknown}, missing {missing}")
    for key, kind in THEORY_KEYS.items():
        v = table[key]
        least = 1 if key == "dt_heads" else 3
        ok = (isinstance(v, list) and len(v) >= least and all(
                  isinstance(e, (int, float)) and not isinstance(e, bool) and e > 0 for e in v)
              ) if kind is list else (isinstance(v, (int, float)) and not isinstance(v, bool)
                                      and v > 0 and (kind is float or float(v).is_integer()))
        if not ok:
            what = f"a list of {least} or more positive numbers" if kind is list else \
                f"a positive {'whole ' if kind is int else ''}number"
            raise ConfigError(f"{where}: theory.{key}={v!r} must be {what}")
    dts = sorted(table["dts"], reverse=True)
    if any(abs(a / b - 2) > 1e-9 for a, b in zip(dts, dts[1:], strict=False)):
        raise ConfigError(f"{where}: theory.dts={table['dts']!r} must halve from one to the "
                          "next (one Brownian path is refined across them), e.g. "
                          "[0.04, 0.02, 0.01]")


def _check_distinct(heads: list, where: str) -> None:
    """Each H once (a repeated H would name one cell twice)."""
    if len(set(heads)) != len(heads):
        raise ConfigError(f"{where} = {heads!r} repeats an H; list each H once")


def _check_long_run(table: dict, where: str) -> None:
    """``long_run = { T = 40.0, heads = [10, 100] }``: the per-head oscillating run to T."""
    T, heads = table.get("T"), table.get("heads")
    if set(table) != {"T", "heads"} or isinstance(T, bool) or not isinstance(T, (int, float)) \
            or T <= 0 or not isinstance(heads, list) or not heads or any(
                isinstance(h, bool) or not isinstance(h, int) or h < 1 for h in heads):
        raise ConfigError(f"{where}: long_run must be {{ T = <positive number>, heads = "
                          f"[<whole numbers >= 1>] }}; got {table!r}")
    _check_distinct(heads, f"{where}.heads")


def _check_preset(table: dict, where: str) -> None:
    """Every drift's preset with these fields, at the largest H (sizes, steps, memory)."""
    from tokengeo.flows.presets import get_preset

    for preset in DRIFTS.values():
        try:
            get_preset(preset, **table)
        except ConfigError as exc:
            raise ConfigError(f"{where}: {exc}") from None


SETTINGS = {  # suites/flows.toml: [common] + [quick] or [full]
    "exponent_tolerance": Setting("number"),
    "residual_tolerance": Setting("number"),
    "heads": Setting("int_list", lo=1),
    "paper_fit_heads": Setting("int_list", required=False, lo=1),  # default: every H
    "figure_heads": Setting("int", required=False, lo=1),
    "preset": Setting("table", check=_check_preset),
    "theory": Setting("table", required=False, check=_check_theory),  # none: no theory cells
    "control_heads": Setting("int_list", required=False, lo=1, check=_check_distinct),
    "residual_heads": Setting("int_list", required=False, lo=1, check=_check_distinct),
    "long_run": Setting("table", required=False, check=_check_long_run),
}


def resolved(preset: str, overrides: dict) -> dict:
    """Every field of the preset after the overrides (so a cell's hash sees preset changes)."""
    from dataclasses import asdict

    from tokengeo.flows.presets import get_preset

    fields = asdict(get_preset(preset, **overrides))
    return {k: v for k, v in fields.items() if k not in ("name", "notes", "scaling_heads")}


def cost(preset: dict, n_heads: int) -> float:
    """Estimated 1-thread CPU seconds of one cell (a scheduling hint): the pairwise kernels
    of every head, step and path; measured here as ~2e-9 s per (step · n² · head · path)."""
    steps = preset["T"] / preset["dt"]
    paths = 1 if preset["noise_var"] == 0 and not preset["per_path_weights"] else \
        preset["n_paths"]
    return 2e-9 * steps * preset["n_tokens"] ** 2 * (n_heads + 5) * paths


def _theory_cost(theory: dict, *, paths: int, heads: int | None = None,
                 dt_sweep: bool = False) -> float:
    steps = sum(theory["T"] / dt for dt in theory["dts"]) if dt_sweep else \
        theory["T"] / theory["dt"]
    H = theory["heads"] if heads is None else heads
    # the identity's dense per-head terms cost about what a flow step does per (step · n² ·
    # (H + 5)): 1.8e-8 s against 2.6e-8 s for an OU flow cell, both on one loaded machine
    factor = 1
    return factor * 2e-9 * steps * theory["n_tokens"] ** 2 * (H + 5) * paths


def cells(settings: dict, ctx: SuiteContext) -> list[Cell]:
    fig_h = settings.get("figure_heads")
    theory = dict(settings.get("theory", {}))
    seed = int(settings["preset"].get("seed", 0))
    out = []
    for drift, preset in DRIFTS.items():
        overrides = resolved(preset, dict(settings["preset"]))
        for H in settings["heads"]:
            fig_dir = str(ctx.figure_dir) if H == fig_h else None
            out.append(Cell("flows", f"{drift}-H{H}", flow_cell,
                            {"preset": preset, "n_heads": H, "overrides": overrides,
                             "figure_dir": fig_dir}, label=f"{DRIFT_LABEL[drift]}, H={H}",
                            fields=FIELDS, cost=cost(overrides, H)))
        H = max(settings["heads"])
        out.append(Cell("flows", f"static-{drift}-H{H}", static_mean_cell,
                        {"preset": preset, "n_heads": H, "overrides": overrides},
                        label=f"static flow at the time-averaged weights of "
                              f"{DRIFT_LABEL[drift]}, H={H}", fields=("summary",),
                        cost=cost(overrides, H)))
        if theory:
            out.append(Cell("flows", f"theory-stability-{drift}", stability_cell,
                            {"preset": preset, "theory": theory, "seed": seed},
                            label=f"stability, {DRIFT_LABEL[drift]}",
                            fields=("tokens", "weights"), cost=_theory_cost(
                                theory, paths=2 * (1 + 3 * theory["directions"]))))
    out += _control_cells(settings)
    if theory:
        out += identity_cells(theory, seed, lambda H: _theory_cost(
            theory, paths=1, heads=H, dt_sweep=True))
    return out


def _control_cells(settings: dict) -> list[Cell]:
    """The controls (attractive, OU without noise) at ``control_heads``, the OU runs the
    residual table needs at ``residual_heads`` outside the sweep, and the long per-head
    oscillating runs of ``long_run`` (all with :func:`flow_cell`)."""
    base = dict(settings["preset"])
    plan = [(name, preset, changes, H) for name, (preset, changes) in CONTROLS.items()
            for H in settings.get("control_heads", settings["heads"])]
    plan += [("ou", DRIFTS["ou"], {}, H) for H in settings.get("residual_heads", [])
             if H not in settings["heads"]]
    long = settings.get("long_run")
    if long:
        plan += [("long-oscillating", LONG_PRESET, {"T": float(long["T"])}, H)
                 for H in long["heads"]]
    out = []
    for name, preset, changes, H in plan:
        overrides = resolved(preset, base | changes)
        label = CONTROL_LABEL.get(name, DRIFT_LABEL.get(name, f"per-head oscillating to "
                                                              f"T={overrides['T']:g}"))
        out.append(Cell("flows", f"{name}-H{H}", flow_cell,
                        {"preset": preset, "n_heads": H, "overrides": overrides,
                         "figure_dir": None}, label=f"{label}, H={H}", fields=FIELDS,
                        cost=cost(overrides, H)))
    return out
