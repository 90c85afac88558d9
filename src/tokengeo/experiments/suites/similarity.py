"""Suite ``similarity``: Halevi et al. (arXiv 2512.21956) on all-MiniLM-L6-v2.

One cell: the streaming head-output similarity analysis of :mod:`tokengeo.probes` over
``samples`` windows of ``seq_len`` tokens. Layers are grouped into thirds (early, middle,
final); each claim compares per-head statistics of a group with another group or with the
chance level the analysis computes from the corpus (sentence lengths, token frequencies).
"""

from __future__ import annotations

from pathlib import Path

from tokengeo.experiments.cells import Cell, CellResult, draw_figures, figure_notes
from tokengeo.experiments.claims import Claim
from tokengeo.experiments.report import SuiteOutput
from tokengeo.experiments.stats import Region, mean_interval, welch_difference

NAME = "similarity"
TITLE = "Head-output similarity: what each head's output vectors agree on"
PAPER = ("Halevi et al., \"Self-attention vector output similarities reveal how machines pay "
         "attention\", arXiv 2512.21956 (BERT-12 there; all-MiniLM-L6-v2 here)")
SRC = "Halevi et al. 2025"


def similarity_cell(config: dict, figure_dir: str) -> dict:
    from tokengeo.probes.similarity.plots import save_figures
    from tokengeo.probes.similarity.run import SimilarityConfig, run_similarity

    result = run_similarity(SimilarityConfig(**config))
    return draw_figures({"result": result.to_dict()}, lambda: save_figures(result, figure_dir))


def cells(settings: dict) -> list[Cell]:
    return [Cell(NAME, "analysis", similarity_cell,
                 {"config": dict(settings["analysis"]), "figure_dir": settings["_figure_dir"]},
                 label=f"{settings['analysis']}",
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
        claim("heads specialise: each converges on a distinct token", "head specialisation",
              "a distinct dominant token per head",
              "distinct dominant tokens / heads, per layer", Region.above(0.5),
              mean_interval(r["distinct_dominant_per_layer"]),
              f"overall {r['distinct_dominant_overall']:.2f}"),
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
            "repeated_token_share", "noise_share", "snr", "separator_attention"]
    rows = []
    for row in r["layer_summary"]:
        rows.append([str(row["layer"])] + [
            "—" if row.get(k) is None else f"{row[k]:.3f}" for k in keys]
            + [f"{row['distinct_dominant']:.2f}"])
    out.tables.append(("per layer, mean over heads", ["layer", *keys, "distinct dominant"],
                       rows))
    out.notes.append(
        f"{r['n_samples']} windows of {r['seq_len']} tokens ({settings['analysis']}). Chance "
        f"levels: within-sentence {r['within_sentence_chance']:.3f}, short-range "
        f"{r['short_range_chance']:.3f}, repeated token {r['repeated_token_chance']:.3f}, "
        f"noise {r['noise_chance']:.3f}. 'Noise' = top pairs with no sentence or repetition "
        "relation (the paper's unrelated high similarities); SNR = d' of related vs "
        "unrelated pairs (see tokengeo.probes.similarity.stats).")
    out.notes.extend(figure_notes(results))
    return out
