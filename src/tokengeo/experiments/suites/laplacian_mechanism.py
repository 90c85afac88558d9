"""Suite ``laplacian-mechanism``: is it I − P that smooths? (Zhang & Papyan, arXiv 2602.09297)

The paper's mechanism: a Laplacian head outputs (I − P) V, and I − P gives direct control of
the within-sequence variance of the tokens. Every head here outputs ``a V + b P V`` in the
last ``k`` heads of every layer of a ViT (the others attention), and three sets of runs,
paired by seed, ask where that control comes from:

* **learned**: mixed heads started as attention, (a, b) = (0, 1), learn (a, b) with the
  rest. The function depends on each head's (a, b) only through its line {c (a, b)}: the
  output projection absorbs any scale c, its sign included. So a head is read by its angle
  ψ = atan2(b, a) mod 180° (attention 90°, Laplacian (1, −1) 135°, V + P V 45°, V alone
  0°); both neighbours of attention are 45° from it, one on each side. Claims: ψ moves
  towards 135° (mean of ψ − 90° over heads, per seed) and ends nearer the Laplacian's line
  than attention's.
* **path**: fixed (a, b) = (t, 1 − 2t) for ``path_points`` values of t from 0 (attention)
  to 1 (the Laplacian): the within-sequence variance share of each layer's tokens and the
  test accuracy against t (trend claims: slope over t and Page's L). The path is linear in
  (a, b); in ψ it runs 90° → 63° (t = 1/4) → 0° (t = 1/2) → 146°
  (t = 3/4) → 135°. At t = 1/2 the head is 0.5 V and mixes no tokens: that model is no
  transformer, so the path skips the point (``path_points`` ≥ 4 keeps three t besides it;
  said in the report's notes).
* **control** (1, 1): V + P V adds V back without subtracting P V. If the smoothing comes
  from subtracting P V, (1, 1) does not lower the within-sequence share as (1, −1) does.

Fixed (a, b) run as mixed heads frozen at (a, b) (:func:`tokengeo.nn.heads.
freeze_mixed_heads`; the same values and gradients as a ``fixed`` head, tested), because a
training config names only the ``mixed`` kind. AdamW's weight decay acts on every matrix,
the (k, 2) table of (a, b) included, and would pull the learned (a, b) towards (0, 0): the
train table must set ``weight_decay = 0``.

Per-layer geometry: the tokens after the embedding (depth 0) and after each block
(``blocks.{l}.hook_resid_post``, depth l + 1) of fixed test images, each reduced by
:func:`tokengeo.probes.geometry.variance_decomposition`.

Settings: ``seeds``, ``k`` (chosen heads per layer, the last k; k = H: all heads, as the
paper's best ViT), ``path_points`` (t = j / (n − 1)), ``geometry_examples``, ``train``
(TrainConfig fields, without ``n_laplacian`` / ``head_kind``, which the suite sets),
``cell_cost``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from tokengeo.errors import ConfigError
from tokengeo.experiments.cells import Cell, CellResult
from tokengeo.experiments.claims import Claim, family
from tokengeo.experiments.report import Referee, SuiteOutput
from tokengeo.experiments.settings import Setting, train_table_with
from tokengeo.experiments.stats import Region, mean_interval
from tokengeo.experiments.suite import Suite, SuiteContext
from tokengeo.experiments.suites import laplacian_sweep as lap
from tokengeo.experiments.suites.mechanism_readings import (  # noqa: F401 (the suite's names)
    CONTROL,
    LEARNED,
    accuracy,
    line_angle,
    path_label,
    share,
)
from tokengeo.experiments.sweep import (
    Sweep,
    SweepResults,
    difference_claim,
    model_label,
    run_folder,
    trend_claim,
)
from tokengeo.experiments.training import TRAIN_FIELDS

NAME = "laplacian-mechanism"
TITLE = "Laplacian heads: the mechanism (I − P and within-sequence variance)"
PAPER, PAPER_KEY = lap.PAPER, lap.PAPER_KEY
SRC = "Zhang & Papyan 2026, Sec. 3-4 (I − P and within-sequence variance)"
CONTROL_AB = (1.0, 1.0)
ATTENTION_DEG, LAPLACIAN_DEG = 90.0, 135.0  # the lines of (0, 1) and (1, −1)
SUITE_SETS = ("n_laplacian", "head_kind")  # train fields the suite sets itself
CELL_FIELDS = TRAIN_FIELDS + ("layers", "coefficients", "smoothing", "sublayer_smoothing")
SMOOTHING_EXAMPLES = 64  # held-out test images of each cell's smoothing sign (one batch)
MIXED = "mixed"  # head_smoothing's kind of the chosen heads (a V + b P V, learnt or frozen)


def _check_train(table: dict, where: str) -> None:
    set_here = [f for f in SUITE_SETS if f in table]
    over = table.get("model_overrides", {})
    set_here += [f"model_overrides.{f}" for f in (*SUITE_SETS, "mixed_init", "laplacian_heads")
                 if isinstance(over, dict) and f in over]
    if set_here:
        raise ConfigError(f"{where}: {set_here} are set by the suite (mixed heads from "
                          "attention in the last k heads); drop them")
    if table.get("weight_decay") != 0:
        raise ConfigError(f"{where}: weight_decay = {table.get('weight_decay', '0.05 (default)')}"
                          " must be 0: AdamW decays the (k, 2) table of learned (a, b) towards "
                          "(0, 0); set weight_decay = 0")
    train_table_with(n_laplacian=0, head_kind="mixed")(table, where)


SETTINGS = {
    "seeds": Setting("int_list"),
    "k": Setting("int", lo=1),
    "path_points": Setting("int", lo=4),  # 3 points of t besides the degenerate 1/2
    "geometry_examples": Setting("int", lo=2),
    "train": Setting("table", check=_check_train),
    "cell_cost": Setting("number", required=False),
}


def check(settings: dict) -> None:
    """What the schema cannot see: k fits the model's heads."""
    from tokengeo.experiments.validation import heads_of

    heads, source = heads_of(settings)
    if heads is not None and settings["k"] > heads:
        raise ConfigError(f"{NAME}: k = {settings['k']} but {source} has {heads} heads per "
                          f"layer; k must lie in 1..{heads}")


