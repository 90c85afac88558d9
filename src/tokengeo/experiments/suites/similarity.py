"""Suite ``similarity``: Halevi et al. (arXiv 2512.21956) on pretrained sentence encoders.

The paper studies BERT-base (12 layers x 12 heads, a masked LM). No BERT MLM weights are
installable offline here; the stand-ins are *sentence encoders*: all-mpnet-base-v2 (MPNet-base,
12 x 12, the full run's main model; ``make mpnet``) and all-MiniLM-L6-v2 (6 x 12, the second
model, and the quick run's only one). The first entry of ``models`` is the main model.

Corpora: the first entry of ``corpora`` is the main analysis (prose: Shakespeare and Jane
Austen in --full, Shakespeare alone in --quick, which needs no optional install); every other
corpus (the Python documentation) is a separate row of the tables, never pooled into a claim.

Cells: one per (model, corpus, shard). The shards of a (model, corpus) are disjoint sets of
``analysis.samples`` windows from one seeded draw (:func:`~tokengeo.probes.similarity.run.
prepare`); each returns the per-input top-pair counts and, on its first
``attention_samples`` windows, the similarity-vs-attention statistics per input. The unit of
replication is the input: the summary pools the shards' inputs and bootstraps over them
(:mod:`tokengeo.probes.similarity.inputs`), never over the heads of one model. Claims built
from the corpus-level statistics of each shard (distinct dominant tokens per input, noise,
separator attention, attention lift) take a t interval over the disjoint shards.

Layer contrasts are contrasts between layer groups (thirds: early, middle, final), per input:
short-range share of top pairs middle − early; long-range share early − final; within-
sentence share above its *distance-matched* chance, final − early. The short- and long-range
chance levels (the share of all pairs at those distances) are the same for every layer, so
they cancel in a contrast; the within-sentence chance depends on each head's top-pair
distances and is subtracted input by input.

Layer mapping to BERT-base by relative depth: MPNet layer l (0-based) ↔ BERT layer l + 1
(both have 12); MiniLM layer l ↔ BERT layers 2l+1..2l+2 (all-MiniLM-L6-v2's base keeps every
second layer of the 12-layer MiniLM-L12-H384).
"""

from __future__ import annotations

from pathlib import Path

from tokengeo.experiments.cells import Cell, CellResult, draw_figures, figure_notes
from tokengeo.experiments.claims import Claim, family
from tokengeo.experiments.decidability import shards_t
from tokengeo.experiments.report import Referee, SuiteOutput
from tokengeo.experiments.settings import Setting
from tokengeo.experiments.stats import Interval, Region, mean_interval
from tokengeo.experiments.suite import Suite, SuiteContext


def _check_analysis(table: dict, where: str) -> None:
    from tokengeo.errors import ConfigError
    from tokengeo.experiments.settings import fields_of
    from tokengeo.probes.similarity.run import SimilarityConfig, check_similarity_time

    fields_of(SimilarityConfig)(table, where)
    for key in ("model", "corpus"):
        if key in table:
            raise ConfigError(f"{where}: {key!r} is set by the suite's "
                              f"{'models' if key == 'model' else 'corpora'} setting; remove it")
    try:
        SimilarityConfig(**table).validate()
        # each shard's time, for the largest model the suite names (BERT-base, 12 x 768)
        check_similarity_time(SimilarityConfig(**table), 12, 768,
                              fix=f"use fewer {where}.samples or a shorter seq_len")
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None


def _check_corpora(table: dict, where: str) -> None:
    from tokengeo.errors import ConfigError

    if not table:
        raise ConfigError(f"{where}: name at least one corpus, e.g. {{ prose = "
                          "\"shakespeare\" }")
    for label, spec in table.items():
        shards = spec.get("shards") if isinstance(spec, dict) else None
        if not (isinstance(spec, dict) and isinstance(spec.get("corpus"), str)
                and isinstance(shards, int) and not isinstance(shards, bool) and shards >= 1
                and set(spec) <= {"corpus", "shards"}):
            raise ConfigError(f"{where}.{label} = {spec!r} must be {{ corpus = \"<name>\", "
                              "shards = <whole number >= 1> }")


def _check_costs(table: dict, where: str) -> None:
    from tokengeo.errors import ConfigError

    for name, cost in table.items():
        if not isinstance(cost, (int, float)) or isinstance(cost, bool) or cost <= 0:
            raise ConfigError(f"{where}.{name} = {cost!r} must be a number > 0")


