"""``tokengeo probe RUN_DIR``: token-geometry metrics of a trained run on its evaluation data.

Writes ``RUN_DIR/probe.json`` (a DINO run: also ``pca_patch_tokens.png``), each with a
sidecar ``.<name>.tokengeo.json`` recording its SHA-256: a file of that name the user put
there is never replaced, and the run stays a `tokengeo train` output (``train --resume``
continues it). Every output is checked before the model loads.
"""

from __future__ import annotations

import argparse

# More evaluation examples than any split we load, and than the metrics' memory allows.
MAX_EXAMPLES = 1_000_000
COMMAND = "probe"
LEGEND = """\
printed (and in probe.json), over the final-layer tokens of the probed examples:
  within_sequence_share   share of token variance within a sequence/image (lower: its
                          tokens closer together)
  between_class_share     share of the variance of sequence means between classes
  nc1, nc2_*, ncc_accuracy  neural collapse: within- over between-class spread (nc1,
                          lower: more collapse), the class means' distance from a simplex
                          ETF, equal norms and largest angle (nc2_*), nearest-class-mean
                          accuracy
  components_99[...]      principal components explaining 99% of the token variance
                          (_per_image / _per_sequence: of each one's tokens; _interp:
                          interpolated); decay_alpha: power-law decay of the spectrum
  cdnv_mean, next_token_nm_accuracy  language runs: class-distance normalised variance of
                          next-token classes, nearest-mean next-token accuracy
  object_share            images: the share of a ViT's patch-token variance explained by
                          the foreground/background split (η², higher: object tokens
                          apart from background); object_images: images with both kinds
                          of patch (none: object_share is null); foreground_fraction
  n_examples, n_sequences how many examples (sequences) were probed
  layers                  the same per block (in probe.json only)
  a DINO run: its teacher's k-NN / linear-probe accuracy, patch spectrum, PCA IoU"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", help="the --out folder of a `tokengeo train` run")
    parser.add_argument("--split", default=None, help="evaluation split (default: test, or "
                        "val for language models)")
    parser.add_argument("--examples", type=int, default=1000,
                        help="evaluation examples (LM: windows) to probe")
    from tokengeo.commands.flags import add_device, add_legend, add_threads

    add_threads(parser)
    add_device(parser, help="where the run's model runs (the metrics are computed on the "
                            "CPU)")
    add_legend(parser, LEGEND)


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
    check_outputs(Path(args.run_dir))  # before the model loads and runs
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


def check_outputs(run_dir, names: tuple[str, ...] = ("probe.json",)) -> None:
    """``names`` in ``run_dir`` can be written and are new or probe's own."""
    from tokengeo.outmarker import check_own_file

    for name in names:
        check_own_file(run_dir / name, COMMAND, "the probe output")


def _write(run_dir, result: dict, shown: dict) -> int:
    import json
    from pathlib import Path

    from tokengeo.outmarker import write_own_file

    data = (json.dumps(result, indent=2, allow_nan=False) + "\n").encode()
    write_own_file(Path(run_dir) / "probe.json", COMMAND, "the probe output", data)
    if "layers" in shown:  # per-block numbers: in probe.json, too long for the terminal
        shown = {**shown, "layers": f"{len(shown['layers'])} blocks (see probe.json)"}
    width = max(map(len, shown))
    for k, v in shown.items():
        print(f"{k:<{width}}  {v:.6g}" if isinstance(v, float) else f"{k:<{width}}  {v}")
    print(f"written: {Path(run_dir) / 'probe.json'} (tokengeo probe --help explains each name)")
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
    check_outputs(Path(args.run_dir), ("pca_patch_tokens.png",))  # before the evaluation
    backbone, data = loaded.model.teacher, loaded.task.data
    metrics = evaluate_backbone(backbone, data, n_test=args.examples).to_dict()
    images, patches = example_patch_tokens(backbone, data, 8)
    grid = backbone.config.image_size // backbone.config.patch_size
    figure = Path(args.run_dir) / "pca_patch_tokens.png"
    _own_figure(figure, lambda p: save_pca_figure(
        images, {k_label(backbone.config.n_laplacian): patches}, grid, p))
    print(f"written: {figure}")
    return _write(args.run_dir, {"run": str(Path(args.run_dir)), "step": loaded.step,
                                 "split": "test", "backbone": metrics}, metrics)


def _own_figure(path, draw) -> None:
    """``draw(tmp)`` into a private temporary folder, then the bytes written to ``path``
    under probe's ownership rule."""
    import tempfile
    from pathlib import Path

    from tokengeo.io import read_small
    from tokengeo.outmarker import write_own_file

    with tempfile.TemporaryDirectory() as tmp:
        drawn = Path(tmp) / path.name
        draw(drawn)
        write_own_file(path, COMMAND, "the probe output", read_small(drawn))