# ---- variants -----------------------------------------------------------------------------


def degenerate(t: float) -> bool:
    """(t, 1 − 2t) at t = 1/2 is (0.5, 0): 0.5 V, a head that mixes no tokens (a model
    with no attention at all), so the path skips it."""
    return abs(1.0 - 2.0 * t) < 1e-12


def path_ts(settings: dict) -> list[float]:
    """t = j / (n − 1), j = 0 … n − 1, less the degenerate t = 1/2 (:func:`degenerate`)."""
    n = settings["path_points"]
    return [t for t in (j / (n - 1) for j in range(n)) if not degenerate(t)]


def coefficients(settings: dict) -> dict[str, tuple[float, float] | None]:
    """Each variant's fixed (a, b); None for the learned one."""
    out: dict[str, tuple[float, float] | None] = {LEARNED: None}
    out.update({path_label(t): (t, 1.0 - 2.0 * t) for t in path_ts(settings)})
    out[CONTROL] = CONTROL_AB
    return out


def sweep(settings: dict) -> Sweep:
    over = {**settings["train"].get("model_overrides", {}), "mixed_init": "attention"}
    mixed = {"n_laplacian": settings["k"], "head_kind": "mixed", "model_overrides": over}
    return Sweep(NAME, dict.fromkeys(coefficients(settings), mixed), tuple(settings["seeds"]),
                 dict(settings["train"]), CELL_FIELDS, float(settings.get("cell_cost", 1.0)),
                 parse=dict)


def cells(settings: dict, ctx: SuiteContext) -> list[Cell]:
    check(settings)
    ab = coefficients(settings)

    def make(label: str, seed: int, cfg: dict):
        return mechanism_cell, {"run_dir": run_folder(ctx, NAME, label, seed, cfg),
                                "config": cfg, "coefficients": ab[label],
                                "geometry_examples": settings["geometry_examples"]}
    return sweep(settings).cells(make)


# ---- the cell -----------------------------------------------------------------------------


def mechanism_cell(run_dir: str, config: dict[str, Any], coefficients: list | None,
                   geometry_examples: int) -> dict:
    """Train ``config`` (mixed heads from attention) with its mixed heads frozen at
    ``coefficients`` (None: learnt); return the final metrics, per-layer variance shares of
    test tokens, every head's (a, b) and its smoothing sign on held-out test images
    (:func:`~tokengeo.experiments.training.smoothing_fields`)."""
    from tokengeo.experiments.training import open_trainer, smoothing_fields
    from tokengeo.nn.heads import freeze_mixed_heads

    trainer = open_trainer(Path(run_dir), config)
    if coefficients is not None:  # again after a resume: requires_grad is not saved
        freeze_mixed_heads(trainer.model, coefficients)
    summary = trainer.fit()
    return {"final": summary["final"], "parameters": summary["parameters"],
            "wall_time_s": summary["wall_time_s"], "step": summary["step"],
            "layers": layer_shares(trainer.model, trainer.task, geometry_examples),
            "coefficients": head_coefficients(trainer.model),
            **smoothing_fields(trainer.model, trainer.task, "test", SMOOTHING_EXAMPLES)}