SETTINGS = {  # suites/similarity.toml: [common] + [quick] or [full]
    "models": Setting("str_list"),
    "corpora": Setting("table", check=_check_corpora),
    "analysis": Setting("table", check=lambda table, where: _check_analysis(table, where)),
    "attention_samples": Setting("int", lo=0),
    "n_boot": Setting("int", lo=100, required=False),
    "cell_cost": Setting("table", required=False, check=_check_costs),
}

NAME = "similarity"
TITLE = "Head-output similarity: what each head's output vectors agree on"
PAPER = ("Halevi et al., \"Self-attention vector output similarities reveal how machines pay "
         "attention\", arXiv 2512.21956 (BERT-base there; sentence encoders here)")
PAPER_KEY = "Halevi et al. (head-output similarity)"
SRC = "Halevi et al. 2025"
FIELDS = ("result.layer_summary", "result.input_distinct_share", "result.noise_chance",
          "result.top_long_range_share", "result.long_range_chance",
          "inputs.within", "inputs.repeated", "figures")  # read by summarise
MODEL_NAMES = {"mpnet": "all-mpnet-base-v2 (MPNet-base sentence encoder, 12 x 12)",
               "minilm": "all-MiniLM-L6-v2 (MiniLM sentence encoder, 6 x 12)",
               "smollm2-135m": "SmolLM2-135M-Instruct (causal Llama decoder, 30 x 9)"}
LAYER_MAPPING = {"mpnet": "MPNet layer l (0-based) ↔ BERT-base layer l + 1",
                 "minilm": "MiniLM layer l (0-based) ↔ BERT-base layers 2l+1..2l+2",
                 "smollm2-135m": "SmolLM2 layer l (0-based, of 30) ↔ BERT-base layer "
                                 "⌊2l / 5⌋ + 1 (relative depth)"}
REPETITION_SHARE = 0.5  # a repetition head: most of its top pairs repeat a token
NOISE_FLOOR = 0.1  # "noise" is present when more than 1 in 10 top pairs are unrelated
DEFAULT_BOOT = 2000


# ----------------------------------------------------------------------------- cells
def similarity_cell(config: dict, shard: int, shards: int, attention_samples: int,
                    figure_dir: str | None) -> dict:
    """One shard: the corpus-level result, the per-input counts and (on its first
    ``attention_samples`` windows) the similarity-vs-attention statistics."""
    from tokengeo.probes.similarity.inputs import attention_payload, head_payload, input_payload
    from tokengeo.probes.similarity.plots import save_figures
    from tokengeo.probes.similarity.run import SimilarityConfig, analyze_prepared, prepare

    cfg = SimilarityConfig(**config)
    prepared = prepare(cfg, shard=shard, shards=shards)
    result = analyze_prepared(cfg, prepared, keep_inputs=True)
    value = {"result": result.to_dict(), "inputs": input_payload(result.input_counts),
             "figures": []}
    if attention_samples:
        comparison = _compare(prepared, cfg, attention_samples)
        value["attention"] = {**attention_payload(comparison),
                              "heads": head_payload(comparison)}
    if figure_dir is None:
        return value
    return draw_figures(value, lambda: save_figures(result, figure_dir))


def _compare(prepared, cfg, n: int):
    from tokengeo.probes.similarity.corpus import Windows
    from tokengeo.probes.similarity.vs_attention import compare_windows, word_ids_of

    w = prepared.windows
    sub = Windows(w.input_ids[:n], w.sentence_ids[:n], w.special_ids)
    words = word_ids_of(prepared.tokenizer, sub.input_ids, sub.sentence_ids)
    return compare_windows(prepared.model, sub, batch_size=min(cfg.batch_size, 8),
                           word_ids=words)


def _key(model: str, corpus: str, shard: int) -> str:
    return f"{model}-{corpus}-shard{shard}"


def _units(settings: dict):
    """(model, corpus label, corpus spec, shard, shards) of every cell, main ones first."""
    for model in settings["models"]:
        for label, spec in settings["corpora"].items():
            for shard in range(spec["shards"]):
                yield model, label, spec["corpus"], shard, spec["shards"]


