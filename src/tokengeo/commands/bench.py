"""``tokengeo bench NAME``: run a benchmark, print its table, optionally save its JSON."""

from __future__ import annotations

import argparse
import sys

from tokengeo.io import write_json

BENCHMARKS = ("laplacian",)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", choices=BENCHMARKS, help="which benchmark")
    parser.add_argument("--quick", action="store_true", help="fewer repeats (noisier)")
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--json", metavar="PATH", help="also write the JSON result here")


def run(args: argparse.Namespace) -> int:
    from tokengeo.bench.measure import ensure_precise_rss

    ensure_precise_rss()
    from tokengeo.bench.laplacian import LaplacianBenchConfig, table
    from tokengeo.bench.laplacian import run as run_bench

    cfg = LaplacianBenchConfig(device=args.device)
    if args.quick:
        cfg.op_repeats, cfg.train_repeats = 5, 5
    result = run_bench(cfg, log=lambda msg: print(msg, file=sys.stderr, flush=True))
    print(table(result))
    if args.json:
        write_json(args.json, result, allow_nan=True)
        print(f"JSON written to {args.json}")
    return 0

