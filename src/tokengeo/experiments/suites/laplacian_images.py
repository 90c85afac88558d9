"""Suite ``laplacian-images``: Zhang & Papyan (arXiv 2602.09297), image classification.

A ViT on Fashion-MNIST (the offline stand-in for ImageNet / CIFAR; 8x8 digits in the quick
run, where a small ViT reaches its plateau in the time budget) trained with k of H heads
Laplacian in every layer, for every k in the settings' list (0, H // 2 and H at least),
several seeds; test accuracy and the geometry of the tokens on test images, after the final
norm and after every block. The paper (abstract, Sec. 4, Fig. 2): accuracy rises nearly
monotonically with k, its best ViT has all heads Laplacian; "in supervised learning,
Laplacian heads collapse token representations within the same sequence and align the
sequence means with the geometry of Neural Collapse" (NC2: class means of the sequence
means approach a simplex ETF, Papyan et al. 2020), and "lead to faster-decaying spectra"
(fewer principal components per image).

Claims: one tallied row per metric
(:func:`~tokengeo.experiments.suites.laplacian_sweep.k_finding`), an "any" family over its
readings: k = H against k = 0 (the headline), the ks between (an "any" family), the trend
over every k; for the geometry also k = H against k = 0 after every block (an "all" family,
:func:`~tokengeo.experiments.suites.laplacian_sweep.layer_claim`).

Settings: ``ks``, ``seeds``, ``geometry_examples``, ``cell_cost`` (estimated 1-thread CPU
seconds of one cell, a scheduling hint), ``train`` (TrainConfig fields).
"""

from __future__ import annotations

from tokengeo.experiments.cells import Cell, CellResult
from tokengeo.experiments.decidability import sweep_tests
from tokengeo.experiments.report import Referee, SuiteOutput
from tokengeo.experiments.suite import Suite, SuiteContext
from tokengeo.experiments.suites import laplacian_sweep as lap
from tokengeo.experiments.summary import UNRECORDED
from tokengeo.experiments.sweep import geometry_metric as geo
from tokengeo.experiments.sweep import model_label

SETTINGS = lap.SETTINGS  # laplacian-images.toml: [common] + [quick] or [full]

NAME = "laplacian-images"
TITLE = "Laplacian heads: image classification"
PAPER = lap.PAPER
SRC_ACC = "Zhang & Papyan 2026, Sec. 5.1 and Fig. 2 (ViT, ImageNet-1k / CIFAR-100)"
SRC_GEO = "Zhang & Papyan 2026, abstract and Sec. 4 (token geometry, per layer)"
PAPER_KEY = lap.PAPER_KEY
IMAGENET_GAIN = 82.32 - 81.45  # points of top-1 accuracy, all heads Laplacian (the smaller gain)
GEOMETRY_KIND = "classification"
# cells cached before per-layer geometry, or before the interpolated count, are recomputed
FIELDS = (lap.GEOMETRY_LAYERS, "geometry.components_99_interp")


def _acc(r) -> float:
    return r.metric("test", "accuracy")


ACCURACY = lap.KMetric(
    "test accuracy", _acc, True, "Laplacian heads raise test accuracy",
    "ImageNet 81.45 → 82.32 (all heads Laplacian); CIFAR-100 75.12 → 77.04; nearly "
    "monotone in k", SRC_ACC, paper_effect=IMAGENET_GAIN / 100,
    catalogue="laplacian.vit-accuracy")


def _geometry(name: str, key: str, higher: bool, text: str, paper: str,
              discrete: bool = False, catalogue: str | None = None) -> lap.KMetric:
    return lap.KMetric(name, geo(key), higher, text, paper, SRC_GEO, discrete=discrete,
                       geometry_key=key, catalogue=catalogue)


GEOMETRY = [
    _geometry("within-seq share", "within_sequence_share", False,
              "within-sequence variance share falls", "lower",
              catalogue="laplacian.vit-within-sequence"),
    _geometry("between-class share", "between_class_share", True,
              "between-class variance share (of sequence means) rises", "higher",
              catalogue="laplacian.vit-between-class"),
    _geometry("NC1", "nc1", False, "neural collapse strengthens (NC1 falls)", "lower",
              catalogue="laplacian.vit-neural-collapse"),
    _geometry("NC2 ETF dist", "nc2_etf_error", False,
              "sequence means closer to a simplex ETF (NC2 ETF distance falls)",
              "aligned with neural-collapse geometry",
              catalogue="laplacian.vit-sequence-means-etf"),
    # the pooled count, interpolated between integers (continuous: a t interval over seeds
    # decides it; the integer count's sign-flip test cannot with fewer than 6 seeds). The
    # paper states faster spectral decay for the LM and DINO, not for supervised ViTs: a
    # new question here (no catalogue entry), one row; the per-image count is a table
    _geometry("PCs for 99% (interpolated)", "components_99_interp", False,
              "fewer principal components explain 99% of token variance", "fewer"),
    _geometry("PCs 99% per image", "components_99_per_image", False,
              "fewer principal components explain 99% of each image's token variance",
              "fewer (faster-decaying spectra)"),
]
TABLE_ONLY = ("PCs 99% per image",)  # the same claim as the pooled count: a table, no row
LAYER_TABLES = ("within_sequence_share", "between_class_share", "nc1", "nc2_etf_error",
                "components_99_per_image")


def proxy(settings: dict) -> str:
    t = settings["train"]
    return f"{model_label(t)} on {t.get('data')} for ViT-S/B on ImageNet-1k / CIFAR-100"