def cells(settings: dict, ctx: SuiteContext) -> list[Cell]:
    main = (settings["models"][0], next(iter(settings["corpora"])))
    costs = settings.get("cell_cost", {})
    out = []
    for model, label, corpus, shard, shards in _units(settings):
        config = {**settings["analysis"], "model": model, "corpus": corpus}
        figures = str(ctx.figure_dir) if (model, label, shard) == (*main, 0) else None
        kwargs = {"config": config, "shard": shard, "shards": shards,
                  "attention_samples": settings["attention_samples"], "figure_dir": figures}
        fields = FIELDS + (("attention.rho",) if settings["attention_samples"] else ())
        out.append(Cell(NAME, _key(model, label, shard), similarity_cell, kwargs,
                        label=f"similarity {model} on {label}, shard {shard}", fields=fields,
                        cost=float(costs.get(model, costs.get("default", 1.0)))))
    return out


# ----------------------------------------------------------------------------- data
def _groups(n_layers: int) -> dict[str, list[int]]:
    third = max(1, n_layers // 3)
    return {"early": list(range(third)), "middle": list(range(third, n_layers - third)),
            "final": list(range(n_layers - third, n_layers))}


class Analysis:
    """The pooled shards of one (model, corpus): per-input data and per-shard results."""

    def __init__(self, model: str, corpus: str, values: list[dict]):
        from tokengeo.probes.similarity.inputs import pool, pool_attention

        self.model, self.corpus, self.values = model, corpus, values
        self.inputs = pool([v["inputs"] for v in values])
        with_attention = [v["attention"] for v in values if "attention" in v]
        self.attention = pool_attention(with_attention) if with_attention else None
        self.results = [v["result"] for v in values]
        self.groups = _groups(self.inputs.n_layers)


def _analyses(settings: dict, results: dict[str, CellResult]) -> tuple[dict, list[str]]:
    """{(model, corpus label): Analysis} of every complete (model, corpus), and one line per
    incomplete one saying why it is missing."""
    out, missing = {}, []
    for model in settings["models"]:
        for label, spec in settings["corpora"].items():
            keys = [_key(model, label, s) for s in range(spec["shards"])]
            why = next((("cell missing" if results.get(k) is None else results[k].not_run)
                        for k in keys if results.get(k) is None or results[k].not_run), None)
            if why:
                missing.append(f"{model} on {label}: {why}")
            else:
                out[(model, label)] = Analysis(model, label, [results[k].value for k in keys])
    return out, missing


def _boot_interval(b, values=None) -> Interval:
    """A bootstrap-over-inputs summary as a claim's interval; ``values`` (N,) the per-input
    numbers it resampled (NaN dropped), kept for report.json."""
    kept = () if values is None else tuple(
        float(v) for v in values.flatten().tolist() if v == v)
    return Interval(b.mean, b.low, b.high, b.n, 0.0, method="bootstrap over inputs",
                    values=kept)


# ----------------------------------------------------------------------------- claims
# (text, section, paper, quantity, share name, group A, group B)
CONTRASTS = [
    ("middle layers put more top similarities at short range than early layers",
     "layer-wise matrices", "middle: short range; early: long range",
     "share of top pairs at distance <= w, middle − early layers (per input, mean over heads)",
     "short", "middle", "early"),
    ("early layers put more top similarities at long range than final layers",
     "layer-wise distance distributions", "long range dominates early, weak late",
     "share of top pairs at distance >= T/4, early − final layers (per input)",
     "long", "early", "final"),
    ("final layers keep similarity within sentences more than early layers, beyond the "
     "distance-matched chance", "final layers",
     "similarity within sentences late, dropped across boundaries",
     "within-sentence share of top pairs − its distance-matched chance, final − early "
     "layers (per input)", "excess", "final", "early"),
]


SAME_SENTENCE_33 = "top similarities fall within the same sentence more than a third of the time"
SAME_SENTENCE_CHANCE = ("top similarities prefer the same sentence, above the distance-matched "
                        "chance")
BEYOND_ATTENTION = "output similarity carries information attention does not"
LONG_RANGE = "final layers put fewer top similarities at long range than chance"
BEYOND_DISTANCE = "output similarity carries information attention and token distance do not"
# (row text start, how its readings combine, the row's text) of findings read several ways
MERGED = [
    ((SAME_SENTENCE_33, SAME_SENTENCE_CHANCE), "all",
     "top similarities prefer the same sentence: a share above 33 % and above the "
     "distance-matched chance"),
    ((BEYOND_ATTENTION,), "any", BEYOND_ATTENTION + " (some relation)"),
    ((BEYOND_DISTANCE,), "any", BEYOND_DISTANCE + " (some relation)"),
]
CATALOGUE = {  # row text start -> the catalogue entry the row tests
    CONTRASTS[0][0]: "similarity.middle-layers-short-range",
    CONTRASTS[1][0]: "similarity.early-layers-long-range",
    CONTRASTS[2][0]: "similarity.final-layers-within-sentence",
    "top similarities prefer the same sentence": "similarity.same-sentence-preference",
    "a repetition head": "similarity.repetition-heads",
    BEYOND_ATTENTION: "similarity.beyond-attention",
    "heads specialise": "similarity.distinct-token-per-head",
    "high similarities include noise": "similarity.noise",
    "final layers' attention concentrates": "similarity.separator-attention",
    "high-similarity pairs sit in high-attention": "similarity.high-attention-regions",
    LONG_RANGE: "similarity.long-range-struggle",
    BEYOND_DISTANCE: "similarity.beyond-attention-by-distance",
}


def merged(rows: list[Claim]) -> list[Claim]:
    """One row per paper claim (:data:`MERGED`): rows that read one claim several ways
    become the members of one family, labelled by what each reads; each row then carries
    its catalogue entry (:data:`CATALOGUE`)."""
    out = list(rows)
    for starts, rule, text in MERGED:
        parts = [r for r in out if r.text.startswith(starts)]
        if len(parts) < 2:
            continue
        for r in parts:
            r.label = r.text.split(": ", 1)[-1].split(" [")[0] if rule == "any" else (
                "share > 1/3" if r.text.startswith(SAME_SENTENCE_33) else "above chance")
        models = parts[0].text.rsplit(" [", 1)[-1]
        row = family(NAME, f"{text} [{models}", parts, rule=rule, proxy=parts[0].proxy)
        ids = {id(r) for r in parts[1:]}
        out = [row if r is parts[0] else r for r in out if id(r) not in ids]
    for r in out:
        r.catalogue = next((cid for start, cid in CATALOGUE.items()
                            if r.text.startswith(start)), None)
    return out


def per_finding(claims: list[Claim]) -> list[Claim]:
    """One row per finding of the paper: a claim measured on several models becomes one
    family whose members are its models (rule ``all``: the paper states each finding of
    BERT-like encoders in general, so it holds where it holds in every model measured);
    a claim of one model stays a row of its own. Order: each finding's first place."""
    groups: dict[str, list[Claim]] = {}
    for c in claims:
        groups.setdefault(c.text.rsplit(" [", 1)[0], []).append(c)
    out = []
    for text, members in groups.items():
        if len(members) == 1:
            out.append(members[0])
            continue
        models = [m.text.rsplit(" [", 1)[1].rstrip("]") for m in members]
        for m, model in zip(members, models, strict=True):
            m.label = model
        out.append(family(NAME, f"{text} [{', '.join(models)}]", members, rule="all",
                          proxy="; ".join(m.proxy or "" for m in members)))
    return out


def _proxy(model: str, corpus: str) -> str:
    return f"{MODEL_NAMES.get(model, model)} on {corpus} for BERT-base on the paper's corpus"


def _claim(text, section, paper, quantity, region, measured, model, corpus, detail=""):
    return Claim(NAME, f"{text} [{model}]", f"{SRC}, {section}", paper, quantity, region,
                 measured=measured, detail=detail, kind="stand-in", proxy=_proxy(model, corpus))


def _contrast_claims(a: Analysis, n_boot: int) -> list[Claim]:
    from tokengeo.probes.similarity.inputs import contrast, layer_share, repetition_head

    out = []
    g = a.groups
    for text, section, paper, quantity, name, first, second in CONTRASTS:
        b = contrast(a.inputs, name, g[first], g[second], n_boot=n_boot)
        per_input = (layer_share(a.inputs, name, g[first])
                     - layer_share(a.inputs, name, g[second]))  # (N,) what it resamples
        shares = {k: float(layer_share(a.inputs, name, g[k]).mean()) for k in g}
        detail = ", ".join(f"{k} {v:.3f}" for k, v in shares.items())
        out.append(_claim(text, section, paper, quantity + f", bootstrap over {b.n} inputs",
                          Region.above(0), _boot_interval(b, per_input), a.model, a.corpus,
                          f"mean share by layer group: {detail}"))
    all_layers = range(a.inputs.n_layers)
    from tokengeo.probes.similarity.ranks import bootstrap_mean

    excess = layer_share(a.inputs, "excess", all_layers)  # (N,) per input
    b = bootstrap_mean(excess, n_boot=n_boot)
    within = layer_share(a.inputs, "within", all_layers)  # (N,) per input
    b33 = bootstrap_mean(within, n_boot=n_boot)
    out.append(_claim(SAME_SENTENCE_33, "sentence preference", "> 33% (BERT)",
                      f"within-sentence share of top pairs, all layers (per input), bootstrap "
                      f"over {b33.n} inputs", Region.above(1 / 3),
                      _boot_interval(b33, within), a.model, a.corpus))
    out.append(_claim(SAME_SENTENCE_CHANCE, "sentence preference", "> 33% (BERT)",
                      f"within-sentence share of top pairs − its distance-matched chance, all "
                      f"layers (per input), bootstrap over {b.n} inputs", Region.above(0),
                      _boot_interval(b, excess), a.model, a.corpus))
    rep = repetition_head(a.inputs, n_boot=n_boot)
    measured_shares = a.inputs.repeated / a.inputs.top_k  # (N, L, H); odd inputs measure
    L = a.inputs.n_layers
    where = next(k for k, layers in g.items() if rep.layer in layers)
    out.append(_claim(
        "a repetition head: most of its top pairs repeat a token", "head specialisation",
        "a head identifies repetitions (L11H8, a final-layer head)",
        f"repeated-token share of the top pairs of the head chosen on the even inputs, on "
        f"the {rep.share.n} odd inputs, bootstrap over inputs",
        Region.above(REPETITION_SHARE),
        _boot_interval(rep.share, measured_shares[1::2, rep.layer, rep.head]), a.model,
        a.corpus,
        f"the head: layer {rep.layer} of 0–{L - 1}, head {rep.head}, a {where}-layer head "
        f"(share {rep.selection_share:.3f} on the inputs it was chosen on; "
        f"{LAYER_MAPPING.get(a.model, 'no BERT mapping')})"))
    return out


RELATION_TEXT = {"same_sentence": "two tokens of one sentence",
                 "same_word": "two word pieces of one word",
                 "repetition": "the same token twice"}


def _attention_claims(a: Analysis, n_boot: int) -> list[Claim]:
    from tokengeo.probes.similarity.ranks import bootstrap_mean

    out = []
    for name in a.attention.relations:
        b = bootstrap_mean(a.attention.per_input(name, "delta"), n_boot=n_boot)
        auc_s = float(a.attention.per_input(name, "auc_similarity").nanmean())
        auc_a = float(a.attention.per_input(name, "auc_attention").nanmean())
        cond = bootstrap_mean(a.attention.per_input(name, "auc_conditional"), null=0.5,
                              n_boot=n_boot)
        rho = float(a.attention.rho.nanmean())
        per_head = _per_head_text(a, name, n_boot)
        # the paper's claim: S knows about the relation *beyond* attention, i.e. within
        # strata of equal attention S still separates the pairs (AUC > 0.5); ΔAUC > 0 would
        # ask that S beat attention outright, which is not what the paper says
        values = a.attention.per_input(name, "auc_conditional")
        out.append(_claim(
            f"output similarity carries information attention does not: {name} "
            f"({RELATION_TEXT[name]})", "output vectors vs attention maps",
            "output vectors carry information attention maps miss",
            f"AUC of the similarity matrix for predicting {name} pairs within 10 strata of "
            f"the (symmetrised) attention map (0.5: nothing beyond attention; per input, "
            f"mean over all heads), bootstrap over {cond.n} inputs", Region.above(0.5),
            _boot_interval(cond, values), a.model, a.corpus,
            f"AUC_S {auc_s:.3f}, AUC_A {auc_a:.3f}; ΔAUC (S − A) {b.mean:.3f} "
            f"[{b.low:.3f}, {b.high:.3f}]; Spearman ρ(S, A) {rho:.3f}{per_head}"))
    return out


def _distance_claims(a: Analysis, n_boot: int) -> list[Claim]:
    """Beyond attention *and* distance: per relation, the AUC of the similarity within
    joint strata of attention and token distance (4 distance bins × the attention bins;
    0.5: nothing beyond both), per input, bootstrap over inputs. Cells computed before
    these strata lack the statistic: no claim then (its row is reported not run)."""
    from tokengeo.probes.similarity.ranks import bootstrap_mean

    out = []
    for name in a.attention.relations:
        if "auc_conditional_distance" not in a.attention.relations[name]:
            continue
        values = a.attention.per_input(name, "auc_conditional_distance")
        cond = bootstrap_mean(values, null=0.5, n_boot=n_boot)
        out.append(_claim(
            f"{BEYOND_DISTANCE}: {name} ({RELATION_TEXT[name]})",
            "output vectors vs attention maps", "output vectors carry information attention "
            "maps miss", f"AUC of the similarity matrix for predicting {name} pairs within "
            "joint strata of the (symmetrised) attention map and the token distance |i − j| "
            f"(0.5: nothing beyond both; per input, mean over all heads), bootstrap over "
            f"{cond.n} inputs", Region.above(0.5), _boot_interval(cond, values), a.model,
            a.corpus))
    return out


def _per_head_text(a: Analysis, relation: str, n_boot: int) -> str:
    """The heads whose own ΔAUC interval (bootstrap over inputs) lies above / below 0."""
    from tokengeo.probes.similarity.inputs import head_intervals

    if a.attention.heads is None:
        return ""
    iv = head_intervals(a.attention.heads[relation], n_boot=min(n_boot, 1000))
    total = iv.mean.numel()
    layer, head = iv.best()
    return (f"; heads whose own ΔAUC interval lies above 0: {iv.count_above()} of {total}, "
            f"below 0: {iv.count_below()}; largest ΔAUC: layer {layer} head {head}, "
            f"{float(iv.mean[layer, head]):.3f} [{float(iv.low[layer, head]):.3f}, "
            f"{float(iv.high[layer, head]):.3f}]")


def _shard_stat(a: Analysis, stat) -> Interval:
    return mean_interval([stat(r) for r in a.results])


def _heads(r: dict, key: str, layers) -> list[float]:
    return [float(v) for layer in layers for v in r[key][layer] if v is not None]


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs)


