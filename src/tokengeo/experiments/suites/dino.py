"""Suite ``dino``: Zhang & Papyan (arXiv 2602.09297), self-supervised setting.

DINO pre-training (Caron et al. 2021) of a ViT on Fashion-MNIST images with k of H heads
Laplacian in every layer, several seeds; the frozen teacher backbone is scored by k-NN and
linear-probe accuracy, the spectrum of its patch tokens and the IoU of a PCA foreground
segmentation (``tokengeo.dino``); randomly initialised backbones of the same
architectures give the floor.

Settings: ``ks``, ``seeds``, ``n_heads`` (H of the model), ``main_k`` (the k compared with
k = 0 in the segmentation and spectrum claims; the paper's 5 of 6 heads is H - 1 when
absent), ``evaluation`` (``n_train``, ``n_test``), ``cell_cost`` (estimated 1-thread CPU
seconds of one pre-training, a scheduling hint),
``train`` (TrainConfig fields; ``task_options`` are DINOConfig fields); ``skip`` (a
reason: no cell runs, every claim is reported as not run).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import tokengeo.dino  # noqa: F401 (registers --task dino, which these cells train)
from tokengeo.experiments.cells import Cell, CellResult
from tokengeo.experiments.claims import family
from tokengeo.experiments.report import Referee, SuiteOutput
from tokengeo.experiments.settings import Setting, keys, train_table_with
from tokengeo.experiments.suite import Suite, SuiteContext
from tokengeo.experiments.summary import UNRECORDED
from tokengeo.experiments.sweep import (
    Sweep,
    SweepResults,
    difference_claim,
    line_figure,
    metric_table,
    model_label,
    run_folder,
)

SETTINGS = {  # suites/dino.toml: [common] + [quick] or [full]
    "seeds": Setting("int_list"),
    "ks": Setting("int_list"),
    "n_heads": Setting("int", lo=1),
    "evaluation": Setting("table", check=keys(n_train="int", n_test="int")),
    "train": Setting("table", check=train_table_with(task="dino")),
    "cell_cost": Setting("number", required=False),
    "main_k": Setting("int", required=False),
}

NAME = "dino"
TITLE = "Laplacian heads: self-supervised DINO"
PAPER = ("Zhang & Papyan, \"Laplacian Heads Improve Transformers by Smoothing Token "
         "Representations\", arXiv 2602.09297 (DINO: Caron et al., ICCV 2021)")
SRC = "Zhang & Papyan 2026, Sec. 5.3 (DINO ViT-S, ImageNet-1k; ADE20K)"
SRC_DINO = "Caron et al. 2021, Sec. 4 (k-NN of DINO features)"
PAPER_KEY = "Zhang & Papyan (Laplacian heads)"
MIOU_RATIO = 32.27 / 29.81  # ADE20K mIoU, 5 of 6 heads Laplacian / none
PCA_IMAGES = 8  # test images shown in the PCA-of-patch-tokens figure
# what the cells return and summarise reads (random_cell: the same without the last three)
RANDOM_FIELDS = ("knn_accuracy", "linear_accuracy", "iou", "patch_components_99",
                 "patch_decay_alpha", "embedding_spread")
DINO_FIELDS = (*RANDOM_FIELDS, "pca_patches", "wall_time_s", "warnings")


def _evaluate(model, data, ev: dict, with_patches: bool) -> dict:
    from tokengeo.dino.evaluate import evaluate_backbone
    from tokengeo.dino.segmentation import example_patch_tokens

    out = evaluate_backbone(model, data, ev["n_train"], ev["n_test"]).to_dict()
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
    return [f"k={k}" for k in settings["ks"]]


RANDOM = "random-"  # label prefix of the randomly initialised backbones


def _sweep(settings: dict) -> Sweep:
    """DINO pre-trainings and random backbones, one of each per (k, seed), same config."""
    ks = {f"k={k}": {"n_laplacian": k} for k in settings["ks"]}
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


def _main_k(settings: dict) -> int:
    return int(settings.get("main_k", settings["n_heads"] - 1))


def _get(key: str):
    return lambda v: v[key]


def proxy(settings: dict) -> str:
    t = settings["train"]
    return f"DINO {model_label(t)} on {t['data']} for DINO ViT-S on ImageNet-1k / ADE20K"


def _claims(settings: dict, sweep: SweepResults) -> list:
    labels = _labels(settings)
    base, main = "k=0", f"k={_main_k(settings)}"
    stand_in = {"kind": "stand-in", "proxy": proxy(settings)}
    claims = [difference_claim(NAME, sweep, "DINO pre-training beats a random backbone in "
                               "k-NN accuracy (k=0)", SRC_DINO, "far above random",
                               "k=0", "random-k=0", "k-NN accuracy", _get("knn_accuracy"),
                               higher=True, kind="sanity")]
    members = [difference_claim(
        NAME, sweep, f"{lab} Laplacian heads raise linear-probe accuracy", SRC,
        "ImageNet linear probe improves", lab, base, "linear-probe accuracy",
        _get("linear_accuracy"), higher=True, label=lab, **stand_in) for lab in labels[1:]]
    claims.append(members[0] if len(members) == 1 else family(
        NAME, "Laplacian heads raise linear-probe accuracy (some k)", members, rule="any"))
    claims.append(difference_claim(
        NAME, sweep, f"{main}: PCA foreground IoU of patch tokens rises", SRC,
        "ADE20K mIoU 29.81 → 32.27 (5 of 6 heads), ×1.083", main, base, "IoU", _get("iou"),
        higher=True, ratio=True, paper_effect=math.log(MIOU_RATIO),
        **{**stand_in, "proxy": stand_in["proxy"] + "; PCA foreground IoU for mIoU"}))
    claims.append(difference_claim(
        NAME, sweep, f"{main}: fewer components explain 99% of patch-token variance", SRC,
        "faster spectral decay", main, base, "PCs for 99%", _get("patch_components_99"),
        higher=False, **stand_in))
    return claims


def referee(settings: dict) -> Referee:
    t = settings["train"]
    return Referee(
        question="Do Laplacian heads improve self-supervised DINO features (linear probe, "
                 "segmentation: ADE20K mIoU 29.81 → 32.27 with 5 of 6 heads)?",
        can_say="k-NN / linear-probe accuracy and a PCA foreground IoU of a tiny DINO ViT "
                "on small grey images, against k = 0 and random backbones; the IoU is a "
                "stand-in for segmentation mIoU, compared as a ratio.",
        gap=[("model", "ViT-S, 6 heads", model_label(t)),
             ("data", "ImageNet-1k; ADE20K", t.get("data", "—")),
             ("steps", UNRECORDED, str(t.get("steps", "—"))),
             ("k of H", "5 of 6", f"{_main_k(settings)} of {settings['n_heads']}"),
             ("seeds", UNRECORDED, str(len(settings["seeds"])))])


def _pca_figure(settings: dict, sweep: SweepResults, fig_dir: Path) -> Path | None:
    import torch

    from tokengeo.data import load_dataset
    from tokengeo.data.splits import evenly_spaced
    from tokengeo.dino.segmentation import save_pca_figure

    seed, H = settings["seeds"][0], settings["n_heads"]
    shown = [k for k in (0, H // 2, H - 1, H) if k in settings["ks"]]
    rows = {f"k={k}": torch.tensor(sweep.raw(f"k={k}", seed)["pca_patches"]) for k in shown}
    data = load_dataset(settings["train"]["data"])
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
            "PCA IoU": _get("iou"), "patch PCs 99%": _get("patch_components_99"),
            "decay α": _get("patch_decay_alpha"), "spread": _get("embedding_spread")}
    header, rows = metric_table(sweep, cols)
    out.tables.append(("DINO backbones and random ones (mean ± std over seeds)", header, rows))
    ks = list(settings["ks"])
    out.add_figure(
        line_figure, fig_dir / "accuracy_vs_k.png", ks,
        {name: [sweep.values(f"{pre}{lab}", _get(key)) for lab in labels]
         for name, pre, key in (("k-NN (DINO)", "", "knn_accuracy"),
                                ("linear (DINO)", "", "linear_accuracy"),
                                ("k-NN (random)", "random-", "knn_accuracy"))},
        "Laplacian heads per layer (k)", "test accuracy", "frozen-feature accuracy")
    out.add_figure(_pca_figure, settings, sweep, fig_dir)
    warnings = sorted({w for r in results.values() for w in r.value.get("warnings", [])})
    ev = settings["evaluation"]
    out.notes.append(
        f"Pre-training: {settings['train']}; seeds {settings['seeds']}. Teacher backbones "
        f"scored on {ev['n_test']} test images with {ev['n_train']} training images "
        "(k-NN bank, probe training set); the probe's L2 penalty is chosen on validation "
        "images. IoU: first principal component of each image's patch tokens thresholded "
        "at 0, its sign matched to the mask (so a random backbone is the chance level).")
    out.notes.extend(f"Warning from a run: {w}" for w in warnings)
    return out


SUITE = Suite(NAME, TITLE, PAPER, SETTINGS, cells, summarise)
