"""``tokengeo bench NAME|all``: run one benchmark or every one, print each, optionally save
the JSON (one object; a list of them for ``all``).

The device and the ``--json`` path are checked before a benchmark starts (a benchmark
takes minutes; a bad path must not be found at its end). With ``all``, a benchmark that
cannot run here (a GPU one on a CPU, a model that is not installed) is recorded with its
reason and the others still run.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tokengeo.bench.registry import BENCHMARKS
from tokengeo.checks import check_output_file
from tokengeo.errors import ConfigError, TokengeoError
from tokengeo.io import atomic_path, write_json

DEVICES = ("cpu", "cuda")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", choices=[*BENCHMARKS, "all"],
                        help="which benchmark, or all of them")
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
    names = list(BENCHMARKS) if args.name == "all" else [args.name]
    from tokengeo.bench.measure import ensure_precise_rss

    if any(BENCHMARKS[n].precise_rss for n in names):
        ensure_precise_rss()
    results = []
    for name in names:
        results.append(_one(name, args, skip_errors=args.name == "all"))
    if args.json:
        payload = results if args.name == "all" else results[0]
        with atomic_path(args.json, check=lambda: _check_new(args.json, args.overwrite)) as tmp:
            write_json(tmp, payload, allow_nan=True)
        print(f"JSON written to {args.json}")
    return 0


def _one(name: str, args: argparse.Namespace, skip_errors: bool) -> dict:
    """Run benchmark ``name`` and print it; with ``skip_errors``, one that cannot run here
    gives ``{"benchmark": name, "skipped": why}`` instead of stopping the others."""
    from tokengeo.bench import registry

    bench = registry.benchmark(name)
    print(f"benchmarking {name} on {args.device} ...", file=sys.stderr, flush=True)
    try:
        result = registry.run(name, bench.make_config(quick=args.quick, device=args.device))
    except (TokengeoError, ImportError) as err:
        if not skip_errors:
            raise
        print(f"{name}: skipped: {err}", file=sys.stderr)
        return {"benchmark": name, "skipped": str(err)}
    print(_text(name, result))
    return result


def _text(name: str, result: dict) -> str:
    """The benchmark's own table where it has one, else its JSON."""
    if name == "laplacian":
        from tokengeo.bench.laplacian import table

        return table(result)
    return json.dumps(result, indent=1, allow_nan=True)


def _check_new(path: str, overwrite: bool) -> None:
    """``--json`` names a new file, or ``--overwrite`` allows replacing a regular one (checked
    before the benchmark and again at the write: a file made meanwhile is not lost)."""
    p = Path(path).expanduser()
    if p.is_symlink() or (p.exists() and not p.is_file()):
        raise ConfigError(f"--json {path!r} exists and is not a regular file; choose a new path")
    if p.exists() and not overwrite:
        raise ConfigError(f"--json {path!r} exists; pass --overwrite to replace it, or choose "
                          "a new path")
