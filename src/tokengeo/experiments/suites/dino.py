"""Suite ``dino``: Zhang & Papyan (arXiv 2602.09297), self-supervised setting.

DINO pre-training (Caron et al. 2021) of a ViT on Fashion-MNIST images with k of H heads
Laplacian in every layer, several seeds; the frozen teacher backbone is scored by k-NN and
linear-probe accuracy, the spectrum of its patch tokens and the mIoU of a learned linear
segmentation probe on its patch tokens (``tokengeo.dino.seg_probe``: ridge regression of
each patch's foreground share, scored on held-out images); randomly initialised backbones
of the same architectures give the floor.

Claims: DINO beats a random backbone (k-NN accuracy: ``sanity``); "Laplacian heads raise
linear-probe accuracy", one tallied row whose readings (an "any" family,
:func:`~tokengeo.experiments.suites.laplacian_sweep.finding`) are k = H − 1 (the paper's 5
of 6 heads) and k = H/2 against k = 0 and the trend over every k swept; fewer patch-token
components at H − 1. The segmentation mIoU is measured and shown
(table, figure) but not claimed: its sanity check failed in the published
run (trained 0.886 vs random 0.888), and no data set with real object boundaries is
available offline to replace the foreground-share probe of Fashion-MNIST.
H is the model's heads per layer, read from its registry config. A claim whose k is not in
``ks`` (or a trend over fewer than 3 ks) is reported as not run, naming the missing k (a
reading of the finding that did not run is left out of it, named in its detail).

Settings: ``ks``, ``seeds``, ``evaluation`` (``n_train``, ``n_test``: k-NN bank / probe
training images and test images; ``n_seg_train``: training images of the segmentation
probe), ``cell_cost`` (estimated 1-thread CPU seconds of one pre-training, a scheduling
hint), ``train`` (TrainConfig fields; ``task_options`` are DINOConfig fields); ``skip`` (a
reason: no cell runs, every claim is reported as not run).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import tokengeo.dino  # noqa: F401 (registers --task dino, which these cells train)
from tokengeo.errors import ConfigError
from tokengeo.experiments.cells import Cell, CellResult
from tokengeo.experiments.claims import Claim
from tokengeo.experiments.report import Referee, SuiteOutput
from tokengeo.experiments.settings import Setting, keys, train_table_with
from tokengeo.experiments.suite import Suite, SuiteContext
from tokengeo.experiments.suites import laplacian_sweep as lap
from tokengeo.experiments.summary import UNRECORDED
from tokengeo.experiments.sweep import (
    Sweep,
    SweepResults,
    difference_claim,
    k_label,
    k_variants,
    line_figure,
    metric_table,
    model_label,
    run_folder,
)

SEG_PROBE_MIN_IMAGES = 3  # fit_seg_probe: at least 2 fitting images and 1 validation image


def _check_evaluation(table: dict, where: str) -> None:
    keys(n_train="int", n_test="int", n_seg_train="int")(table, where)
    if table["n_seg_train"] < SEG_PROBE_MIN_IMAGES:
        raise ConfigError(f"{where}.n_seg_train = {table['n_seg_train']} must be >= "
                          f"{SEG_PROBE_MIN_IMAGES} (the segmentation probe picks its penalty "
                          "on a validation part of its training images)")


SETTINGS = {  # suites/dino.toml: [common] + [quick] or [full]
    "seeds": Setting("int_list"),
    "ks": Setting("int_list"),
    "evaluation": Setting("table", check=_check_evaluation),
    "train": Setting("table", check=train_table_with(task="dino")),
    "cell_cost": Setting("number", required=False),
}

NAME = "dino"
TITLE = "Laplacian heads: self-supervised DINO"
PAPER = ("Zhang & Papyan, \"Laplacian Heads Improve Transformers by Smoothing Token "
         "Representations\", arXiv 2602.09297 (DINO: Caron et al., ICCV 2021)")
SRC = "Zhang & Papyan 2026, Sec. 5.3 (DINO ViT-S, ImageNet-1k; ADE20K)"
SRC_DINO = "Caron et al. 2021, Sec. 4 (k-NN of DINO features)"
PAPER_KEY = "Zhang & Papyan (Laplacian heads)"
PCA_IMAGES = 8  # test images shown in the PCA-of-patch-tokens figure
# what the cells return and summarise reads (random_cell: the same without the last three)
RANDOM_FIELDS = ("knn_accuracy", "linear_accuracy", "seg_miou", "seg_chance_miou",
                 "patch_components_99", "patch_decay_alpha", "embedding_spread")
DINO_FIELDS = (*RANDOM_FIELDS, "pca_patches", "wall_time_s", "warnings")


def _evaluate(model, data, ev: dict, with_patches: bool) -> dict:
    from tokengeo.dino.evaluate import evaluate_backbone
    from tokengeo.dino.segmentation import example_patch_tokens

    out = evaluate_backbone(model, data, ev["n_train"], ev["n_test"],
                            n_seg_train=ev["n_seg_train"]).to_dict()
    if with_patches:
        _, patches = example_patch_tokens(model, data, PCA_IMAGES)
        out["pca_patches"] = [[[round(v, 5) for v in tok] for tok in img]
                              for img in patches.tolist()]
    return out


def dino_cell(run_dir: str, config: dict[str, Any], evaluation: dict) -> dict:
    """Pre-train DINO in ``run_dir`` (resuming an interrupted run) and score its teacher."""
    from tokengeo.experiments.training import open_trainer

    trainer = open_trainer(Path(run_dir), config)
    summary = trainer.fit()
    value = _evaluate(trainer.model.teacher, trainer.data, evaluation, with_patches=True)
    return {**value, "wall_time_s": summary["wall_time_s"], "step": summary["step"],
            "summary_knn_accuracy": summary["knn_accuracy"], "warnings": summary["warnings"]}


def random_cell(config: dict[str, Any], evaluation: dict) -> dict:
    """The same evaluation of a randomly initialised backbone (the trainer's seeding)."""
    import torch

    from tokengeo.data import load_dataset
    from tokengeo.models.registry import create_model
    from tokengeo.train.tasks import ImageClassification

    data = load_dataset(config["data"], **config.get("data_options", {}))
    torch.manual_seed(config["seed"])
    sizes = ImageClassification.model_sizes(data)
    model = create_model(config["model"], **{**config.get("model_overrides", {}), **sizes,
                                             "n_laplacian": config.get("n_laplacian", 0)})
    return _evaluate(model, data, evaluation, with_patches=False)


def _labels(settings: dict) -> list[str]:
    return [k_label(k) for k in sorted(settings["ks"])]


RANDOM = "random-"  # label prefix of the randomly initialised backbones


def _sweep(settings: dict) -> Sweep:
    """DINO pre-trainings and random backbones, one of each per (k, seed), same config."""
    ks = k_variants(sorted(settings["ks"]))
    variants = {**ks, **{RANDOM + lab: v for lab, v in ks.items()}}
    return Sweep(NAME, variants, tuple(settings["seeds"]),
                 {**settings["train"], "task": "dino"}, parse=dict,
                 cost=float(settings.get("cell_cost", 1.0)))


def cells(settings: dict, ctx: SuiteContext) -> list[Cell]:
    evaluation = dict(settings["evaluation"])

    def make(label: str, seed: int, cfg: dict):
        if label.startswith(RANDOM):
            return random_cell, {"config": cfg, "evaluation": evaluation}, RANDOM_FIELDS, 1.0
        run = run_folder(ctx, NAME, label, seed, cfg)
        return dino_cell, {"run_dir": run, "config": cfg, "evaluation": evaluation}, \
            DINO_FIELDS, float(settings.get("cell_cost", 1.0))
    return _sweep(settings).cells(make)


def backbone_config(settings: dict):
    """The registry config of the pre-trained ViT (its heads per layer, its patch size)."""
    from tokengeo.experiments.validation import registry_config

    return registry_config(settings["train"])


def claim_ks(heads: int) -> list[int]:
    """The k compared with k = 0: H/2 and H − 1 (the paper's 5 of 6 heads), without 0."""
    return sorted({heads // 2, heads - 1} - {0})


FEWER_KS = ("these settings keep fewer ks for their time budget, costed in dino.toml's note; "
            "add k to ks to run it")


def _at_k(sweep: SweepResults, ks: list[int], k: int) -> SweepResults:
    """``sweep`` itself, or a copy whose claims are reported as not run because k is not
    swept (a skipped suite keeps its own reason)."""
    if sweep.skipped or k in ks:
        return sweep
    reason = f"the claim at k = {k}: k = {k} is not among ks = {ks} ({FEWER_KS})"
    return SweepResults(sweep.sweep, sweep.results, sweep.labels, reason)


def _over_k(sweep: SweepResults, ks: list[int]) -> SweepResults:
    """``sweep`` itself, or a copy whose trend claims are reported as not run (< 3 ks)."""
    if sweep.skipped or len(ks) >= 3:
        return sweep
    reason = f"a trend over k needs at least 3 ks; ks = {ks} ({FEWER_KS})"
    return SweepResults(sweep.sweep, sweep.results, sweep.labels, reason)


def _get(key: str):
    return lambda v: v[key]


def proxy(settings: dict) -> str:
    t = settings["train"]
    return f"DINO {model_label(t)} on {t['data']} for DINO ViT-S on ImageNet-1k / ADE20K"


def _claims(settings: dict, sweep: SweepResults) -> list[Claim]:
    heads = backbone_config(settings).n_heads
    ks = sorted(settings["ks"])
    stand_in = {"kind": "stand-in", "proxy": proxy(settings)}
    claims = [
        difference_claim(NAME, sweep, "DINO pre-training beats a random backbone in k-NN "
                         "accuracy (k=0)", SRC_DINO, "far above random", k_label(0),
                         RANDOM + k_label(0), "k-NN accuracy", _get("knn_accuracy"),
                         higher=True, kind="sanity"),
    ]
    # one tallied row: the readings at H − 1 (the paper's setting), at H/2, over k
    readings = [difference_claim(
        NAME, _at_k(sweep, ks, k), f"{k_label(k)} of {heads} Laplacian heads raise "
        "linear-probe accuracy", SRC, "ImageNet linear probe improves", k_label(k),
        k_label(0), "linear-probe accuracy", _get("linear_accuracy"), higher=True,
        label=k_label(k), **stand_in) for k in reversed(claim_ks(heads))]
    by_k = {k: k_label(k) for k in ks}
    readings.append(lap.monotone_claim(
        NAME, _over_k(sweep, ks), "Linear-probe accuracy rises at every step of the number k "
        "of Laplacian heads (monotone)", SRC, "more Laplacian heads, better features", by_k,
        "linear-probe accuracy", _get("linear_accuracy"), higher=True,
        how=lap.more_k_hint(NAME, settings), **stand_in))
    claims.append(lap.finding(NAME, "Laplacian heads raise linear-probe accuracy", readings,
                              primary=readings[0].label,  # H − 1: the paper's setting
                              catalogue="laplacian.dino-linear-probe"))
    claims.extend(difference_claim(
        NAME, _at_k(sweep, ks, k), f"{k_label(k)}: fewer components explain 99% of patch-token "
        "variance", SRC, "faster spectral decay", k_label(k), k_label(0), "PCs for 99%",
        _get("patch_components_99"), higher=False, catalogue="laplacian.dino-spectral-decay",
        **stand_in)
        for k in claim_ks(heads)[-1:])  # H − 1, the paper's setting
    return claims


def referee(settings: dict) -> Referee:
    t, cfg = settings["train"], backbone_config(settings)
    grid = cfg.image_size // cfg.patch_size
    return Referee(
        question="Do Laplacian heads improve self-supervised DINO features (linear probe, "
                 "segmentation: ADE20K mIoU 29.81 → 32.27 with 5 of 6 heads)?",
        can_say="k-NN / linear-probe accuracy and the foreground mIoU of a linear probe on "
                "frozen patch tokens of a tiny DINO ViT on small grey images, against k = 0 "
                "and random backbones; the mIoU is a stand-in for ADE20K segmentation mIoU "
                "(two classes, not 150), compared as a ratio.",
        gap=[("model", "ViT-S, 6 heads", model_label(t)),
             ("data", "ImageNet-1k; ADE20K", t.get("data", "—")),
             ("patch tokens", "16×16 px of 224 (196)",
              f"{cfg.patch_size}×{cfg.patch_size} px of {cfg.image_size} ({grid * grid})"),
             ("steps", UNRECORDED, str(t.get("steps", "—"))),
             ("k of H", "5 of 6", f"{sorted(settings['ks'])} of {cfg.n_heads}"),
             ("seeds", UNRECORDED, str(len(settings["seeds"])))])


def _pca_figure(settings: dict, sweep: SweepResults, fig_dir: Path) -> Path | None:
    import torch

    from tokengeo.data import load_dataset
    from tokengeo.data.splits import evenly_spaced
    from tokengeo.dino.segmentation import save_pca_figure

    seed, H = settings["seeds"][0], backbone_config(settings).n_heads
    shown = [k for k in dict.fromkeys((0, H // 2, H - 1, H)) if k in settings["ks"]]
    rows = {k_label(k): torch.tensor(sweep.raw(k_label(k), seed)["pca_patches"]) for k in shown}
    data = load_dataset(settings["train"]["data"], **settings["train"].get("data_options", {}))
    images, _ = data.split("test")[evenly_spaced(len(data.split("test")), PCA_IMAGES)]
    grid = int(next(iter(rows.values())).shape[1] ** 0.5)
    return save_pca_figure(images, rows, grid, fig_dir / "pca_patch_tokens.png",
                           "first 3 principal components of patch tokens (RGB), seed "
                           f"{seed}")


def summarise(settings: dict, results: dict[str, CellResult], ctx: SuiteContext) -> SuiteOutput:
    labels = _labels(settings)
    fig_dir = ctx.figure_dir
    sweep = _sweep(settings).results(results, ctx.skipped)
    out = SuiteOutput(NAME, TITLE, PAPER, _claims(settings, sweep), paper_key=PAPER_KEY,
                      referee=referee(settings))
    if sweep.not_run():
        return out
    cols = {"k-NN acc": _get("knn_accuracy"), "linear acc": _get("linear_accuracy"),
            "seg mIoU": _get("seg_miou"), "chance mIoU": _get("seg_chance_miou"),
            "patch PCs 99%": _get("patch_components_99"),
            "decay α": _get("patch_decay_alpha"), "spread": _get("embedding_spread")}
    header, rows = metric_table(sweep, cols)
    out.tables.append(("DINO backbones and random ones (mean ± std over seeds)", header, rows))
    ks = sorted(settings["ks"])

    def series(*specs: tuple[str, str, str]) -> dict[str, list[list[float]]]:
        return {name: [sweep.values(f"{pre}{lab}", _get(key)) for lab in labels]
                for name, pre, key in specs}
    out.add_figure(
        line_figure, fig_dir / "accuracy_vs_k.png", ks,
        series(("k-NN (DINO)", "", "knn_accuracy"), ("linear (DINO)", "", "linear_accuracy"),
               ("k-NN (random)", RANDOM, "knn_accuracy"),
               ("linear (random)", RANDOM, "linear_accuracy")),
        "Laplacian heads per layer (k)", "test accuracy", "frozen-feature accuracy")
    out.add_figure(
        line_figure, fig_dir / "segmentation_vs_k.png", ks,
        series(("DINO", "", "seg_miou"), ("random backbone", RANDOM, "seg_miou"),
               ("constant (chance)", "", "seg_chance_miou")),
        "Laplacian heads per layer (k)", "foreground mIoU (test patches)",
        "linear segmentation probe on frozen patch tokens")
    out.add_figure(_pca_figure, settings, sweep, fig_dir)
    warnings = sorted({w for r in results.values() for w in r.value.get("warnings", [])})
    ev = settings["evaluation"]
    out.notes.append(
        f"Pre-training: {settings['train']}; seeds {settings['seeds']}. Teacher backbones "
        f"scored on {ev['n_test']} test images with {ev['n_train']} training images "
        "(k-NN bank, probe training set); the probe's L2 penalty is chosen on validation "
        "images. Segmentation: ridge regression from each frozen patch token to its patch's "
        f"foreground share (pixels > 0), fitted on {ev['n_seg_train']} training images (its "
        "penalty picked on their last fifth), a patch predicted foreground above 1/2, scored "
        "by the two-class mIoU over all test patches; chance is the mIoU of predicting the "
        "training majority class everywhere.")
    out.notes.extend(f"Warning from a run: {w}" for w in warnings)
    return out


def check(where: str, settings: dict) -> None:
    """``ks`` as every suite over k (:func:`~tokengeo.experiments.validation.check_ks`)."""
    from tokengeo.experiments.validation import check_ks

    check_ks(where, settings)


SUITE = Suite(NAME, TITLE, PAPER, SETTINGS, cells, summarise, check)
