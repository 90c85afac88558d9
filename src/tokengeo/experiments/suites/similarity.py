"""Suite ``similarity``: Halevi et al. (arXiv 2512.21956) on all-MiniLM-L6-v2.

One cell: the streaming head-output similarity analysis of :mod:`tokengeo.probes` over
``samples`` windows of ``seq_len`` tokens. Layers are grouped into thirds (early, middle,
final); each claim compares per-head statistics of a group with another group or with the
chance level the analysis computes from the corpus (sentence lengths, token frequencies).

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
from tokengeo.experiments.report import SuiteOutput
from tokengeo.experiments.settings import Setting
from tokengeo.experiments.stats import Interval, Region, mean_interval, t975, welch_difference

SETTINGS = {  # suites/similarity.toml: [common] + [quick] or [full]
    "analysis": Setting("table", check=lambda table, where: _check_analysis(table, where)),
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
SRC = "Halevi et al. 2025"
FIELDS = ("result.layer_summary", "result.short_range_mass", "result.input_distinct_share",
          "result.repeated_token_share_std", "result.long_range", "figures")  # read by summarise
LAYER_MAPPING = ("MiniLM layer l (0-based) ↔ BERT-base layers 2l+1..2l+2 (relative depth; "
                 "the base of all-MiniLM-L6-v2 keeps every second layer of the 12-layer "
                 "MiniLM-L12-H384): early = "
                 "MiniLM 0–1 ↔ BERT 1–4, middle = 2–3 ↔ 5–8, final = 4–5 ↔ 9–12")
REPETITION_SHARE = 0.5  # a repetition head: most of its top pairs repeat a token
NOISE_FLOOR = 0.1  # "noise" is present when more than 1 in 10 top pairs are unrelated
LONG_RANGE_FLOOR = 0.1  # long-range relations are present above a tenth of chance


def similarity_cell(config: dict, figure_dir: str) -> dict:
    from tokengeo.probes.similarity.plots import save_figures
    from tokengeo.probes.similarity.run import SimilarityConfig, run_similarity

    result = run_similarity(SimilarityConfig(**config))
    return draw_figures({"result": result.to_dict()}, lambda: save_figures(result, figure_dir))


def cells(settings: dict) -> list[Cell]:
    return [Cell(NAME, "analysis", similarity_cell,
                 {"config": dict(settings["analysis"]), "figure_dir": settings["_figure_dir"]},
                 label=f"{settings['analysis']}", fields=FIELDS,
                 cost=float(settings.get("cell_cost", 1.0)))]  # ~1-thread CPU s: a hint


def _groups(n_layers: int) -> dict[str, list[int]]:
    third = max(1, n_layers // 3)
    return {"early": list(range(third)), "middle": list(range(third, n_layers - third)),
            "final": list(range(n_layers - third, n_layers))}


def _heads(r: dict, key: str, layers: list[int]) -> list[float]:
    return [float(v) for layer in layers for v in r[key][layer] if v is not None]


def _claims(r: dict, g: dict[str, list[int]]) -> list[Claim]:
    def claim(text, section, paper, quantity, region, measured, detail=""):
        return Claim(NAME, text, f"{SRC}, {section}", paper, quantity, region,
                     measured=measured, detail=detail)

    short_chance = r["short_range_chance"]
    early_short = _heads(r, "short_range_mass", g["early"])
    out = [
        claim("middle layers concentrate similarity near the diagonal, more than early layers",
              "layer-wise matrices", "middle: short range; early: long range",
              "short-range mass, middle − early heads (Welch)", Region.above(0),
              welch_difference(_heads(r, "short_range_mass", g["middle"]), early_short)),
        claim("early layers spread similarity over long range (short-range mass near chance)",
              "layer-wise matrices", "spread evenly over the matrix",
              "early-layer short-range mass / chance", Region(0.5, 2.0, "within (0.5, 2)"),
              mean_interval([x / short_chance for x in early_short]),
              f"chance share of short-range pairs {short_chance:.3f}"),
        claim("final layers: more similarity within a sentence than across (distance-matched)",
              "final layers", "similarity within sentences, dropped across boundaries",
              "sentence contrast of final-layer heads (std units)", Region.above(0),
              mean_interval(_heads(r, "sentence_contrast", g["final"]))),
        claim("top similarities prefer the same sentence, above 33%", "sentence preference",
              "> 33%", "within-sentence share of top pairs, all heads", Region.above(0.33),
              mean_interval(_heads(r, "within_sentence_share", list(range(_n(r))))),
              f"chance {r['within_sentence_chance']:.3f}"),
        _distinct_claim(r, claim),
        _repetition_claim(r, claim),
        _noise_claim(r, claim),
        _long_range_claim(r, g, claim),
    ]
    if r.get("separator_attention") is not None:
        sep = [x - r["separator_chance"] for x in _heads(r, "separator_attention", g["final"])]
        out.append(claim("final layers' attention concentrates on separators ('.', ',')",
                         "attention maps", "attention on separator tokens",
                         "final-layer attention mass on separators − their token share",
                         Region.above(0), mean_interval(sep),
                         f"separator token share {r['separator_chance']:.3f}"))
        lift = [a - b for a, b in zip(_heads(r, "top_attention_lift", range(_n(r))),
                                      _heads(r, "all_attention_lift", range(_n(r))), strict=True)]
        out.append(claim("high-similarity pairs sit in high-attention regions",
                         "attention-normalised similarity", "attention locates similarity",
                         "attention lift of top pairs − of all pairs, all heads",
                         Region.above(0), mean_interval(lift)))
    return out


def _distinct_claim(r: dict, claim) -> Claim:
    obs, chance = r["input_distinct_share"], r["input_distinct_chance"]
    per_layer = ", ".join(f"{a:.2f}/{b:.2f}" for a, b in zip(obs, chance, strict=True))
    by_id = ", ".join(f"{a:.2f}/{b:.2f}" for a, b in zip(
        r["input_distinct_share_by_id"], r["input_distinct_chance_by_id"], strict=True))
    conv = mean_interval(_heads(r, "input_convergence", range(_n(r))))
    return claim(
        "heads specialise: in each input, each head converges on a distinct token",
        "head specialisation", "a distinct token per head, per input",
        "per layer: share of heads with a dominant token of their own in an input − its "
        "chance (heads picking independently)", Region.above(0),
        mean_interval([a - b for a, b in zip(obs, chance, strict=True)]),
        f"per layer observed/chance by position {per_layer}; by token id {by_id}; "
        f"top pairs holding the head's most frequent token per input {conv.mean:.2f}; "
        f"corpus-wide distinct dominant ids {r['distinct_dominant_overall']:.2f} of heads")


def _repetition_claim(r: dict, claim) -> Claim:
    share, std = r["repeated_token_share"], r["repeated_token_share_std"]
    flat = [(v, l, h) for l, row in enumerate(share) for h, v in enumerate(row)]
    best, l, h = max(flat)
    n, chance = r["n_samples"], r["repeated_token_chance"]
    n_heads = sum(v > REPETITION_SHARE for v, _, _ in flat)
    return claim(
        "repetition heads: a head's top pairs are mostly identical tokens of the input",
        "head specialisation", "a head identifies token repetitions",
        f"per-input repeated-token share of top pairs, best head (layer {l} head {h})",
        Region.above(REPETITION_SHARE), _moment_interval(best, std[l][h], n),
        f"{n_heads} of {len(flat)} heads above {REPETITION_SHARE:g}; chance {chance:.3f} "
        f"(repeated-token pairs among all pairs)")


def _noise_claim(r: dict, claim) -> Claim:
    chance = r["noise_chance"]
    return claim(
        "high similarities include noise: unrelated token pairs, fewer than by chance",
        "signal and noise", "high similarity between unrelated tokens",
        "share of top pairs with no shared sentence or token, all heads",
        Region(NOISE_FLOOR, chance, f"within ({NOISE_FLOOR:g}, chance {chance:.3f})"),
        mean_interval(_heads(r, "noise_share", range(_n(r)))),
        "noise = neither in one sentence nor the same token (tokengeo.probes.similarity.stats)")


def _long_range_claim(r: dict, g: dict[str, list[int]], claim) -> Claim:
    chance, far = r["long_range_chance"], r["long_range"]
    return claim(
        "final layers keep weak long-range relations",
        "layer-wise distance distributions", "long range dominates early, weak late",
        f"final-layer top pairs at distance >= {far} / chance", Region(
            LONG_RANGE_FLOOR, 1.0, f"within ({LONG_RANGE_FLOOR:g}, 1)"),
        mean_interval([x / chance for x in _heads(r, "top_long_range_share", g["final"])]),
        f"chance {chance:.3f} (share of pairs at distance >= {far}); early layers "
        f"{mean_interval(_heads(r, 'top_long_range_share', g['early'])).mean / chance:.2f}")


def _moment_interval(mean: float, std: float | None, n: int) -> Interval:
    """``m ± t_{0.975, n−1} s / √n`` from a mean and std over ``n`` inputs."""
    if std is None or n < 2:
        return Interval(mean, mean, mean, 1, 0.0)
    half = t975(n - 1) * std / n ** 0.5
    return Interval(mean, mean - half, mean + half, n, std)


def _n(r: dict) -> int:
    return len(r["short_range_mass"])


def summarise(settings: dict, results: dict[str, CellResult], fig_dir: Path) -> SuiteOutput:
    res = results["analysis"]
    if res.value is None:
        stub = Claim(NAME, "head-output similarity analysis", SRC, "—", "—", Region.above(0),
                     not_run=res.not_run)
        return SuiteOutput(NAME, TITLE, PAPER, [stub])
    r = res.value["result"]
    g = _groups(_n(r))
    out = SuiteOutput(NAME, TITLE, PAPER, _claims(r, g),
                      figures=[Path(f) for f in res.value["figures"]])
    keys = ["short_range_mass", "within_sentence_share", "sentence_contrast",
            "repeated_token_share", "noise_share", "top_long_range_share", "snr",
            "separator_attention", "input_convergence"]
    rows = []
    for row in r["layer_summary"]:
        rows.append([str(row["layer"])] + [
            "—" if row.get(k) is None else f"{row[k]:.3f}" for k in keys]
            + [f"{row['input_distinct_share']:.2f} / {row['input_distinct_chance']:.2f}",
               f"{row['distinct_dominant']:.2f}"])
    out.tables.append(("per layer, mean over heads", ["layer", *keys,
                       "distinct per input / chance", "distinct over corpus"], rows))
    out.notes.append(
        f"{r['n_samples']} windows of {r['seq_len']} tokens ({settings['analysis']}). Chance "
        f"levels: within-sentence {r['within_sentence_chance']:.3f}, short-range "
        f"{r['short_range_chance']:.3f}, repeated token {r['repeated_token_chance']:.3f}, "
        f"noise {r['noise_chance']:.3f}. 'Noise' = top pairs with no sentence or repetition "
        "relation (the paper's unrelated high similarities); SNR = d' of related vs "
        "unrelated pairs (see tokengeo.probes.similarity.stats). Long range: distance >= "
        f"{r['long_range']} (chance {r['long_range_chance']:.3f}). Layer mapping: "
        f"{LAYER_MAPPING}.")
    out.notes.extend(figure_notes(results))
    return out