def _shard_claims(a: Analysis) -> list[Claim]:
    """The claims read from each shard's corpus-level statistics (t interval over shards)."""
    g, L = a.groups, a.inputs.n_layers
    n = len(a.results)
    over = f", over {n} disjoint shards of inputs"
    specs = [
        ("heads specialise: in each input, each head converges on a distinct token",
         "head specialisation", "a distinct token per head, per input",
         "share of heads with a dominant token of their own in an input − its chance (heads "
         "picking independently), mean over layers", Region.above(0),
         lambda r: _mean([x - c for x, c in zip(r["input_distinct_share"],
                                                r["input_distinct_chance"], strict=True)])),
    ]
    specs.append((
        LONG_RANGE, "structural insights",
        "strong within sentences, weak on long-range relations",
        "share of the final layers' top pairs at distance >= T/4 − the share of all pairs "
        "there (mean over heads)", Region.below(0),
        lambda r: _mean(_heads(r, "top_long_range_share", g["final"]))
        - r["long_range_chance"]))
    noise_chance = _mean([r["noise_chance"] for r in a.results])
    specs.append((
        "high similarities include noise: unrelated token pairs, fewer than by chance",
        "signal and noise", "high similarity between unrelated tokens",
        "share of top pairs with no shared sentence or token − chance, all heads",
        Region(NOISE_FLOOR - noise_chance, 0,
               f"within ({NOISE_FLOOR:g} − chance, 0); chance {noise_chance:.3f}"),
        lambda r: _mean(_heads(r, "noise_share", range(L))) - r["noise_chance"]))
    if all(r.get("separator_attention") is not None for r in a.results):
        specs += [
            ("final layers' attention concentrates on separators ('.', ',')",
             "attention maps", "attention on separator tokens",
             "final-layer attention mass on separators − their token share", Region.above(0),
             lambda r: _mean(_heads(r, "separator_attention", g["final"]))
             - r["separator_chance"]),
            ("high-similarity pairs sit in high-attention regions",
             "attention-normalised similarity", "attention locates similarity",
             "attention lift of top pairs − of all pairs, all heads", Region.above(0),
             lambda r: _mean([x - y for x, y in zip(_heads(r, "top_attention_lift", range(L)),
                                                    _heads(r, "all_attention_lift", range(L)),
                                                    strict=True)])),
        ]
    return [_claim(text, section, paper, quantity + over, region, _shard_stat(a, stat),
                   a.model, a.corpus) for text, section, paper, quantity, region, stat in specs]