def head_coefficients(model) -> list[list[list[float]]]:
    """(a, b) of every head, ``[layer][head] = [a, b]``."""
    out = []
    for block in model.blocks:
        a, b = block.attn.head_coefficients()  # (H,) each
        out.append([[float(x), float(y)] for x, y in zip(a.tolist(), b.tolist(), strict=True)])
    return out


def layer_shares(model, task, max_examples: int, split: str = "test",
                 batch_size: int = 256) -> dict[str, list[float]]:
    """Within-sequence and between-class shares of the token variance at every depth
    (0: the embedded tokens, l + 1: after block l), on ``max_examples`` images of ``split``.

    Shares of the total token variance of that depth (law of total variance, Zhang &
    Papyan Sec. 4; :func:`tokengeo.probes.geometry.variance_decomposition`)."""
    import torch

    from tokengeo.probes.capture import capture
    from tokengeo.probes.geometry import variance_decomposition

    names = ["hook_embed"] + [f"blocks.{i}.hook_resid_post" for i in range(len(model.blocks))]
    model.eval()
    idx = task.eval_indices(split, max_examples)
    per_depth: list[list[torch.Tensor]] = [[] for _ in names]
    labels = []
    with torch.no_grad(), capture(model, names) as cache:
        for chunk in idx.split(batch_size):
            b = task.batch(split, chunk)
            if b.attention_mask is not None:
                raise ConfigError(f"{NAME} measures images; this task pads its inputs")
            model(b.inputs)
            for store, name in zip(per_depth, names, strict=True):
                store.append(cache[name].float().cpu())  # (B, T, d)
            labels.append(b.targets.cpu())
    y = torch.cat(labels)
    out: dict[str, list[float]] = {"within_sequence_share": [], "between_class_share": []}
    for store in per_depth:
        var = variance_decomposition(torch.cat(store), y)
        out["within_sequence_share"].append(var.within_sequence / var.total)
        out["between_class_share"].append(var.between_class / var.total)
    return out


# ---- what the cells say -------------------------------------------------------------------


def line_distance(psi: float, to: float) -> float:
    """Angle between two lines, in [0, 90]."""
    d = abs(psi - to) % 180.0
    return min(d, 180.0 - d)


def chosen_heads(value: dict, k: int) -> list[tuple[int, float, float]]:
    """(layer, a, b) of the last ``k`` heads of every layer (the mixed ones)."""
    return [(layer, a, b) for layer, row in enumerate(value["coefficients"])
            for a, b in row[len(row) - k:]]


def rotation(k: int) -> Callable[[dict], float]:
    """Mean over the chosen heads of ψ − 90°: > 0 towards the Laplacian's line (135°),
    < 0 towards V + P V's (45°)."""
    def get(value: dict) -> float:
        heads = chosen_heads(value, k)
        return sum(_signed(line_angle(a, b)) for _, a, b in heads) / len(heads)
    return get


def _signed(psi: float) -> float:
    return psi - ATTENTION_DEG  # ψ in [0, 180): −90 .. 90 around attention


def nearer_laplacian(k: int) -> Callable[[dict], float]:
    """Mean over the chosen heads of (angle to attention's line) − (angle to the
    Laplacian's line): > 0 when the heads sit nearer the Laplacian."""
    def get(value: dict) -> float:
        heads = chosen_heads(value, k)
        return sum(line_distance(line_angle(a, b), ATTENTION_DEG)
                   - line_distance(line_angle(a, b), LAPLACIAN_DEG)
                   for _, a, b in heads) / len(heads)
    return get


def last_depth(settings: dict) -> int:
    """The depth of the last block's output: the model's number of layers (depth 0 is the
    embedding), read from the registry's config of the train table."""
    from tokengeo.models.registry import get_entry

    t = settings["train"]
    return int(get_entry(t["model"]).config(**t.get("model_overrides", {})).n_layers)


