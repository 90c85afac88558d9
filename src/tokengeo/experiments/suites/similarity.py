"""Suite ``similarity``: Halevi et al. (arXiv 2512.21956) on all-MiniLM-L6-v2.

One cell per *replicate*: the streaming head-output similarity analysis of
:mod:`tokengeo.probes` over ``samples`` windows of ``seq_len`` tokens, each replicate its own
random draw of windows (seed = replicate). The unit of replication is the input: each claim's
statistic (a mean over the heads of a layer group, minus the chance level the analysis
computes from the corpus) is computed once per replicate, and its 95% interval is the t
interval over replicates, never over the heads of the one model. Layers are grouped into
thirds (early, middle, final); contrasts state their direction (early vs final, as the
paper reads them) and are measured against the analysis's own chance levels.

Layer mapping (MiniLM-L6 stands in for the paper's BERT-base, 12 layers): by relative depth,
MiniLM layer ``l`` (0-based) ↔ BERT layers ``2l+1 .. 2l+2`` (1-based); all-MiniLM-L6-v2's base,
nreimers/MiniLM-L6-H384-uncased, is the 12-layer MiniLM-L12-H384 with every second layer kept
(its model card). The thirds are then MiniLM layers 0–1 /
2–3 / 4–5 ↔ BERT layers 1–4 / 5–8 / 9–12 (four BERT layers per group, as in the paper's
early / middle / final reading).

Per-input claims (the paper's statements about one input, not about the corpus): "each
head converges on a distinct token" compares, per layer, the share of heads whose dominant
token in an input is theirs alone with the share expected if heads picked independently
(:mod:`tokengeo.probes.similarity.stats`, *per input*); "repetition heads" asks for a head
whose top pairs in an input are mostly (> 50%) repeated tokens, with the interval of that
head's per-input share.
"""

from __future__ import annotations

from pathlib import Path

from tokengeo.experiments.cells import Cell, CellResult, draw_figures, figure_notes
from tokengeo.experiments.claims import Claim
from tokengeo.experiments.report import Referee, SuiteOutput
from tokengeo.experiments.settings import Setting
from tokengeo.experiments.stats import Region, mean_interval
from tokengeo.experiments.suite import Suite, SuiteContext
from tokengeo.experiments.sweep import Sweep

SETTINGS = {  # suites/similarity.toml: [common] + [quick] or [full]
    "analysis": Setting("table", check=lambda table, where: _check_analysis(table, where)),
    "replicates": Setting("int", lo=2),
    "cell_cost": Setting("number", required=False),
}


def _check_analysis(table: dict, where: str) -> None:
    from tokengeo.errors import ConfigError
    from tokengeo.experiments.settings import fields_of
    from tokengeo.probes.similarity.run import SimilarityConfig

    fields_of(SimilarityConfig)(table, where)
    try:
        SimilarityConfig(**table).validate()
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None

NAME = "similarity"
TITLE = "Head-output similarity: what each head's output vectors agree on"
PAPER = ("Halevi et al., \"Self-attention vector output similarities reveal how machines pay "
         "attention\", arXiv 2512.21956 (BERT-12 there; all-MiniLM-L6-v2 here)")
PAPER_KEY = "Halevi et al. (head-output similarity)"
SRC = "Halevi et al. 2025"
FIELDS = ("result.layer_summary", "result.short_range_mass", "result.input_distinct_share",
          "result.within_sentence_chance_distance_matched", "result.long_range",
          "figures")  # read by summarise
LAYER_MAPPING = ("MiniLM layer l (0-based) ↔ BERT-base layers 2l+1..2l+2 (relative depth; "
                 "the base of all-MiniLM-L6-v2 keeps every second layer of the 12-layer "
                 "MiniLM-L12-H384): early = "
                 "MiniLM 0–1 ↔ BERT 1–4, middle = 2–3 ↔ 5–8, final = 4–5 ↔ 9–12")
REPETITION_SHARE = 0.5  # a repetition head: most of its top pairs repeat a token
NOISE_FLOOR = 0.1  # "noise" is present when more than 1 in 10 top pairs are unrelated


def similarity_cell(config: dict, figure_dir: str | None) -> dict:
    from tokengeo.probes.similarity.plots import save_figures
    from tokengeo.probes.similarity.run import SimilarityConfig, run_similarity

    result = run_similarity(SimilarityConfig(**config))
    value = {"result": result.to_dict(), "figures": []}
    if figure_dir is None:
        return value
    return draw_figures(value, lambda: save_figures(result, figure_dir))