# ----------------------------------------------------------------------------- tables
def _layer_table(analyses: dict) -> tuple[str, list[str], list[list[str]]]:
    head = ["model", "corpus", "layer", "depth", "within", "within chance (dist.-matched)",
            "short", "long", "repeated", "sentence contrast", "separator attention",
            "distinct per input / chance"]
    rows = [_layer_row(a, l) for a in analyses.values() for l in range(a.inputs.n_layers)]
    return ("per layer, means over heads and inputs (top-pair shares pooled over shards; "
            "sentence contrast, separator attention and distinct heads: mean over shards)",
            head, rows)


def _layer_row(a: Analysis, l: int) -> list[str]:
    from tokengeo.probes.similarity.inputs import layer_share

    L = a.inputs.n_layers
    shares = [float(layer_share(a.inputs, name, [l]).mean())
              for name in ("within", "dm_chance", "short", "long", "repeated")]
    summaries = [r["layer_summary"] for r in a.results]
    shard = [_shard_mean(summaries, l, key) for key in
             ("sentence_contrast", "separator_attention", "input_distinct_share",
              "input_distinct_chance")]
    return [a.model, a.corpus, str(l), f"{l / max(1, L - 1):.2f}",
            *(f"{x:.3f}" for x in shares), shard[0], shard[1], f"{shard[2]} / {shard[3]}"]


