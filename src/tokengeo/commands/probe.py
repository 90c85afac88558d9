"""``tokengeo probe RUN_DIR``: token-geometry metrics of a trained run on its evaluation data."""

from __future__ import annotations

import argparse

# More evaluation examples than any split we load, and than the metrics' memory allows.
MAX_EXAMPLES = 1_000_000


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", help="the --out folder of a `tokengeo train` run")
    parser.add_argument("--split", default=None, help="evaluation split (default: test, or "
                        "val for language models)")
    parser.add_argument("--examples", type=int, default=1000,
                        help="evaluation examples (LM: windows) to probe")
    from tokengeo.commands.flags import add_device, add_threads

    add_threads(parser)
    add_device(parser, help="where the run's model runs (auto: cuda when available; the "
                            "metrics are computed on the CPU)")


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    import tokengeo.dino  # noqa: F401 (registers --task dino)
    from tokengeo.commands.flags import apply_threads, resolve_device
    from tokengeo.errors import ConfigError
    from tokengeo.models.names import resolve_model
    from tokengeo.probes.run_geometry import GEOMETRY
    from tokengeo.train.loading import load_run

    apply_threads(args.threads)
    device = resolve_device(args.device)  # a missing CUDA is refused before the run loads
    if args.examples < 1:
        raise ConfigError(f"--examples {args.examples} must be >= 1")
    if args.examples > MAX_EXAMPLES:
        raise ConfigError(f"--examples {args.examples} exceeds {MAX_EXAMPLES}: the metrics "
                          "hold every example's features in memory; probe fewer")
    resolve_model(args.run_dir, accept=("run",))  # a run folder, not a model name
    loaded = load_run(args.run_dir, device=device)
    if loaded.task.name == "dino":
        return _probe_dino(loaded, args)
    kind = "language" if loaded.task.kind == "language-modeling" else "classification"
    split = args.split or ("val" if kind == "language" else "test")
    if split not in loaded.task.eval_splits:
        raise ConfigError(f"--split {split!r} is not an evaluation split of this run; "
                          f"choose one of {list(loaded.task.eval_splits)}")
    geometry = GEOMETRY[kind](loaded.model, loaded.task, split, args.examples)
    return _write(args.run_dir, {"run": str(Path(args.run_dir)), "step": loaded.step,
                                 "split": split, "geometry": geometry}, geometry)


def _write(run_dir, result: dict, shown: dict) -> int:
    from pathlib import Path

    from tokengeo.io import write_json

    write_json(Path(run_dir) / "probe.json", result)
    if "layers" in shown:  # per-block numbers: in probe.json, too long for the terminal
        shown = {**shown, "layers": f"{len(shown['layers'])} blocks (see probe.json)"}
    width = max(map(len, shown))
    for k, v in shown.items():
        print(f"{k:<{width}}  {v:.6g}" if isinstance(v, float) else f"{k:<{width}}  {v}")
    print(f"written: {Path(run_dir) / 'probe.json'}")
    return 0


def _probe_dino(loaded, args: argparse.Namespace) -> int:
    """A DINO run: its teacher backbone's k-NN / linear-probe accuracy, patch spectrum and
    PCA-foreground IoU on ``--examples`` test images, and the PCA picture of 8 of them."""
    from pathlib import Path

    from tokengeo.dino.evaluate import evaluate_backbone
    from tokengeo.dino.segmentation import example_patch_tokens, save_pca_figure
    from tokengeo.errors import ConfigError
    from tokengeo.experiments.sweep import k_label

    if args.split not in (None, "test"):
        raise ConfigError("a DINO run is probed on the test split; drop --split")
    backbone, data = loaded.model.teacher, loaded.task.data
    metrics = evaluate_backbone(backbone, data, n_test=args.examples).to_dict()
    images, patches = example_patch_tokens(backbone, data, 8)
    grid = backbone.config.image_size // backbone.config.patch_size
    figure = save_pca_figure(images, {k_label(backbone.config.n_laplacian): patches}, grid,
                             Path(args.run_dir) / "pca_patch_tokens.png")
    print(f"written: {figure}")
    return _write(args.run_dir, {"run": str(Path(args.run_dir)), "step": loaded.step,
                                 "split": "test", "backbone": metrics}, metrics)
