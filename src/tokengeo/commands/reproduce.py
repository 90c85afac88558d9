"""``tokengeo reproduce``: check the papers' claims at laptop scale and write a report."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--quick", dest="mode", action="store_const", const="quick",
                      help="laptop settings (default; about 10 minutes on 2 cores)")
    mode.add_argument("--full", dest="mode", action="store_const", const="full",
                      help="larger settings, about two hours on 2 cores (docs/results/)")
    mode.add_argument("--paper", dest="mode", action="store_const", const="paper",
                      help="the papers' sizes ([paper] tables) on data you supply with "
                           "--data-path; plan it first with --dry-run")
    mode.add_argument("--gpu", dest="mode", action="store_const", const="gpu",
                      help="larger models sized for one GPU ([gpu] tables; about 6 minutes "
                           "on one H100 with --jobs 4, an estimate); plan it with --dry-run")
    parser.set_defaults(mode="quick")
    parser.add_argument("--dry-run", action="store_true",
                        help="print the mode's cells per suite and their estimated cost "
                             "(core-hours here); run and write nothing")
    parser.add_argument("--data-path", action="append", default=[], metavar="NAME=PATH",
                        help="fill the ${NAME} placeholder of the suites' settings (the "
                             "papers' data and models, e.g. CIFAR100=/data/cifar-100-python"
                             ".tar.gz); repeat for each; the environment variable NAME "
                             "works too")
    parser.add_argument("--rejudge", action="store_true",
                        help="compute no cell: judge the cells already stored under --out "
                             "(OUT/cells: metrics and per-unit values, no weights) by this "
                             "version's claims and write a new report; a cell not stored "
                             "is reported as not run")
    parser.add_argument("--only", default="", help="comma-separated suites (default: all)")
    parser.add_argument("--out", default="runs/repro", help="output folder (resumable)")
    parser.add_argument("--config-dir", default=None,
                        help="folder of suite TOML files (default: the built-in ones)")
    parser.add_argument("--jobs", type=int, default=0,
                        help="cells run at once (default 0: one per core); results do not "
                             "depend on it")
    parser.add_argument("--executor", choices=("process", "ray"), default="process",
                        help="local worker processes (default) or Ray tasks "
                             "(pip install 'tokengeo[cluster]')")
    parser.add_argument("--ray-address", default=None,
                        help="address of a running Ray cluster (default: start a local one)")
    parser.add_argument("--connect-timeout", type=float, default=30.0, metavar="SECONDS",
                        help="give up connecting to Ray after SECONDS (default 30)")
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                        help="where the training cells run (default auto: CUDA where this "
                             "machine has a GPU); CPU and GPU cells never share a cache")
    parser.add_argument("--gpus-per-cell", type=float, default=None, metavar="SHARE",
                        help="with --executor ray on CUDA: the GPUs each cell asks for "
                             "(default 1; 1/n such as 0.5 or 0.25 packs n cells on a GPU)")


def run(args: argparse.Namespace) -> int:
    from tokengeo.errors import ConfigError
    from tokengeo.experiments.executors import ExecutorConfig
    from tokengeo.experiments.placement import DeviceConfig
    from tokengeo.experiments.reproduce import (
        BUILTIN_CONFIG_DIR,
        SUITES,
        ReproduceConfig,
        dry_run,
        reproduce,
        summary_text,
    )
    from tokengeo.experiments.user_data import parse_data_paths
    from tokengeo.runlock import lock_run_folder

    only = tuple(s.strip() for s in args.only.split(",") if s.strip())
    if args.only.strip() and not only:
        raise ConfigError(f"--only {args.only!r} names no suite; give comma-separated names "
                          f"from {list(SUITES)}, or drop --only to run them all")
    cfg = ReproduceConfig(out=Path(args.out), mode=args.mode, only=only,
                          config_dir=Path(args.config_dir or BUILTIN_CONFIG_DIR),
                          data_paths=parse_data_paths(args.data_path),
                          devices=DeviceConfig(args.device, args.gpus_per_cell).validate(),
                          rejudge=args.rejudge)
    executor = ExecutorConfig(args.executor, jobs=args.jobs, ray_address=args.ray_address,
                              connect_timeout=args.connect_timeout)
    executor.validate()
    if args.ray_address and not args.dry_run:  # before --out is claimed: a dead address
        from tokengeo.experiments.executors import probe_address

        probe_address(args.ray_address, executor.connect_timeout, "--ray-address")
    if args.dry_run:  # nothing started, locked or written
        dry_run(cfg, jobs=executor.workers())
        return 0
    lock_run_folder(cfg.out, "tokengeo reproduce")  # one run per folder (released on exit)
    path, outputs = reproduce(cfg, executor=executor)
    print(summary_text(outputs))
    print(f"\nreport: {path.resolve()}")
    return 0