def _learned_claims(res: SweepResults, k: int) -> list[Claim]:
    def claim(text: str, quantity: str, get) -> Claim:
        c = Claim(NAME, text, SRC, "no paper value (the paper fixes (a, b); tokengeo's "
                  "question)", quantity, Region.above(0.0), kind="new")
        if res.not_run():
            c.not_run = res.not_run()
            return c
        c.measured = mean_interval(res.values(LEARNED, get))
        heads = [h for s in res.seeds for h in chosen_heads(res.typed(LEARNED, s), k)]
        psis = [line_angle(a, b) for _, a, b in heads]
        ahead = sum(psi > ATTENTION_DEG for psi in psis)
        nearer = sum(line_distance(psi, LAPLACIAN_DEG) < line_distance(psi, ATTENTION_DEG)
                     for psi in psis)
        c.detail = (f"over {len(heads)} heads × seeds: mean a = "
                    f"{sum(h[1] for h in heads) / len(heads):+.3g}, mean b = "
                    f"{sum(h[2] for h in heads) / len(heads):+.3g}; {ahead} turned towards "
                    f"the Laplacian's line (ψ > 90°), {nearer} nearer it than attention's")
        return c
    return [
        claim("mixed heads started as attention (0, 1) turn towards the Laplacian (1, −1)",
              "mean over the chosen heads of ψ − 90°, ψ = atan2(b, a) mod 180° (attention "
              "90°, Laplacian 135°, V + P V 45°), per seed", rotation(k)),
        claim("learned mixed heads end nearer the Laplacian's line than attention's",
              "mean over the chosen heads of ∠(ψ, 90°) − ∠(ψ, 135°) in degrees, per seed",
              nearer_laplacian(k)),
    ]


def _path_claims(res: SweepResults, settings: dict) -> list[Claim]:
    by_t = {t: path_label(t) for t in path_ts(settings)}
    last = last_depth(settings)
    key = "within_sequence_share"
    at_last = trend_claim(NAME, res, "within-sequence variance share of the last layer's "
                          "tokens falls along the path (t, 1 − 2t) from attention to the "
                          "Laplacian", SRC, "lower with I − P", by_t,
                          "within-sequence share (last layer)", share(key, last), False,
                          variable="t", kind="new", label="last layer")
    readings = [at_last]
    if last > 1:  # the blocks before the last (the last is the first reading: no repeat)
        members = [trend_claim(NAME, res, f"depth {d}: within-sequence share falls with t",
                               SRC, "lower with I − P", by_t, f"within-seq share, depth {d}",
                               share(key, d), False, variable="t", kind="new",
                               label=f"depth {d}") for d in range(1, last)]
        readings.append(family(NAME, "within-sequence share falls with t after every block "
                               "before the last", members, rule="all",
                               quantity="slope of the within-sequence share on t at each "
                               f"depth 1..{last - 1} (as the last layer's claim)",
                               label="every earlier block"))
    # one row for the finding, its readings as members (rule "any")
    claims = [lap.finding(NAME, "within-sequence variance share falls along the path "
                          "(t, 1 − 2t) from attention to the Laplacian", readings)]
    claims.append(trend_claim(NAME, res, "test accuracy rises along the path (t, 1 − 2t)",
                              "Zhang & Papyan 2026, Sec. 5.1", "higher with Laplacian heads",
                              by_t, "test accuracy", accuracy, True, variable="t",
                              kind="new"))
    return claims


def _control_claims(res: SweepResults, settings: dict) -> list[Claim]:
    get = share("within_sequence_share", last_depth(settings))
    att, lap_ = path_label(0.0), path_label(1.0)
    metric = "within-sequence share (last layer)"
    stand_in = {"kind": "stand-in", "proxy": f"{model_label(settings['train'])} on "
                f"{settings['train'].get('data')}, all k chosen heads, for ViTs on ImageNet"}
    return [
        # the paper's ViT claim is tallied in laplacian-images: here tokengeo's question
        difference_claim(NAME, res, "Laplacian heads (1, −1) lower the within-sequence share "
                         "against attention (0, 1)", SRC, "lower", lap_, att, metric, get,
                         False, **{**stand_in, "kind": "new"}),
        difference_claim(NAME, res, "the smoothing needs −P V: the Laplacian (1, −1) has a "
                         "lower within-sequence share than V + P V (1, 1)", SRC,
                         "lower with I − P (the mechanism)", lap_, CONTROL, metric, get,
                         False, kind="new"),
        difference_claim(NAME, res, "adding V back alone, V + P V (1, 1), lowers the "
                         "within-sequence share against attention (0, 1)", SRC,
                         "no paper value (the control)", CONTROL, att, metric, get, False,
                         kind="new"),
    ]