def _shard_mean(summaries: list[list[dict]], layer: int, key: str) -> str:
    vals = [s[layer].get(key) for s in summaries]
    if any(v is None for v in vals):
        return "—"
    return f"{_mean(vals):.3f}"


def _contrast_table(analyses: dict, n_boot: int) -> tuple[str, list[str], list[list[str]]]:
    from tokengeo.probes.similarity.inputs import contrast

    rows = []
    for (model, corpus), a in analyses.items():
        g = a.groups
        for _, _, _, _, name, first, second in CONTRASTS:
            b = contrast(a.inputs, name, g[first], g[second], n_boot=n_boot)
            rows.append([model, corpus, f"{name}: {first} − {second}",
                         f"{b.mean:.4f} [{b.low:.4f}, {b.high:.4f}]", str(b.n)])
    return ("layer contrasts per model and corpus (bootstrap over inputs; the code "
            "documentation rows are not claims)",
            ["model", "corpus", "contrast", "mean [95% interval]", "inputs"], rows)


def _auc_table(analyses: dict, n_boot: int) -> tuple[str, list[str], list[list[str]]]:
    from tokengeo.probes.similarity.ranks import bootstrap_mean

    rows = []
    for (model, corpus), a in analyses.items():
        att = a.attention
        if att is None:
            continue
        for name in att.relations:
            b = bootstrap_mean(att.per_input(name, "delta"), n_boot=n_boot)
            rows.append([model, corpus, name, "all",
                         f"{float(att.per_input(name, 'auc_similarity').nanmean()):.3f}",
                         f"{float(att.per_input(name, 'auc_attention').nanmean()):.3f}",
                         f"{b.mean:.3f} [{b.low:.3f}, {b.high:.3f}]",
                         f"{float(att.per_input(name, 'auc_conditional').nanmean()):.3f}",
                         str(b.n)])
            for l in range(att.rho.shape[1]):
                rows.append([model, corpus, name, str(l),
                             f"{float(att.layer_means(name, 'auc_similarity')[l]):.3f}",
                             f"{float(att.layer_means(name, 'auc_attention')[l]):.3f}",
                             f"{float(att.layer_means(name, 'delta')[l]):.3f}",
                             f"{float(att.layer_means(name, 'auc_conditional')[l]):.3f}", ""])
    return ("output similarity vs attention maps: AUC for predicting a token relation "
            "(means over heads and inputs; 'all' rows: ΔAUC bootstrapped over inputs)",
            ["model", "corpus", "relation", "layer", "AUC_S", "AUC_A", "ΔAUC",
             "AUC_S within A strata", "inputs"], rows)


