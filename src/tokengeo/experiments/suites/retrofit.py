"""Suite ``retrofit``: Laplacian heads retrofitted into a pretrained LM (SmolLM2-135M).

Zhang & Papyan (arXiv 2602.09297) train Laplacian heads (``z_h = V_h - P_h V_h``) from
scratch. Here they are put into a *trained* LM, which is then fine-tuned on Shakespeare with
its own tokenizer (``tokengeo train --model hf:smollm2-135m``), every row with the same
budget and the same data order per seed:

* ``k=0``: the unconverted model, fine-tuned (the baseline every row is paired with);
* ``mixed``: the last k heads of every layer become ``a_h V + b_h P V`` with learnable
  ``(a_h, b_h)`` initialised as attention, (0, 1), so the converted model starts at the
  pretrained perplexity bit for bit; where (a, b) go is read off after fine-tuning, as the
  position ``t`` along the straight path from attention (0, 1) to Laplacian (1, −1):
  ``t = ((a, b) − (0, 1)) · (1, −2) / 5`` (the point ``(t, 1 − 2t)`` nearest to (a, b));
* ``last-L``: the last k heads of the last L layers only become Laplacian;
* ``all``: the last k heads of every layer become Laplacian (the paper's placement).

Held-out perplexity (the validation works, fixed windows) is measured at step 0 and after
fine-tuning; seeds change the fine-tuning data order. Study cells measure the pretrained
model's token geometry (spectral decay, next-token separability) on each corpus of
``study_corpora``.

Settings (``retrofit.toml``; declared here for the settings schema): ``seeds``, ``k`` (heads
per converted layer), ``last_layers`` (the values of L), ``tolerance`` (the relative
perplexity cost the last-L claims allow), ``geometry_examples`` (windows for token geometry),
``study_corpora`` (data set names), ``train`` (TrainConfig fields), ``skip`` (a reason: the
quick report then states that the suite runs only with ``--full``), ``cell_cost``
(estimated 1-thread CPU seconds of one fine-tuning, a scheduling hint).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from tokengeo.errors import ConfigError
from tokengeo.experiments.cells import Cell, CellResult
from tokengeo.experiments.claims import Claim, family
from tokengeo.experiments.report import Referee, SuiteOutput
from tokengeo.experiments.settings import Setting, train_table
from tokengeo.experiments.stats import Region, log_ratio, mean_interval, worst_run
from tokengeo.experiments.suite import Suite, SuiteContext
from tokengeo.experiments.summary import UNRECORDED
from tokengeo.experiments.sweep import (
    Sweep,
    SweepResults,
    config_digest,
    k_label,
    line_figure,
    run_folder,
)

NAME = "retrofit"
TITLE = "Laplacian heads retrofitted into a pretrained LM"
PAPER = ("Zhang & Papyan, \"Laplacian Heads Improve Transformers by Smoothing Token "
         "Representations\", arXiv 2602.09297 (retrofitting: a question of tokengeo's own)")
SRC = "Zhang & Papyan 2026 train from scratch; retrofitting a trained LM is our question"
PAPER_KEY = "Zhang & Papyan (Laplacian heads)"
SETTINGS = {  # suites/retrofit.toml: [common] + [quick] or [full]
    "seeds": Setting("int_list"),
    "k": Setting("int", lo=1),
    "last_layers": Setting("int_list", lo=1),
    "tolerance": Setting("number"),
    "geometry_examples": Setting("int", lo=1),
    "study_corpora": Setting("str_list", required=False),
    "train": Setting("table", check=train_table),
    "cell_cost": Setting("number", required=False),
}
CONVERTED_FILE = "converted.json"  # the step-0 evaluation, kept beside the run
BASE, MIXED, ALL = k_label(0), "mixed", "all"
CELL_FIELDS = ("converted", "final", "geometry", "heads", "mix", "wall_time_s",
               "train_tokens")
EXACT_START = 1e-9  # |ppl_0(mixed) − ppl_0(k=0)| below this: the same model (it is 0 bit for bit)


def last_label(L: int) -> str:
    return f"last-{L}"


def variants(settings: dict) -> dict[str, dict]:
    """Overrides of the base fine-tuning config per row (module docstring)."""
    k, over = settings["k"], dict(settings["train"].get("model_overrides", {}))
    out = {BASE: {"n_laplacian": 0},
           MIXED: {"n_laplacian": k, "head_kind": "mixed",
                   "model_overrides": {**over, "mixed_init": "attention"}}}
    for L in settings["last_layers"]:
        out[last_label(L)] = {"n_laplacian": k, "model_overrides": {**over, "last_layers": L}}
    out[ALL] = {"n_laplacian": k}
    return out


def path_position(a: float, b: float) -> float:
    """``t`` of the point ``(t, 1 − 2t)`` nearest to ``(a, b)``: 0 at attention (0, 1), 1 at
    the Laplacian (1, −1) (Zhang & Papyan's head ``a V + b P V``): ``(a − 2(b − 1)) / 5``."""
    return (a - 2.0 * (b - 1.0)) / 5.0


# ---- cells --------------------------------------------------------------------------------


def _eval_windows(config: dict[str, Any]) -> int:
    return config.get("final_eval_batches", 0) * config["batch_size"]


def _geometry(trainer, n: int) -> dict:
    from tokengeo.probes.run_geometry import language_geometry

    return language_geometry(trainer.model, trainer.task, "val", n)


def _heads_and_mix(model) -> tuple[dict, dict]:
    """The converted heads ``{layer: [heads]}`` and the mixed heads' ``{layer: {head: [a,
    b]}}`` of an ``hf:`` model, with string keys as JSON stores them."""
    from tokengeo.models.hf import laplacian_heads, mixed_coefficients

    heads = {str(layer): idx for layer, idx in laplacian_heads(model.hf).items()}
    mix = {str(layer): {str(h): list(ab) for h, ab in by_head.items()}
           for layer, by_head in mixed_coefficients(model.hf).items()}
    return heads, mix


def retrofit_cell(run_dir: str, config: dict[str, Any], geometry_examples: int) -> dict:
    """Convert, evaluate (step 0), fine-tune ``config`` in ``run_dir``, evaluate again; the
    converted heads and, for mixed heads, their fine-tuned (a, b)."""
    from tokengeo.experiments.training import open_trainer
    from tokengeo.io import read_json, write_json

    trainer = open_trainer(Path(run_dir), config)
    converted_file = Path(run_dir) / CONVERTED_FILE
    if trainer.step == 0:  # before the first checkpoint, so a resumed run has the file
        write_json(converted_file, trainer.evaluate("val", _eval_windows(config)))
    converted = read_json(converted_file, dict)
    summary = trainer.fit()
    tokens = summary["step"] * config["batch_size"] * trainer.task.model_config.block_size
    heads, mix = _heads_and_mix(trainer.model)
    return {"converted": converted, "final": summary["final"]["val"],
            "geometry": _geometry(trainer, geometry_examples), "heads": heads, "mix": mix,
            "wall_time_s": summary["wall_time_s"], "step": summary["step"],
            "train_tokens": tokens, "warnings": summary["warnings"]}


def study_cell(run_dir: str, config: dict[str, Any], geometry_examples: int) -> dict:
    """Perplexity and token geometry of the unconverted pretrained model on ``config.data``."""
    import shutil

    from tokengeo.experiments.training import open_trainer

    shutil.rmtree(run_dir, ignore_errors=True)  # nothing is trained: start clean
    trainer = open_trainer(Path(run_dir), config)
    return {"val": trainer.evaluate("val", _eval_windows(config)),
            "geometry": _geometry(trainer, geometry_examples)}


def _sweep(settings: dict) -> Sweep:
    """The fine-tunings: one per (row, seed); the seed changes the data order."""
    return Sweep(NAME, variants(settings), tuple(settings["seeds"]), dict(settings["train"]),
                 CELL_FIELDS, float(settings.get("cell_cost", 1.0)), parse=dict,
                 what="retrofit")


def cells(settings: dict, ctx: SuiteContext) -> list[Cell]:
    n_geo = settings["geometry_examples"]

    def make(label: str, seed: int, cfg: dict):
        return retrofit_cell, {"run_dir": run_folder(ctx, NAME, label, seed, cfg),
                               "config": cfg, "geometry_examples": n_geo}
    out = _sweep(settings).cells(make)
    for corpus in settings.get("study_corpora", []):
        cfg = {**settings["train"], "data": corpus, "n_laplacian": 0, "steps": 1}
        run = ctx.runs(NAME) / f"study-{corpus}-{config_digest(cfg)}"
        out.append(Cell(NAME, _study_key(corpus), study_cell,
                        {"run_dir": str(run), "config": cfg, "geometry_examples": n_geo},
                        label=f"pretrained geometry on {corpus}"))
    return out


def _study_key(corpus: str) -> str:
    return f"study-{Path(corpus).name}"  # a data set name, or a folder's name


# ---- what the cells say -------------------------------------------------------------------


def _ppl(value: dict, when: str) -> float:
    return float(value[when]["perplexity"])


def mix_pairs(value: dict) -> list[tuple[int, float, float]]:
    """``(layer, a, b)`` of every mixed head of a cell's result."""
    return [(int(layer), float(a), float(b)) for layer, by_head in value["mix"].items()
            for a, b in by_head.values()]


def mean_position(value: dict) -> float:
    """Mean over the mixed heads of their position ``t`` on the attention→Laplacian path."""
    pairs = mix_pairs(value)
    if not pairs:
        raise ValueError("the mixed row's result holds no mixed heads")
    return sum(path_position(a, b) for _, a, b in pairs) / len(pairs)


def _start_claim(sweep: SweepResults) -> Claim:
    claim = Claim(NAME, "mixed heads initialised as attention, (a, b) = (0, 1), start at the "
                  "pretrained perplexity exactly", SRC, "0 V + 1 P V = P V (by construction)",
                  "|ppl_0(mixed) − ppl_0(k=0)|, the worst seed",
                  Region.below(EXACT_START), kind="construction")
    missing = sweep.not_run()
    if missing:
        claim.not_run = missing
        return claim
    mixed = sweep.values(MIXED, lambda v: _ppl(v, "converted"))
    base = sweep.values(BASE, lambda v: _ppl(v, "converted"))
    claim.measured = worst_run([abs(m - b) for m, b in zip(mixed, base, strict=True)])
    claim.detail = f"step-0 perplexity: mixed {mixed[0]:.6g}, pretrained {base[0]:.6g}"
    return claim


def _direction_claim(sweep: SweepResults, k: int) -> Claim:
    claim = Claim(NAME, f"fine-tuned mixed heads (the last {k} of every layer, from attention) "
                  "move towards the Laplacian (1, −1)", SRC, "no paper value (new question)",
                  "mean over mixed heads of t = ((a, b) − (0, 1))·(1, −2)/5 (0: attention, "
                  "1: Laplacian), per seed", Region.above(0.0), kind="new")
    missing = sweep.not_run()
    if missing:
        claim.not_run = missing
        return claim
    ts = sweep.values(MIXED, mean_position)
    claim.measured = mean_interval(ts)
    pairs = [p for s in sweep.seeds for p in mix_pairs(sweep.typed(MIXED, s))]
    da = sum(a for _, a, _ in pairs) / len(pairs)
    db = sum(b - 1.0 for _, _, b in pairs) / len(pairs)
    ahead = sum(path_position(a, b) > 0 for _, a, b in pairs)
    claim.detail = (f"mean Δa = {da:+.3g}, Δb = {db:+.3g} over {len(pairs)} heads × seeds; "
                    f"{ahead} of them have t > 0")
    return claim


def _ratio_claim(sweep: SweepResults, text: str, treated: str, region: Region,
                 label: str = "") -> Claim:
    """Claim on the fine-tuned perplexity of ``treated`` over k=0's, paired by seed (log
    ratio, shown as a ratio)."""
    claim = Claim(NAME, text, SRC, "no paper value (new question)",
                  f"ppl_ft({treated}) / ppl_ft({BASE}), paired by seed", region, kind="new",
                  label=label)
    missing = sweep.not_run()
    if missing:
        claim.not_run = missing
        return claim
    ft = {lab: sweep.values(lab, lambda v: _ppl(v, "final")) for lab in (treated, BASE)}
    claim.measured = log_ratio(ft[treated], ft[BASE])
    claim.detail = (f"fine-tuned perplexity: {treated} {mean_interval(ft[treated]).fmt(4)}, "
                    f"{BASE} {mean_interval(ft[BASE]).fmt(4)}")
    return claim


def _last_layers_claim(settings: dict, sweep: SweepResults) -> Claim:
    k, tol = settings["k"], float(settings["tolerance"])
    rows = [(last_label(L), f"L={L}") for L in settings["last_layers"]] + [(ALL, "all layers")]
    members = [_ratio_claim(sweep, f"{k} Laplacian heads in {name}: no perplexity cost after "
                            "fine-tuning", label, Region.ratio_below(1 + tol), label=name)
               for label, name in rows]
    return family(NAME, f"the last {k} heads made Laplacian in the last L layers only can be "
                  f"retrofitted within +{tol:.0%} of the k=0 perplexity (same fine-tuning "
                  "budget), for some L", members)


MIN_MOVE = 1e-3  # the least |Δa|, |Δb| of some mixed head for fine-tuning to have acted


def too_short(sweep: SweepResults) -> str | None:
    """Why the fine-tuning cannot answer the retrofit's questions at this size: its budget
    moved no learnable (a, b) by :data:`MIN_MOVE` in any seed (then neither the perplexity
    comparisons nor the direction of (a, b) say anything about the heads); None when it
    did, or when nothing ran."""
    if sweep.not_run():
        return None
    pairs = [p for s in sweep.seeds for p in mix_pairs(sweep.typed(MIXED, s))]
    moved = max((max(abs(a), abs(b - 1.0)) for _, a, b in pairs), default=0.0)
    if moved >= MIN_MOVE:
        return None
    return (f"not answerable at this size: fine-tuning moved the learnable (a, b) by at most "
            f"{moved:.2g} (< {MIN_MOVE:g}) from attention's (0, 1); train longer to answer")


def _claims(settings: dict, sweep: SweepResults) -> list[Claim]:
    mixed_vs_base = _ratio_claim(
        sweep, f"mixed heads (the last {settings['k']} of every layer, learnable (a, b) from "
        "attention) fine-tune to a lower held-out perplexity than k=0 with the same budget",
        MIXED, Region.ratio_below(1.0))
    questions = [mixed_vs_base, _direction_claim(sweep, settings["k"]),
                 _last_layers_claim(settings, sweep)]
    why = too_short(sweep)
    for c in questions:
        c.untestable = why
    return [_start_claim(sweep), *questions]


def referee(settings: dict) -> Referee:
    t = settings["train"]
    return Referee(
        question="(tokengeo's own question; the paper trains from scratch) Can Laplacian "
                 "heads be put into an already trained LM, whole or in its last layers, and "
                 "recover its perplexity with a short fine-tuning? Do learnable mixed heads "
                 "started at attention move towards the Laplacian, and do they help?",
        can_say="fine-tuned perplexity ratios of each conversion to k = 0, paired by "
                "fine-tuning seed, on a held-out split, and where the mixed heads' (a, b) "
                "moved in that budget; not a statement about the paper.",
        gap=[("model", "trained from scratch", str(t.get("model", "—"))),
             ("data", "pre-training corpus", t.get("data", "—")),
             ("steps", "full pre-training", f"{t.get('steps', '—')} fine-tuning steps"),
             ("seeds", UNRECORDED, str(len(settings["seeds"])))])


# ---- tables, figure, notes ----------------------------------------------------------------


def _converted_text(value: dict) -> str:
    heads = value["heads"]
    if not heads:
        return "none"
    per_layer = {len(h) for h in heads.values()}
    layers = sorted(int(layer) for layer in heads)
    k = per_layer.pop() if len(per_layer) == 1 else "mixed counts"
    return f"{k} heads × {len(layers)} layers ({layers[0]}–{layers[-1]})"


def _rows(sweep: SweepResults) -> list[list[str]]:
    base = sweep.values(BASE, lambda v: _ppl(v, "final"))
    rows = []
    for label in sweep.labels:
        vals = [sweep.typed(label, s) for s in sweep.seeds]
        conv = mean_interval([_ppl(v, "converted") for v in vals])
        ft = [_ppl(v, "final") for v in vals]
        ratio = math.exp(sum(math.log(f / b) for f, b in zip(ft, base, strict=True)) / len(ft))
        geo = mean_interval([v["geometry"]["components_99"] for v in vals])
        rows.append([label, _converted_text(vals[0]), f"{conv.mean:.4g}",
                     f"{mean_interval(ft).mean:.4g} ± {mean_interval(ft).std:.2g}",
                     f"×{ratio:.3g}", f"{geo.mean:.4g}", f"{vals[0]['train_tokens']}",
                     f"{mean_interval([v['wall_time_s'] for v in vals]).mean:.0f}"])
    return rows


def per_layer_positions(sweep: SweepResults) -> dict[int, list[tuple[float, float, float]]]:
    """``{layer: [(a̅, b̅, t̅) of each seed]}``: the means over the layer's mixed heads of a,
    b and the path position t (:func:`path_position`, linear in (a, b), so t̅ is t of
    (a̅, b̅))."""
    out: dict[int, list[tuple[float, float, float]]] = {}
    for s in sweep.seeds:
        by_layer: dict[int, list[tuple[float, float]]] = {}
        for layer, a, b in mix_pairs(sweep.typed(MIXED, s)):
            by_layer.setdefault(layer, []).append((a, b))
        for layer, ab in by_layer.items():
            a = sum(x for x, _ in ab) / len(ab)
            b = sum(y for _, y in ab) / len(ab)
            out.setdefault(layer, []).append((a, b, path_position(a, b)))
    return dict(sorted(out.items()))


def _mix_rows(sweep: SweepResults) -> list[list[str]]:
    rows = []
    for layer, per_seed in per_layer_positions(sweep).items():
        a, b, t = (mean_interval([row[i] for row in per_seed]) for i in range(3))
        rows.append([str(layer), f"{a.mean:+.3g}", f"{b.mean - 1.0:+.3g}",
                     f"{t.mean:+.3g} ± {t.std:.2g}"])
    return rows


def _mix_figure(path: Path, sweep: SweepResults) -> Path:
    per_layer = per_layer_positions(sweep)
    layers = list(per_layer)
    series = {"t (0 attention, 1 Laplacian)": [[row[2] for row in per_layer[layer]]
                                                for layer in layers]}
    return line_figure(path, layers, series, "layer", "position t of the mixed heads",
                       "fine-tuned mixed heads: where (a, b) went, per layer")


def _study_rows(settings: dict, results: dict[str, CellResult]) -> list[list[str]]:
    rows = []
    for corpus in settings.get("study_corpora", []):
        r = results[_study_key(corpus)]
        if r.not_run:
            rows.append([corpus, f"not run: {r.not_run}", "", "", "", ""])
            continue
        g = r.value["geometry"]
        rows.append([corpus, f"{r.value['val']['perplexity']:.4g}",
                     f"{g['components_99']}", f"{g['decay_alpha']:.3g}",
                     f"{g['cdnv_mean']:.3g}", f"{g['next_token_nm_accuracy']:.3g}"])
    return rows


def _notes(settings: dict) -> list[str]:
    from tokengeo.train import TrainConfig

    t = settings["train"]
    lr, steps = float(t.get("lr", TrainConfig.lr)), int(t.get("steps", TrainConfig.steps))
    return [
        f"Fine-tuning: {t}; seeds {settings['seeds']} (data order), every row the same "
        "budget. The last-L claims' tolerance (+"
        f"{float(settings['tolerance']):.0%} relative perplexity) was fixed before "
        "measuring: it is about the spread of perplexity between fine-tuning seeds.",
        f"Scale of the (a, b) question: AdamW moves a parameter by about the learning rate "
        f"per step at most, so in {steps} steps at lr ≤ {lr:g} no coefficient can move by more "
        f"than about {lr * steps:.2g}; the direction of the move (the sign of t) is what this "
        "budget can show, not where (a, b) would settle.",
    ]


def summarise(settings: dict, results: dict[str, CellResult], ctx: SuiteContext) -> SuiteOutput:
    sweep = _sweep(settings).results(results, ctx.skipped)
    out = SuiteOutput(NAME, TITLE, PAPER, _claims(settings, sweep),
                      paper_key=PAPER_KEY, referee=referee(settings))
    if sweep.not_run():
        return out
    out.tables.append((
        "held-out perplexity (validation works): at step 0 and after fine-tuning "
        "(mean ± std over seeds); ratio: geometric mean over seeds of ppl_ft / ppl_ft(k=0)",
        ["setting", "converted heads", "step 0", "fine-tuned", "ratio to k=0",
         "PCs for 99% (ft)", "train tokens", "train s"], _rows(sweep)))
    out.tables.append((
        "fine-tuned mixed heads, per layer: mean over the layer's mixed heads, then over "
        "seeds, of a, b and their position t on the path from attention (0, 1) to the "
        "Laplacian (1, −1) (± std over seeds)",
        ["layer", "a − 0", "b − 1", "t"], _mix_rows(sweep)))
    out.add_figure(_mix_figure, ctx.figure_dir / "mixed_heads_by_layer.png", sweep)
    if settings.get("study_corpora"):
        out.tables.append((
            "pretrained model (k=0, no fine-tuning): perplexity and final-layer token geometry",
            ["corpus", "val perplexity", "PCs for 99%", "decay α", "CDNV", "next-token NM acc"],
            _study_rows(settings, results)))
    out.notes.extend(_notes(settings))
    return out


def check(where: str, settings: dict) -> None:
    """``ks`` as every suite over k (:func:`~tokengeo.experiments.validation.check_ks`);
    ``k`` (heads per converted layer) and ``last_layers`` (the L of the last-L rows) fit
    the model: k <= H, each L distinct and <= its number of layers."""
    from tokengeo.experiments.validation import check_distinct, check_ks, heads_of

    check_ks(where, settings)
    last = list(settings.get("last_layers", []))
    check_distinct(where, "last_layers", last)
    heads, source = heads_of(settings)
    k = settings.get("k")
    if heads is not None and isinstance(k, int) and k > heads:
        raise ConfigError(f"{where}: k = {k} but {source} has {heads} heads per layer; k must "
                          f"lie in 1..{heads}")
    model = settings.get("train", {}).get("model")
    if isinstance(model, str) and model.startswith("hf:") and last:
        from tokengeo.models.hf.lm import check_source

        layers = check_source(model[3:]).n_layers
        if layers is not None and max(last) > layers:
            raise ConfigError(f"{where}: last_layers = {last!r} has L = {max(last)} but "
                              f"{source} has {layers} layers; each L must lie in 1..{layers}")


SUITE = Suite(NAME, TITLE, PAPER, SETTINGS, cells, summarise, check)
