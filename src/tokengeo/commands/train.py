"""``tokengeo train``: train a registered model on a dataset, or resume a run.

    tokengeo train --model vit-tiny --data fashion-mnist --n-laplacian 3 --steps 2000 \\
        --seed 0 --out runs/vit-l3
    tokengeo train config.toml --set lr=1e-3 --set model_overrides.d_model=96
    tokengeo train --resume --out runs/vit-l3
    tokengeo train --resume-from 1000 --out runs/vit-l3
    torchrun --nproc_per_node 2 -m tokengeo train config.toml
"""

from __future__ import annotations

import argparse

# flag -> TrainConfig field (None = not given, keep the file's / default value)
_FLAGS = {
    "--model": ("model", str, "registered model variant (tokengeo list-models) or "
                "hf:<named causal LM or folder> (tokengeo list-models --named)"),
    "--data": ("data", str, "dataset name or path to your own data"),
    "--task": ("task", str, "auto (from the data), image-classification, "
               "text-classification, language-modeling or dino (self-supervised ViT)"),
    "--n-laplacian": ("n_laplacian", int, "Laplacian heads per layer (k of H)"),
    "--kernel": ("kernel", str, "attention kernel: auto (the kernel table's choice) or a "
                 "name of the table (docs/kernels.md; a wrong name lists them)"),
    "--steps": ("steps", int, "optimiser updates"),
    "--batch-size": ("batch_size", int, "global batch size (split over ranks)"),
    "--lr": ("lr", float, "peak learning rate"),
    "--eval-every": ("eval_every", int, "evaluate every N steps (0: only at the end)"),
    "--checkpoint-every": ("checkpoint_every", int, "checkpoint every N steps (0: at the end)"),
    "--seed": ("seed", int, "seed of initialisation, data order and dropout"),
    "--precision": ("precision", str, "fp32, bf16, fp16 (CUDA) or auto"),
    "--device": ("device", str, "auto, cpu or cuda"),
    "--out": ("out", str, "run directory (must be new or empty unless --resume)"),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from tokengeo.commands import flags
    from tokengeo.train.config import TrainConfig

    defaults = TrainConfig()  # what a flag left out means (unless the config file sets it)
    parser.add_argument("config", nargs="?", default=None, help="TOML config file (optional)")
    for flag, (dest, kind, help_text) in _FLAGS.items():
        parser.add_argument(flag, dest=dest, type=kind, default=None,
                            help=f"{help_text} (default: {getattr(defaults, dest)})")
    parser.add_argument("--loggers", default=None, type=_loggers, metavar="NAMES",
                        help="where metrics go besides metrics.jsonl: comma-separated "
                             "tensorboard, csv, wandb (default: none)")
    parser.add_argument("--compile", action="store_const", const=True, default=None,
                        help="run the training step through torch.compile (default: off)")
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                        help="override any config field, e.g. --set lr=3e-4 "
                             "--set model_overrides.d_model=96 (repeatable)")
    parser.add_argument("--resume", action="store_true",
                        help="continue the run in --out from its latest checkpoint")
    parser.add_argument("--resume-from", dest="resume_from", type=int, default=None,
                        metavar="STEP", help="continue the run in --out from its checkpoint of "
                        "step STEP (later checkpoints are removed); implies --resume")
    flags.add_quiet(parser)
    flags.add_threads(parser)
    parser.add_argument("--overwrite", action="store_true",
                        help="replace the previous train output in --out (only a folder "
                             "`tokengeo train` wrote is replaced; not with --resume)")
    parser.add_argument("--connect-timeout", type=float, default=30.0, metavar="SECONDS",
                        help="under torchrun: give up joining the process group after SECONDS")


def _loggers(text: str) -> list[str]:
    return [name.strip() for name in text.split(",") if name.strip()]


def run(args: argparse.Namespace) -> int:
    import tokengeo.dino  # noqa: F401 (registers --task dino)
    from tokengeo.commands.flags import apply_threads
    from tokengeo.errors import ConfigError
    from tokengeo.outmarker import claim_output
    from tokengeo.runlock import lock_run_folder
    from tokengeo.train.config import build_config, check_out_folder
    from tokengeo.train.distributed import barrier, init_distributed, shutdown
    from tokengeo.train.rundir import RunDir
    from tokengeo.train.trainer import train

    fields = {dest: getattr(args, dest) for dest, _, _ in _FLAGS.values()}
    fields.update(loggers=args.loggers, compile=args.compile)
    args.resume = args.resume or args.resume_from is not None
    if args.overwrite and args.resume:
        raise ConfigError("--overwrite replaces a run and --resume continues it; give one")
    apply_threads(args.threads)
    base = None
    if args.resume and args.config is None:
        if args.out is None:
            raise ConfigError("--resume needs --out RUN_DIR (the run to continue)")
        base = RunDir(args.out).check_resumable()
    cfg = build_config(args.config, fields, args.sets, base)
    check_out_folder(cfg.out)  # before any data is read or anything created
    env = init_distributed(cfg.device, connect_timeout=args.connect_timeout)
    try:
        if env.is_main:  # one run per folder; rank 0 speaks for the others
            lock_run_folder(cfg.out, "tokengeo train" + (" --resume" if args.resume else ""))
            claim_output(cfg.out, "train", resume=args.resume,  # the one --out rule
                         overwrite=args.overwrite)
        # the other ranks check --out only once rank 0 has claimed it: meanwhile the claim's
        # temporary file is in the folder, and a rank that lists it then sees "not empty"
        barrier(env)
        summary = train(cfg, resume=args.resume, resume_from=args.resume_from, env=env,
                        progress=False if args.quiet else None)
    finally:
        shutdown(env)
    if env.is_main:
        for split, metrics in summary["final"].items():
            shown = " ".join(f"{k}={v:.4f}" for k, v in metrics.items() if isinstance(v, float))
            print(f"{split}: {shown}")
        print(f"wrote {RunDir(cfg.out).summary}")
    return 0