def _sweep(settings: dict) -> Sweep:
    """One analysis per replicate: the seed draws its windows."""
    base = dict(settings["analysis"])
    seed0 = int(base.get("seed", 0))
    return Sweep(NAME, {"analysis": {}}, tuple(seed0 + r for r in range(settings["replicates"])),
                 base, FIELDS, float(settings.get("cell_cost", 1.0)), parse=dict,
                 what="similarity")


def cells(settings: dict, ctx: SuiteContext) -> list[Cell]:
    sweep = _sweep(settings)
    first = sweep.seeds[0]

    def make(label: str, seed: int, cfg: dict):
        figures = str(ctx.figure_dir) if seed == first else None  # figures of one replicate
        return similarity_cell, {"config": cfg, "figure_dir": figures}
    return sweep.cells(make)


def _groups(n_layers: int) -> dict[str, list[int]]:
    third = max(1, n_layers // 3)
    return {"early": list(range(third)), "middle": list(range(third, n_layers - third)),
            "final": list(range(n_layers - third, n_layers))}


def _heads(r: dict, key: str, layers) -> list[float]:
    return [float(v) for layer in layers for v in r[key][layer] if v is not None]


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs)


def _n(r: dict) -> int:
    return len(r["short_range_mass"])


def _stat(r: dict, key: str, layers, minus=None) -> float:
    """Mean over the heads of ``layers`` of ``key`` (minus ``minus`` head by head)."""
    vals = _heads(r, key, layers)
    if minus is not None:
        vals = [v - c for v, c in zip(vals, _heads(r, minus, layers), strict=True)]
    return _mean(vals)


# (text, section, paper, quantity, region, statistic of one replicate, detail of one)
def _specs(g: dict[str, list[int]], n_layers: int) -> list[tuple]:
    all_l = range(n_layers)
    return [
        ("middle layers concentrate similarity near the diagonal, more than early layers",
         "layer-wise matrices", "middle: short range; early: long range",
         "short-range mass, middle − early layers (mean over heads)", Region.above(0),
         lambda r: _stat(r, "short_range_mass", g["middle"])
         - _stat(r, "short_range_mass", g["early"])),
        ("long-range relations: early layers above final layers (in units of chance)",
         "layer-wise distance distributions", "long range dominates early, weak late",
         "(top long-range share early − final) / chance", Region.above(0),
         lambda r: (_stat(r, "top_long_range_share", g["early"])
                    - _stat(r, "top_long_range_share", g["final"])) / r["long_range_chance"]),
        ("final layers: more similarity within a sentence than across (distance-matched)",
         "final layers", "similarity within sentences, dropped across boundaries",
         "sentence contrast of final layers (std units)", Region.above(0),
         lambda r: _stat(r, "sentence_contrast", g["final"])),
        ("top similarities prefer the same sentence, above chance", "sentence preference",
         "> 33% (BERT)", "within-sentence share of top pairs − its distance-matched chance, "
         "all layers", Region.above(0),
         lambda r: _stat(r, "within_sentence_share", all_l,
                         minus="within_sentence_chance_distance_matched")),
        ("heads specialise: in each input, each head converges on a distinct token",
         "head specialisation", "a distinct token per head, per input",
         "share of heads with a dominant token of their own in an input − its chance "
         "(heads picking independently), mean over layers", Region.above(0),
         lambda r: _mean([a - b for a, b in zip(r["input_distinct_share"],
                                                r["input_distinct_chance"], strict=True)])),
        ("repetition heads: some head's top pairs are mostly identical tokens of the input",
         "head specialisation", "a head identifies token repetitions",
         "repeated-token share of top pairs, the best head", Region.above(REPETITION_SHARE),
         lambda r: max(_heads(r, "repeated_token_share", all_l))),
        ("high similarities include noise: unrelated token pairs, fewer than by chance",
         "signal and noise", "high similarity between unrelated tokens",
         "share of top pairs with no shared sentence or token − chance, all heads",
         Region(NOISE_FLOOR - 1, 0, "within (floor − chance, 0)"),
         lambda r: _stat(r, "noise_share", all_l) - r["noise_chance"]),
    ]


def _attention_specs(g: dict[str, list[int]], n_layers: int) -> list[tuple]:
    return [
        ("final layers' attention concentrates on separators ('.', ',')", "attention maps",
         "attention on separator tokens",
         "final-layer attention mass on separators − their token share", Region.above(0),
         lambda r: _stat(r, "separator_attention", g["final"]) - r["separator_chance"]),
        ("high-similarity pairs sit in high-attention regions",
         "attention-normalised similarity", "attention locates similarity",
         "attention lift of top pairs − of all pairs, all heads", Region.above(0),
         lambda r: _stat(r, "top_attention_lift", range(n_layers),
                         minus="all_attention_lift")),
    ]


