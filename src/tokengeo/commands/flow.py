"""``tokengeo flow``: simulate tokens on the sphere under multi-head attention (arXiv 2605.18870).

Runs a preset for every H of its scaling list, fits the time-averaged strong gradient against
H, and writes ``flow.json`` (config, per-H balance and clustering, the fit, the series of the
main run) and PNG figures into ``--out``. Every argument is checked (finite numbers, whole
counts, a step count and a memory estimate that fit, a writable ``--out``) before anything
is written; a folder that is not empty is replaced only with ``--overwrite``, and only when
it holds a previous flow output.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict
from pathlib import Path

from tokengeo.errors import ConfigError, MissingDependencyError
from tokengeo.io import write_json
from tokengeo.outfolder import output_folder

OUTPUTS = ("flow.json", "flow.partial.json", "snapshots.png", "energy.png", "g2.png",
           "balance.png", "scaling.png", "sphere.gif")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from tokengeo.flows.presets import PRESETS

    costs = "; ".join(f"{name}: {cost_text(PRESETS[name])}" for name in sorted(PRESETS))
    parser.add_argument("--preset", required=True, choices=sorted(PRESETS),
                        help="experiment setting (s2-ou: Ornstein-Uhlenbeck weights; "
                             "s2-oscillating-inphase: oscillating weights in phase across "
                             "heads, as in the paper's figures; s2-oscillating: a phase per "
                             "head). Cost with its defaults (the bar's ETA gives the time): "
                             f"{costs}")
    from tokengeo.commands import flags

    parser.add_argument("--out", default="runs/flow",
                        help="output folder (new or empty, or a previous flow output with "
                             "--overwrite)")
    flags.add_overwrite(parser, "flow")
    parser.add_argument("--heads", type=int, default=None,
                        help="H of the main run (figures); default: the preset's")
    parser.add_argument("--scaling-heads", default=None,
                        help="comma-separated H list for the scaling fit, or 'none'")
    parser.add_argument("--T", type=float, default=None, help="horizon (depth)")
    parser.add_argument("--dt", type=float, default=None, help="time step")
    parser.add_argument("--n-paths", type=int, default=None, help="Monte Carlo paths")
    parser.add_argument("--noise-var", type=float, default=None, help="sigma^2 of the weights")
    parser.add_argument("--integrator", choices=["euler", "heun", "rk4"], default=None,
                        help="time stepper of the SDE; default: the preset's")
    parser.add_argument("--record-every", type=int, default=None, metavar="N",
                        help="keep every N-th step in the series and figures; default: "
                             "the preset's")
    parser.add_argument("--seed", type=int, default=None,
                        help="seed of the tokens, weights and noise; default: the preset's")
    parser.add_argument("--per-path-weights", action="store_true",
                        help="draw D(0) per path (default: one D(0) shared by every path, as "
                             "the authors do)")
    flags.add_threads(parser)
    flags.add_device(parser, help="where the tokens and weights evolve (auto: cuda when "
                                  "available; on cuda, Euler runs as CUDA graphs)")
    flags.add_no_figures(parser, "the PNG figures (write flow.json only)")
    parser.add_argument("--gif", action="store_true", help="also write an animated sphere")
    flags.add_quiet(parser)


def _heads_list(text: str | None) -> tuple[int, ...] | None:
    """--scaling-heads as a tuple (None: the preset's list)."""
    if text is None:
        return None
    if text.strip().lower() == "none":
        return ()
    try:
        heads = tuple(int(h) for h in text.split(",") if h.strip())
    except ValueError:
        raise ConfigError(
            f"--scaling-heads={text!r} must be comma-separated integers or 'none'"
        ) from None
    if not heads or min(heads) < 1:
        raise ConfigError(f"--scaling-heads={text!r} must list integers >= 1")
    return heads


def cost(preset, heads: tuple[int, ...] | None = None) -> int:
    """The work of a run in token-pair updates: steps x paths x (sum of H over the runs) x
    n^2 (each step of each head moves every token by the attention over all n tokens)."""
    from tokengeo.flows.simulate import flow_steps

    heads = tuple(dict.fromkeys((*(preset.scaling_heads if heads is None else heads),
                                 preset.n_heads)))
    return flow_steps(preset.T, preset.dt) * preset.n_paths * sum(heads) * preset.n_tokens**2


def cost_text(preset, heads: tuple[int, ...] | None = None) -> str:
    from tokengeo.flows.simulate import flow_steps

    runs = tuple(dict.fromkeys((*(preset.scaling_heads if heads is None else heads),
                                preset.n_heads)))
    return (f"{flow_steps(preset.T, preset.dt)} steps x {preset.n_paths} paths x H in "
            f"{{{', '.join(map(str, runs))}}} x {preset.n_tokens}^2 pairs = "
            f"{cost(preset, heads):.1e} pair updates")


class StepBars:
    """``progress(step, n_steps)`` for :func:`~tokengeo.flows.simulate.simulate`: one tqdm
    bar on stderr per H of ``heads`` (the runs come in that order), over its time steps;
    all paths of an H advance together. Does nothing when not ``enabled``."""

    def __init__(self, heads: tuple[int, ...], *, enabled: bool) -> None:
        self.heads, self.enabled, self.bar, self.runs = heads, enabled, None, 0
        self.overall = None  # every run: H-weighted steps (a step costs ~H), the overall ETA

    def __call__(self, step: int, n_steps: int) -> None:
        if not self.enabled:
            return
        from tqdm.auto import tqdm

        if self.overall is None:
            self.overall = tqdm(total=sum(self.heads) * n_steps, desc="all H", unit="H-step",
                                unit_scale=True, file=sys.stderr, dynamic_ncols=True,
                                position=0, leave=False)
        if step == 1:  # a new simulation starts
            self._close_run()
            H = self.heads[self.runs] if self.runs < len(self.heads) else "?"
            self.bar = tqdm(total=n_steps, desc=f"H={H}", unit="step", file=sys.stderr,
                            dynamic_ncols=True, position=1, leave=False)
            self.runs += 1
        self.bar.update(1)
        H = self.heads[self.runs - 1] if 0 < self.runs <= len(self.heads) else 1
        self.overall.update(H)

    def _close_run(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    def close(self) -> None:
        self._close_run()
        if self.overall is not None:
            self.overall.close()
            self.overall = None


ARG_FIELDS = {"T": "T", "dt": "dt", "n_paths": "n_paths", "noise_var": "noise_var",
              "integrator": "integrator", "record_every": "record_every", "seed": "seed",
              "heads": "n_heads"}  # command-line argument -> FlowPreset field


def _preset_and_heads(args: argparse.Namespace):
    """The preset with the arguments' overrides and the H list to run (flows.presets)."""
    from tokengeo.flows.presets import scaling_run

    overrides = {field: getattr(args, arg) for arg, field in ARG_FIELDS.items()
                 if getattr(args, arg) is not None}
    if getattr(args, "per_path_weights", False):
        overrides["per_path_weights"] = True
    return scaling_run(args.preset, overrides, _heads_list(args.scaling_heads))


def run(args: argparse.Namespace) -> int:
    from tokengeo.commands.flags import apply_threads, resolve_device

    if args.threads is not None and (isinstance(args.threads, bool) or args.threads < 1):
        raise ConfigError(f"--threads {args.threads} must be >= 1")
    preset, heads = _preset_and_heads(args)
    device = resolve_device(args.device)  # a missing CUDA is refused before --out is touched
    out = Path(args.out)
    # one run per folder; new, empty, or (--overwrite) a previous flow output, replaced
    # only once the new one is complete
    with output_folder(out, "flow", overwrite=args.overwrite) as work:
        apply_threads(args.threads)
        scaling, main = _write(args, preset, heads, work, out, device)
    fit = scaling.fit
    if fit is not None:
        print(f"{preset.name}: G2 ~ H^b, b = {fit.exponent:.3f} "
              f"[{fit.ci_low:.3f}, {fit.ci_high:.3f}] ({fit.level:.0%} bootstrap CI)")
    return 0


def _write(args: argparse.Namespace, preset, heads, work: Path, out: Path, device: str):
    """Simulate and write flow.json and the figures into ``work`` (``out`` in messages)."""
    import torch

    def log(msg: str) -> None:
        print(f"[flow {preset.name}] {msg}", file=sys.stderr, flush=True)

    scaling = _simulate_all(preset, heads, work, log, quiet=args.quiet, device=device)
    main = scaling.results[preset.n_heads]
    payload = {
        "args": {k: v for k, v in vars(args).items() if not k.startswith("_")},
        "device": device,
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        **scaling.to_dict(),
        "main_run": {"n_heads": preset.n_heads, **main.to_dict()},
    }
    write_json(work / "flow.json", payload, indent=1)
    (work / "flow.partial.json").unlink(missing_ok=True)  # flow.json now holds every run
    log(f"wrote {out / 'flow.json'}")
    if not args.no_figures:
        try:
            _figures(preset, scaling, main, work, gif=args.gif)
            log(f"wrote figures to {out}")
        except MissingDependencyError as exc:  # a core-only install: the numbers are written
            log(f"figures skipped: {exc}")
    return scaling, main


def _simulate_all(preset, heads: tuple[int, ...], out: Path, log, *, quiet: bool,
                  device: str = "cpu"):
    """Every H of the scaling run, each finished H kept in ``flow.partial.json``."""
    from tokengeo.flows.scaling import run_h_scaling
    from tokengeo.train.progress import bar_wanted

    done: list[dict] = []

    def partial(run) -> None:  # the finished H's while the run goes on (only a killed
        # process leaves the file: Ctrl-C, SIGTERM and errors remove it below)
        done.append(asdict(run))
        write_json(out / "flow.partial.json", {"preset": asdict(preset), "runs": done}, indent=1)

    log(f"simulating H = {', '.join(map(str, heads))} on {device}: T={preset.T}, dt={preset.dt}, "
        f"{preset.n_paths} paths of {preset.n_tokens} tokens ({cost_text(preset, heads)})")
    bars = StepBars(heads, enabled=not quiet and bar_wanted())
    try:
        return run_h_scaling(preset, heads, trajectory_for=preset.n_heads, log=log,
                             on_run=partial, progress=bars, device=device)
    except BaseException:  # Ctrl-C, SIGTERM or an error: no partial file is left behind
        (out / "flow.partial.json").unlink(missing_ok=True)
        raise
    finally:
        bars.close()


def _figures(preset, scaling, main, out: Path, *, gif: bool) -> None:
    from tokengeo.flows import plots

    plots.plot_snapshots(main, out / "snapshots.png")
    plots.plot_series(main, "E", out / "energy.png")
    plots.plot_series(main, "G2", out / "g2.png", log=True)
    plots.plot_balance(main, out / "balance.png")
    if scaling.fit is not None:
        plots.plot_scaling(scaling.fit, out / "scaling.png", title=preset.name)
    if gif:
        plots.save_gif(main, out / "sphere.gif")


