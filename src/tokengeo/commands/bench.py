"""``tokengeo bench NAME``: run a benchmark, print its table, optionally save its JSON.

The device and the ``--json`` path are checked before the benchmark starts (a benchmark
takes minutes; a bad path must not be found at its end).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tokengeo.checks import check_output_file
from tokengeo.errors import ConfigError
from tokengeo.io import atomic_path, write_json

BENCHMARKS = ("laplacian",)
DEVICES = ("cpu", "cuda")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", choices=BENCHMARKS, help="which benchmark")
    parser.add_argument("--quick", action="store_true", help="fewer repeats (noisier)")
    parser.add_argument("--device", default="cpu", help="cpu or cuda (cuda:N)")
    parser.add_argument("--json", metavar="PATH", help="also write the JSON result here (a "
                        "new file; --overwrite to replace one)")
    parser.add_argument("--overwrite", action="store_true",
                        help="let --json replace an existing file")


def check_device(text: str) -> None:
    """``cpu``, ``cuda`` or ``cuda:N`` that this torch build and machine have."""
    import torch

    try:
        device = torch.device(text)
    except (RuntimeError, ValueError):
        raise ConfigError(f"--device {text!r} is not a device; use one of {list(DEVICES)} "
                          "(cuda:N for a given GPU)") from None
    if device.type not in DEVICES:
        raise ConfigError(f"--device {text!r} is not supported; use one of {list(DEVICES)}")
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ConfigError(f"--device {text} needs CUDA, which this torch build or machine "
                              "lacks; use --device cpu")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise ConfigError(f"--device {text}: this machine has "
                              f"{torch.cuda.device_count()} CUDA device(s)")


def run(args: argparse.Namespace) -> int:
    check_device(args.device)
    if args.json:
        check_output_file("--json", args.json)
        _check_new(args.json, args.overwrite)
    from tokengeo.bench.measure import ensure_precise_rss

    ensure_precise_rss()
    from tokengeo.bench.laplacian import LaplacianBenchConfig, table
    from tokengeo.bench.laplacian import run as run_bench

    cfg = LaplacianBenchConfig(device=args.device)
    if args.quick:
        cfg.op_repeats, cfg.train_repeats = 5, 5
    print(f"benchmarking {args.name} on {args.device} ...", file=sys.stderr, flush=True)
    result = run_bench(cfg, log=lambda msg: print(msg, file=sys.stderr, flush=True))
    print(table(result))
    if args.json:
        with atomic_path(args.json, check=lambda: _check_new(args.json, args.overwrite)) as tmp:
            write_json(tmp, result, allow_nan=True)
        print(f"JSON written to {args.json}")
    return 0


def _check_new(path: str, overwrite: bool) -> None:
    """``--json`` names a new file, or ``--overwrite`` allows replacing a regular one (checked
    before the benchmark and again at the write: a file made meanwhile is not lost)."""
    p = Path(path).expanduser()
    if p.is_symlink() or (p.exists() and not p.is_file()):
        raise ConfigError(f"--json {path!r} exists and is not a regular file; choose a new path")
    if p.exists() and not overwrite:
        raise ConfigError(f"--json {path!r} exists; pass --overwrite to replace it, or choose "
                          "a new path")
