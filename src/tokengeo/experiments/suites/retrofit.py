"""Suite ``retrofit``: Laplacian heads retrofitted into a pretrained LM (SmolLM2-135M).

Zhang & Papyan (arXiv 2602.09297) train Laplacian heads from scratch. Here the last k of
H heads of every layer of a *trained* LM become Laplacian (``z_h = V_h - P_h V_h``) and the
model is fine-tuned on Shakespeare with its own tokenizer (``tokengeo train --model
hf:smollm2-135m --n-laplacian k``). Held-out perplexity (the validation works, fixed
windows) is measured for each k: pretrained, right after the conversion (step 0) and after
the same fine-tuning budget; seeds change the fine-tuning data order. Study cells measure
the pretrained model's token geometry (spectral decay, next-token separability) on each
corpus of ``study_corpora``.

Settings (``retrofit.toml``; declared here for the settings schema): ``seeds``, ``ks`` (two
values: the baseline first, then the retrofitted k), ``tolerance`` (the relative perplexity
cost allowed by the claim), ``geometry_examples`` (windows for token geometry),
``study_corpora`` (data set names), ``train`` (TrainConfig fields), ``skip`` (a reason:
the quick report then states that the suite runs only with ``--full``), ``cell_cost``
(estimated 1-thread CPU seconds of one fine-tuning, a scheduling hint).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tokengeo.experiments.cells import Cell, CellResult
from tokengeo.experiments.claims import Claim
from tokengeo.experiments.report import Referee, SuiteOutput
from tokengeo.experiments.settings import Setting, train_table
from tokengeo.experiments.stats import Region, log_ratio, mean_interval
from tokengeo.experiments.suite import Suite, SuiteContext
from tokengeo.experiments.summary import UNRECORDED
from tokengeo.experiments.sweep import Sweep, SweepResults, config_digest, run_folder

NAME = "retrofit"
TITLE = "Laplacian heads retrofitted into a pretrained LM"
PAPER = ("Zhang & Papyan, \"Laplacian Heads Improve Transformers by Smoothing Token "
         "Representations\", arXiv 2602.09297 (retrofitting: a question of tokengeo's own)")
SRC = "Zhang & Papyan 2026 train from scratch; retrofitting a trained LM is our question"
PAPER_KEY = "Zhang & Papyan (Laplacian heads)"
SETTINGS = {  # suites/retrofit.toml: [common] + [quick] or [full]
    "seeds": Setting("int_list"),
    "ks": Setting("int_list"),
    "tolerance": Setting("number"),
    "geometry_examples": Setting("int", lo=1),
    "study_corpora": Setting("str_list", required=False),
    "train": Setting("table", check=train_table),
    "cell_cost": Setting("number", required=False),
}
CONVERTED_FILE = "converted.json"  # the step-0 evaluation, kept beside the run


def _eval_windows(config: dict[str, Any]) -> int:
    return config.get("final_eval_batches", 0) * config["batch_size"]


def _geometry(trainer, n: int) -> dict:
    from tokengeo.probes.run_geometry import language_geometry

    return language_geometry(trainer.model, trainer.task, "val", n)


def retrofit_cell(run_dir: str, config: dict[str, Any], geometry_examples: int) -> dict:
    """Convert, evaluate (step 0), fine-tune ``config`` in ``run_dir``, evaluate again."""
    from tokengeo.experiments.training import open_trainer
    from tokengeo.io import write_json

    trainer = open_trainer(Path(run_dir), config)
    converted_file = Path(run_dir) / CONVERTED_FILE
    if trainer.step == 0:  # before the first checkpoint, so a resumed run has the file
        write_json(converted_file, trainer.evaluate("val", _eval_windows(config)))
    converted = json.loads(converted_file.read_text())
    summary = trainer.fit()
    tokens = summary["step"] * config["batch_size"] * trainer.task.model_config.block_size
    return {"converted": converted, "final": summary["final"]["val"],
            "geometry": _geometry(trainer, geometry_examples),
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
    """The fine-tunings: one per (k, seed); the seed changes the data order."""
    return Sweep(NAME, {f"k={k}": {"n_laplacian": k} for k in settings["ks"]},
                 tuple(settings["seeds"]), dict(settings["train"]), parse=dict,
                 cost=float(settings.get("cell_cost", 1.0)), what="retrofit")


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


def _ppl(value: dict, when: str) -> float:
    return float(value[when]["perplexity"])


def _claims(settings: dict, sweep: SweepResults) -> list[Claim]:
    k0, k = settings["ks"][0], settings["ks"][-1]
    tol = float(settings["tolerance"])
    main = Claim(NAME, f"k={k} Laplacian heads can be retrofitted into the pretrained LM at "
                 "no perplexity cost (same fine-tuning budget)", SRC,
                 "no paper value (new question)",
                 f"ppl_ft(k={k}) / ppl_ft(k={k0}), paired by seed",
                 Region.ratio_below(1 + tol), kind="new")
    recover = Claim(NAME, f"fine-tuning lowers the perplexity of the converted k={k} model",
                    SRC, "-", f"ppl_ft(k={k}) / ppl_converted(k={k}), per seed",
                    Region.ratio_below(1.0), kind="new")
    claims = [main, recover]
    missing = sweep.not_run()
    if missing:
        for c in claims:
            c.not_run = missing
        return claims
    ft = {kk: sweep.values(f"k={kk}", lambda v: _ppl(v, "final")) for kk in (k0, k)}
    conv = sweep.values(f"k={k}", lambda v: _ppl(v, "converted"))
    main.measured = log_ratio(ft[k], ft[k0])  # a ratio's interval stays above −100%
    main.detail = (f"fine-tuned perplexity: k={k} {mean_interval(ft[k]).fmt(3)}, "
                   f"k={k0} {mean_interval(ft[k0]).fmt(3)}")
    recover.measured = log_ratio(ft[k], conv)
    recover.detail = f"converted k={k}: {conv[0]:.4g}; fine-tuned: {mean_interval(ft[k]).fmt(3)}"
    return claims


def referee(settings: dict) -> Referee:
    t = settings["train"]
    return Referee(
        question="(tokengeo's own question; the paper trains from scratch) Can Laplacian "
                 "heads be put into an already trained LM and recover its perplexity with "
                 "a short fine-tuning?",
        can_say="the fine-tuned perplexity ratio of k Laplacian heads per layer to k = 0, "
                "paired by fine-tuning seed, on a held-out split; not a statement about the "
                "paper.",
        gap=[("model", "trained from scratch", str(t.get("model", "—"))),
             ("data", "pre-training corpus", t.get("data", "—")),
             ("steps", "full pre-training", f"{t.get('steps', '—')} fine-tuning steps"),
             ("seeds", UNRECORDED, str(len(settings["seeds"])))])


def _rows(settings: dict, sweep: SweepResults) -> list[list[str]]:
    rows = []
    for kk in settings["ks"]:
        vals = [sweep.typed(f"k={kk}", s) for s in sweep.seeds]
        conv = mean_interval([_ppl(v, "converted") for v in vals])
        ft = mean_interval([_ppl(v, "final") for v in vals])
        geo = mean_interval([v["geometry"]["components_99"] for v in vals])
        stage = "pretrained" if kk == 0 else "converted"
        rows.append([f"k={kk}", f"{stage}: {conv.mean:.4g}", f"{ft.mean:.4g} ± {ft.std:.2g}",
                     f"{geo.mean:.4g}", f"{vals[0]['train_tokens']}",
                     f"{mean_interval([v['wall_time_s'] for v in vals]).mean:.0f}"])
    return rows


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


def summarise(settings: dict, results: dict[str, CellResult], ctx: SuiteContext) -> SuiteOutput:
    sweep = _sweep(settings).results(results, ctx.skipped)
    out = SuiteOutput(NAME, TITLE, PAPER, _claims(settings, sweep),
                      paper_key=PAPER_KEY, referee=referee(settings))
    if sweep.not_run():
        return out
    out.tables.append((
        "held-out perplexity (validation works): at step 0 and after fine-tuning "
        "(mean ± std over seeds)",
        ["setting", "step 0", "fine-tuned", "PCs for 99% (ft)", "train tokens", "train s"],
        _rows(settings, sweep)))
    if settings.get("study_corpora"):
        out.tables.append((
            "pretrained model (k=0, no fine-tuning): perplexity and final-layer token geometry",
            ["corpus", "val perplexity", "PCs for 99%", "decay α", "CDNV", "next-token NM acc"],
            _study_rows(settings, results)))
    t = settings["train"]
    out.notes.append(
        f"Fine-tuning: {t}; seeds {settings['seeds']} (data order). The claim's tolerance "
        f"(+{float(settings['tolerance']):.0%} relative perplexity) was fixed before "
        "measuring: it is about the spread of perplexity between fine-tuning seeds and "
        "small next to the cost of the conversion itself.")
    return out


SUITE = Suite(NAME, TITLE, PAPER, SETTINGS, cells, summarise)