# ----------------------------------------------------------------------------- summary
def referee(settings: dict) -> Referee:
    a = settings["analysis"]
    corpora = ", ".join(f"{k}: {v['corpus']} ({v['shards']} × {a.get('samples')} windows)"
                        for k, v in settings["corpora"].items())
    return Referee(
        question="Do per-head similarities of a pretrained encoder's output vectors show the "
                 "paper's layer story (long range early, short range in the middle, "
                 "sentences in the final layers), specialised heads, and information that "
                 "the attention maps do not carry?",
        can_say="each layer statistic as a contrast between layer groups, per input, with "
                "intervals from a bootstrap over inputs; the attention comparison as the "
                "AUC difference per input, bootstrapped over inputs. The models are sentence "
                "encoders, not the paper's masked-LM BERT.",
        gap=[("model", "BERT-base (12 layers, 12 heads, masked LM)",
              "; ".join(MODEL_NAMES.get(m, m) for m in settings["models"])),
             ("data", "20,000 windows of 128 tokens", f"{corpora}; {a.get('seq_len')} "
              "tokens per window"),
             ("replication", "one corpus pass", "inputs (bootstrap over inputs)")])


UNMEASURED = ("no stored cell holds this statistic (cells computed before it was measured, "
              "or a model without attention maps); delete OUT/cells/similarity to recompute "
              "them")