PROXY = "all-MiniLM-L6-v2 (6 layers) on Shakespeare + Python docs for BERT-base (12 layers)"


def _claims(reps: list[dict]) -> list[Claim]:
    r0 = reps[0]
    n_layers = _n(r0)
    g = _groups(n_layers)
    specs = _specs(g, n_layers)
    if all(r.get("separator_attention") is not None for r in reps):
        specs += _attention_specs(g, n_layers)
    out = []
    for text, section, paper, quantity, region, stat in specs:
        values = [stat(r) for r in reps]
        out.append(Claim(NAME, text, f"{SRC}, {section}", paper,
                         f"{quantity}, over {len(reps)} replicates (independent draws of "
                         "windows)", region, measured=mean_interval(values),
                         kind="stand-in", proxy=PROXY))
    noise = next(c for c in out if c.text.startswith("high similarities include noise"))
    chance = _mean([r["noise_chance"] for r in reps])
    noise.region = Region(NOISE_FLOOR - chance, 0, f"within ({NOISE_FLOOR:g} − chance, 0); "
                          f"chance {chance:.3f}")
    return out


def referee(settings: dict) -> Referee:
    a = settings["analysis"]
    return Referee(
        question="Do per-head similarities of a pretrained encoder's output vectors show the "
                 "paper's layer story (long range early, short range in the middle, "
                 "sentences in the final layers) and head specialisation?",
        can_say="each statistic as a contrast against the chance level the analysis "
                "computes from the corpus, with intervals over independent draws of input "
                "windows; MiniLM's 6 layers stand in for BERT's 12 (mapping below).",
        gap=[("model", "BERT-base (12 layers, 12 heads)", f"{a.get('model')} (6 layers)"),
             ("data", "20,000 windows of 128 tokens", f"{settings['replicates']} × "
              f"{a.get('samples')} windows of {a.get('seq_len')} tokens ({a.get('corpus')})"),
             ("replication", "one corpus pass", f"{settings['replicates']} replicates")])


def summarise(settings: dict, results: dict[str, CellResult], ctx: SuiteContext) -> SuiteOutput:
    sweep = _sweep(settings).results(results, ctx.skipped)
    missing = sweep.not_run()
    if missing:
        stub = Claim(NAME, "head-output similarity analysis", SRC, "—", "—", Region.above(0),
                     not_run=missing, kind="stand-in", proxy=PROXY)
        return SuiteOutput(NAME, TITLE, PAPER, [stub], paper_key=PAPER_KEY,
                           referee=referee(settings))
    reps = [sweep.raw("analysis", seed)["result"] for seed in sweep.seeds]
    r = reps[0]
    figures = sweep.raw("analysis", sweep.seeds[0])["figures"]
    out = SuiteOutput(NAME, TITLE, PAPER, _claims(reps), figures=[Path(f) for f in figures],
                      paper_key=PAPER_KEY, referee=referee(settings))
    keys = ["short_range_mass", "within_sentence_share", "sentence_contrast",
            "repeated_token_share", "noise_share", "top_long_range_share", "snr",
            "separator_attention", "input_convergence"]
    rows = []
    for row in r["layer_summary"]:
        rows.append([str(row["layer"])] + [
            "—" if row.get(k) is None else f"{row[k]:.3f}" for k in keys]
            + [f"{row['input_distinct_share']:.2f} / {row['input_distinct_chance']:.2f}",
               f"{row['distinct_dominant']:.2f}"])
    out.tables.append(("per layer, mean over heads (replicate 0)", ["layer", *keys,
                       "distinct per input / chance", "distinct over corpus"], rows))
    out.notes.append(
        f"{len(reps)} replicates of {r['n_samples']} windows of {r['seq_len']} tokens "
        f"({settings['analysis']}). Chance levels (replicate 0): within-sentence "
        f"{r['within_sentence_chance']:.3f}, short-range {r['short_range_chance']:.3f}, "
        f"repeated token {r['repeated_token_chance']:.3f}, noise {r['noise_chance']:.3f}. "
        "'Noise' = top pairs with no sentence or repetition relation (the paper's unrelated "
        "high similarities); SNR = d' of related vs unrelated pairs (see "
        "tokengeo.probes.similarity.stats). Long range: distance >= "
        f"{r['long_range']} (chance {r['long_range_chance']:.3f}). Layer mapping: "
        f"{LAYER_MAPPING}.")
    out.notes.extend(figure_notes(results))
    return out


SUITE = Suite(NAME, TITLE, PAPER, SETTINGS, cells, summarise)