def _smoothing_claims(res: SweepResults, settings: dict) -> list[Claim]:
    """The smoothing sign (:mod:`~tokengeo.experiments.suites.smoothing_sign`), as in the
    Laplacian sweeps: the chosen heads frozen at (1, −1) compute (I − P) V, trained
    Laplacian heads, so "trained Laplacian heads smooth the residual stream" is judged on
    them (a family over blocks, rule "all", seeds the units); the control is the same heads
    frozen at attention (0, 1), trained and measured the same way."""
    from tokengeo.experiments.suites import smoothing_sign as smoothing

    lap_, att = path_label(1.0), path_label(0.0)
    depth = last_depth(settings)
    stand_in = {"kind": "stand-in", "proxy": f"{model_label(settings['train'])} on "
                f"{settings['train'].get('data')}, the last {settings['k']} heads of every "
                "block, for ViTs on ImageNet"}
    return [
        smoothing.layer_family(NAME, res, lap_, MIXED, depth,
                               f"{lap_}: trained Laplacian heads (1, −1) smooth the residual "
                               "stream (the within-sequence variance falls along their "
                               "output), every block", heads="Laplacian (1, −1)",
                               **{**stand_in, "kind": "new"}),
        smoothing.layer_family(NAME, res, att, MIXED, depth,
                               f"control, {att}: the same heads as attention (0, 1) smooth "
                               "the residual stream, every block", heads="attention (0, 1)",
                               kind="new", proxy=None),
    ]


def referee(settings: dict) -> Referee:
    t = settings["train"]
    return Referee(
        question="Is it I − P (subtracting P V) that lowers the within-sequence variance, "
                 "and do heads free to choose (a, b) choose the Laplacian?",
        can_say="the direction of each effect in a small ViT, paired by seed; the path's "
                "middle points are not 'partly Laplacian' heads (see the notes).",
        gap=[("model", "ViT-S/B (ImageNet-1k)", model_label(t)),
             ("data", "ImageNet-1k / CIFAR-100", t.get("data", "—")),
             ("heads", "fixed (1, −1) in the last k", f"a V + b P V in the last {settings['k']}"),
             ("seeds", "—", str(len(settings["seeds"])))])


def summarise(settings: dict, results: dict[str, CellResult], ctx: SuiteContext
              ) -> SuiteOutput:
    res = sweep(settings).results(results, ctx.skipped)
    claims = (_learned_claims(res, settings["k"]) + _path_claims(res, settings)
              + _control_claims(res, settings) + _smoothing_claims(res, settings))
    out = SuiteOutput(NAME, TITLE, PAPER, claims, paper_key=PAPER_KEY,
                      referee=referee(settings))
    out.notes.append(
        "Each head outputs a V + b P V; only its line matters (the output projection absorbs "
        "scale and sign), read as ψ = atan2(b, a) mod 180°: attention 90°, Laplacian 135°, "
        "V + P V 45°, V alone 0°. The path (t, 1 − 2t) has ψ = 90°, 63°, 0°, 146°, 135° at "
        "t = 0, 1/4, 1/2, 3/4, 1: its middle point is 0.5 V, a head that mixes no tokens, so "
        "the path skips t = 1/2.")
    out.notes.append(f"Training: {settings['train']}; k = {settings['k']} chosen heads per "
                     f"layer; seeds {settings['seeds']}; geometry on "
                     f"{settings['geometry_examples']} test images.")
    if res.not_run():
        return out
    from tokengeo.experiments.suites import mechanism_figures as figs
    from tokengeo.experiments.suites import smoothing_sign as smoothing

    out.tables.append(figs.variant_table(res, last_depth(settings)))
    out.tables.append(figs.learned_table(res, settings["k"]))
    out.tables += [figs.smoothing_table(res, key) for key in figs.STEP_MEASURES]
    out.tables.append(smoothing.sublayer_table(res, res.labels, last_depth(settings)))
    fig_dir = ctx.figure_dir
    out.add_figure(figs.learned_figure, fig_dir / "learned_coefficients.png", res,
                   settings["k"], model_label(settings["train"]))
    out.add_figure(figs.depth_figure, fig_dir / "within_share_by_depth.png", res,
                   model_label(settings["train"]))
    out.add_figure(figs.path_figure, fig_dir / "path.png", res, path_ts(settings),
                   model_label(settings["train"]))
    return out


SUITE = Suite(NAME, TITLE, PAPER, SETTINGS, cells, summarise)
