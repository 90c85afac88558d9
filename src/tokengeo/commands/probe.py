"""``tokengeo probe RUN_DIR``: token-geometry metrics of a trained run on its evaluation data."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", help="the --out folder of a `tokengeo train` run")
    parser.add_argument("--split", default=None, help="evaluation split (default: test, or "
                        "val for language models)")
    parser.add_argument("--examples", type=int, default=1000,
                        help="evaluation examples (LM: windows) to probe")


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from tokengeo.errors import ConfigError
    from tokengeo.probes.run_geometry import GEOMETRY
    from tokengeo.train.loading import load_run
    from tokengeo.train.rundir import write_json_atomic

    if args.examples < 1:
        raise ConfigError(f"--examples {args.examples} must be >= 1")
    loaded = load_run(args.run_dir)
    kind = "language" if loaded.task.kind == "language-modeling" else "classification"
    split = args.split or ("val" if kind == "language" else "test")
    if split not in loaded.task.eval_splits:
        raise ConfigError(f"--split {split!r} is not an evaluation split of this run; "
                          f"choose one of {list(loaded.task.eval_splits)}")
    geometry = GEOMETRY[kind](loaded.model, loaded.task, split, args.examples)
    result = {"run": str(Path(args.run_dir)), "step": loaded.step, "split": split,
              "geometry": geometry}
    write_json_atomic(Path(args.run_dir) / "probe.json", result)
    width = max(map(len, geometry))
    for k, v in geometry.items():
        print(f"{k:<{width}}  {v:.6g}" if isinstance(v, float) else f"{k:<{width}}  {v}")
    print(f"written: {Path(args.run_dir) / 'probe.json'}")
    return 0