def _not_measured(rows: list[Claim], settings: dict, analyses: dict,
                  missing: list[str]) -> list[Claim]:
    """One not-run row per paper claim (:data:`CATALOGUE`) that no row measures, naming
    the main model's reason (the first missing analysis when the main model ran)."""
    main_model, main_corpus = settings["models"][0], next(iter(settings["corpora"]))
    carried = {c.catalogue for c in rows}
    why = next((m for m in missing if m and m.startswith(f"{main_model} on {main_corpus}")),
               next((m for m in missing if m), UNMEASURED))
    return [Claim(NAME, f"{start} [{main_model}]", SRC, "—", "—", Region.above(0),
                  not_run=why, kind="stand-in", catalogue=cid,
                  proxy=_proxy(main_model, main_corpus))
            for start, cid in CATALOGUE.items() if cid not in carried]


def summarise(settings: dict, results: dict[str, CellResult], ctx: SuiteContext) -> SuiteOutput:
    n_boot = int(settings.get("n_boot", DEFAULT_BOOT))
    main_model, main_corpus = settings["models"][0], next(iter(settings["corpora"]))
    analyses, missing = ({}, [ctx.skipped]) if ctx.skipped else _analyses(settings, results)
    claims: list[Claim] = []
    for model in settings["models"]:
        a = analyses.get((model, main_corpus))
        if a is None:
            continue
        claims += _contrast_claims(a, n_boot)
        if a.attention is not None:
            claims += _attention_claims(a, n_boot) + _distance_claims(a, n_boot)
        if model == main_model:
            claims += _shard_claims(a)
    claims = merged(per_finding(claims))
    claims += _not_measured(claims, settings, analyses, missing)
    main = analyses.get((main_model, main_corpus))
    figures = [Path(f) for f in main.values[0]["figures"]] if main else []
    out = SuiteOutput(NAME, TITLE, PAPER, claims, figures=figures, paper_key=PAPER_KEY,
                      referee=referee(settings))
    if analyses:
        out.tables += [_layer_table(analyses), _contrast_table(analyses, n_boot),
                       _auc_table(analyses, n_boot)]
    out.notes += [f"Not run: {m}." for m in missing if m]
    out.notes.append(
        "MPNet and MiniLM are sentence encoders (fine-tuned for sentence embeddings), not "
        "the paper's masked-LM BERT-base; a causal decoder (SmolLM2, when named) has no "
        "contrastive fine-tuning. Every model is read on the pairs i < j, each pair once; for "
        "a causal decoder its attention there is P_ji, the later token's attention to the "
        "earlier (the lower triangle: P_ij = 0 for j > i), and z_i sums the prefix up to i. "
        "Layer groups are thirds of the "
        "layers (early, middle, final). Layer mapping to BERT-base by relative depth: "
        + "; ".join(LAYER_MAPPING[m] for m in settings["models"] if m in LAYER_MAPPING)
        + ". 'Noise' = top pairs with no sentence or repetition relation. The mean-similarity "
        "figure uses one sequential scale per layer (its 1st–99th percentile), so panels "
        "compare within a layer, not across layers.")
    out.notes.extend(figure_notes(results))
    return out


SUITE = Suite(NAME, TITLE, PAPER, SETTINGS, cells, summarise, planned=shards_t)