def referee(settings: dict) -> Referee:
    t = settings["train"]
    heads = lap.headline_ks(settings)[0]
    return Referee(
        question="Do k of H Laplacian heads per layer raise a ViT's accuracy, the more so "
                 "the larger k, and smooth its token geometry layer by layer "
                 "(within-sequence collapse, neural-collapse alignment, faster-decaying "
                 "spectra)?",
        can_say="the direction of each effect and its trend over every k in a small ViT "
                "on a small image set, paired by seed, at the final layer and after every "
                "block; the paper's +0.87 point gain (all heads Laplacian) sits against "
                "this run's smallest detectable effect in the power table.",
        gap=[("model", "ViT-B, 12 layers (ImageNet-1k), CIFAR-100 ViTs", model_label(t)),
             ("data", "ImageNet-1k / CIFAR-100", t.get("data", "—")),
             ("steps", UNRECORDED, str(t.get("steps", "—"))),
             ("seeds", UNRECORDED, str(len(settings["seeds"]))),
             ("k of H", "0 … 12 of 12", ", ".join(map(str, settings["ks"]))
              + f" of {heads}")])


def cells(settings: dict, ctx: SuiteContext) -> list[Cell]:
    return lap.cells(NAME, settings, ctx, GEOMETRY_KIND, FIELDS)


def claims(settings: dict, sweep) -> list:
    """Accuracy over k; each geometry metric over k and, at k = H, after every block."""
    stand_in = {"kind": "stand-in", "proxy": proxy(settings)}
    out = [lap.k_finding(NAME, sweep, settings, ACCURACY, **stand_in)]
    out += [lap.k_finding(NAME, sweep, settings, m, blocks=True, **stand_in)
            for m in GEOMETRY if m.name not in TABLE_ONLY]
    smooth = lap.smoothing_output(NAME, sweep, settings, **stand_in)
    smooth[0].catalogue = "laplacian.diffusion-smooths"  # the paper's setting: a ViT
    return out + smooth


def summarise(settings: dict, results: dict[str, CellResult], ctx: SuiteContext) -> SuiteOutput:
    sweep = lap.results(NAME, settings, results, ctx, GEOMETRY_KIND, FIELDS)
    out = SuiteOutput(NAME, TITLE, PAPER, claims(settings, sweep), paper_key=PAPER_KEY,
                      referee=referee(settings))
    if sweep.not_run():
        return out
    cols = {"test acc": _acc, "within-seq share": geo("within_sequence_share"),
            "between-class share": geo("between_class_share"), "NC1": geo("nc1"),
            "NC2 ETF dist": geo("nc2_etf_error"), "NC2 norm std/mean": geo("nc2_equinorm"),
            "NC2 |cos+1/(C-1)|": geo("nc2_max_angle"), "PCs for 99%": geo("components_99"),
            "PCs 99% per image": geo("components_99_per_image")}
    out.tables.append(lap.per_k_table(sweep, cols))
    names = {m.geometry_key: m.name for m in GEOMETRY}
    out.tables += [lap.layer_table(sweep, settings, names[key], key) for key in LAYER_TABLES]
    fig_dir, model = ctx.figure_dir, model_label(settings["train"])
    out.add_figure(lap.k_figure, fig_dir / "accuracy_vs_k.png", settings, sweep,
                   {"test accuracy": _acc}, "test accuracy")
    out.add_figure(lap.k_figure, fig_dir / "geometry_vs_k.png", settings, sweep,
                   {"within-seq share": geo("within_sequence_share"),
                    "between-class share": geo("between_class_share")},
                   "share of token variance", f"token geometry (test), {model}")
    for key, what in (("within_sequence_share", "within-sequence variance share"),
                      ("between_class_share", "between-class variance share")):
        out.add_figure(lap.layer_figure, fig_dir / f"{key}_by_layer.png", settings, sweep,
                       key, what, f"{what} after each block (test), {model}")
    lap.add_smoothing(out, sweep, settings, fig_dir)
    if settings.get("curve_every"):
        add_curves(out, sweep, settings, fig_dir)
    n_geo = settings.get("geometry_examples", 1000)
    out.notes.append(f"Training: {settings['train']}; seeds {settings['seeds']}. Geometry of "
                     f"the tokens of {n_geo} test images after the final norm (claims per k) "
                     "and after every block (per-layer claims and tables: the residual "
                     "stream before the final norm). Smoothing sign: every head of every "
                     "trained model on the first "
                     f"{lap.smoothing_examples(settings)} "
                     "test images (one forward pass).")
    return out


CURVE_COLUMNS = {"test acc": ("metrics", "accuracy"),
                 "within-seq share": ("geometry", "within_sequence_share"),
                 "between-class share": ("geometry", "between_class_share"),
                 "NC1": ("geometry", "nc1"), "NC2 ETF dist": ("geometry", "nc2_etf_error"),
                 "PCs for 99%": ("geometry", "components_99"),
                 "PCs 99% per image": ("geometry", "components_99_per_image")}


def add_curves(out: SuiteOutput, sweep, settings: dict, fig_dir) -> None:
    """Accuracy and geometry along training (``curve_every``): "late in training" visible."""
    if any(sweep.typed(lab, s).curve is None for lab in sweep.labels for s in sweep.seeds):
        out.notes.append("No learning curves: some cell has none (run before curve_every).")
        return
    out.tables.append(lap.curve_table(sweep, settings, CURVE_COLUMNS))
    model = model_label(settings["train"])
    out.add_figure(lap.curve_figure, fig_dir / "accuracy_along_training.png", settings, sweep,
                   "metrics", "accuracy", "test accuracy", f"test accuracy along training, {model}")
    out.add_figure(lap.curve_figure, fig_dir / "nc1_along_training.png", settings, sweep,
                   "geometry", "nc1", "NC1", f"neural collapse (NC1, test) along training, {model}")


SUITE = Suite(NAME, TITLE, PAPER, SETTINGS, cells, summarise, lap.check,
              planned=sweep_tests(GEOMETRY))
