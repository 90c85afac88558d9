"""The smoothing sign of trained heads, as claims, a table and figures.

Zhang & Papyan (arXiv 2602.09297) read a Laplacian head, ``X + (I − P) X W_V W_O``, as heat
diffusion on the attention graph: it smooths the residual stream only if the learned
value–output map is negative in the directions the tokens spread. Each training cell of a
Laplacian suite stores :func:`tokengeo.probes.smoothing.head_smoothing` rows of its trained
model on held-out inputs (``"smoothing"``); here they become, per block, the mean over a
model's heads of one kind of

* ``variance_derivative`` — d/dε Var_w(X + ε O_h) at 0 over Var_w(X) (< 0: the head smooths),
* ``rayleigh`` — the mean Rayleigh quotient of sym(diag(γ) W_V W_O) over centred tokens,
* ``variance_step`` — the head's real update (ε = 1): (Var_w(X + O_h) − Var_w(X)) / Var_w(X),
* ``dirichlet_step`` — (E_P(X + O_h) − E_P(X)) / E_P(X), the Dirichlet energy on the head's
  own softmax graph P (what a heat-diffusion step lowers; :mod:`tokengeo.probes.diffusion`),

and, per attention sublayer (``"sublayer_smoothing"``), the within-sequence share of the
token variance before and after it (:func:`sublayer_table`),

and the claim "trained Laplacian heads smooth the residual stream" (a family over blocks,
rule "all", seeds the units) beside the same measurement of attention heads as the control.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tokengeo.experiments.claims import Claim, family
from tokengeo.experiments.stats import Region, mean_interval
from tokengeo.experiments.sweep import SweepResults

FIELD = "smoothing"  # the cells' value field (a cached cell without it is recomputed)
SUBLAYERS = "sublayer_smoothing"  # per attention sublayer: share before / after it
DERIVATIVE, RAYLEIGH = "variance_derivative", "rayleigh"
STEP, DIRICHLET = "variance_step", "dirichlet_step"
# the per-head measures a table shows, as its columns name them
MEASURES = {DERIVATIVE: "dVar/Var", RAYLEIGH: "Rayleigh", STEP: "ΔVar/Var (ε=1)",
            DIRICHLET: "ΔE_P/E_P"}
LAPLACIAN, ATTENTION = "laplacian", "attention"
SOURCE = ("Zhang & Papyan 2026, title, abstract and Sec. 3 (the Laplacian head as heat "
          "diffusion on the attention graph)")
PAPER = ("Laplacian heads smooth token representations (X + (I − P) X W_V W_O is a diffusion "
         "step when W_V W_O is negative on the tokens' spread)")
DEFAULT_EXAMPLES = 64  # held-out examples of one forward pass per cell


def rows_of(result) -> list[dict]:
    """One cell's smoothing rows: a :class:`~tokengeo.experiments.sweep.TrainResult`'s
    ``smoothing``, or ``"smoothing"`` of a cell read as a dict (``laplacian-mechanism``)."""
    rows = result.get(FIELD) if isinstance(result, dict) else result.smoothing
    return rows or []


def head_mean(kind: str, layer: int, key: str = DERIVATIVE) -> Callable[[object], float]:
    """Getter: the mean of ``key`` over the heads of ``kind`` in block ``layer`` of one
    cell's model (its :func:`rows_of`)."""
    def get(result) -> float:
        rows = [r[key] for r in rows_of(result) if r["layer"] == layer and r["kind"] == kind]
        if not rows:
            raise ValueError(f"block {layer} has no {kind} head")
        return sum(rows) / len(rows)
    return get


def n_layers(res: SweepResults, label: str) -> int:
    """Blocks measured in the cells of ``label`` (from the first seed's rows)."""
    return 1 + max(r["layer"] for r in rows_of(res.typed(label, res.seeds[0])))


def missing_rows(res: SweepResults, label: str) -> str | None:
    """Why ``label``'s cells give no smoothing rows (a cell not run, or run without them)."""
    missing = res.not_run()
    if missing:
        return missing
    for seed in res.seeds:
        if not rows_of(res.typed(label, seed)):
            return f"cell {res.sweep.key(label, seed)} has no smoothing rows"
    return None


def _named(head_kind: str) -> str:
    """How a claim names heads of ``head_kind``: "Laplacian" is a name, the others are not."""
    return "Laplacian" if head_kind == LAPLACIAN else head_kind


def layer_family(suite: str, res: SweepResults, label: str, head_kind: str, depth: int,
                 text: str, heads: str = "", **fields) -> Claim:
    """A family over blocks, rule "all": per block, the mean over seeds of the per-seed
    mean ``variance_derivative`` of the ``head_kind`` heads of ``label``'s models is
    below 0. ``heads``: how the members name those heads (default: ``head_kind``)."""
    members = []
    missing = missing_rows(res, label)
    for layer in range(depth):
        get = head_mean(head_kind, layer)
        who = heads or _named(head_kind)
        claim = Claim(suite, f"{label}, block {layer + 1}: {who} heads smooth the residual "
                      "stream", SOURCE, PAPER,
                      f"mean over {head_kind} heads of d/dε Var_w(X + ε O_h) / Var_w(X) at "
                      f"block {layer + 1}'s input, held-out inputs, mean over seeds",
                      Region.below(0.0), label=f"block {layer + 1}", **fields)
        if missing:
            claim.not_run = missing
        else:
            claim.measured = mean_interval(res.values(label, get))
            ray = mean_interval(res.values(label, head_mean(head_kind, layer, RAYLEIGH)))
            claim.detail = f"Rayleigh quotient of sym(W_V W_O): {ray.fmt(3)}"
        members.append(claim)
    return family(suite, text, members, rule="all")


def smoothing_claims(suite: str, res: SweepResults, depth: int, treated: str, control: str,
                     **fields) -> list[Claim]:
    """"Trained Laplacian heads smooth the residual stream" at ``treated`` (every block), and
    the control: attention heads at ``control`` measured the same way (kind ``new``: the
    paper states nothing about them; it shows whether the sign is the Laplacian's own)."""
    return [
        layer_family(suite, res, treated, LAPLACIAN, depth,
                     f"{treated}: trained Laplacian heads smooth the residual stream (the "
                     "within-sequence variance falls along their output), every block",
                     **fields),
        layer_family(suite, res, control, ATTENTION, depth,
                     f"control, {control}: attention heads smooth the residual stream, every "
                     "block", kind="new", proxy=None),
    ]


def smoothing_table(res: SweepResults, labels: list[str], depth: int) -> tuple:
    """Rows: block; per label and kind present, the mean ± std over seeds of the per-model
    mean variance derivative and Rayleigh quotient."""
    kinds = {lab: sorted({r["kind"] for r in rows_of(res.typed(lab, res.seeds[0]))})
             for lab in labels}
    header = ["block"] + [f"{lab} {kind} {what}" for lab in labels for kind in kinds[lab]
                          for what in MEASURES.values()]
    rows = []
    for layer in range(depth):
        row = [f"block {layer + 1}"]
        for lab in labels:
            for kind in kinds[lab]:
                for key in MEASURES:
                    iv = mean_interval(res.values(lab, head_mean(kind, layer, key)))
                    row.append(f"{iv.mean:.3g} ± {iv.std:.2g}")
        rows.append(row)
    return ("smoothing sign per block: d/dε Var_w(X + ε O_h) / Var_w(X) (< 0: smooths), the "
            "Rayleigh quotient of sym(W_V W_O), the real update's (Var_w(X + O_h) − Var_w(X)) "
            "/ Var_w(X) and the Dirichlet energy's on the head's own pattern "
            "(E_P(X + O_h) − E_P(X)) / E_P(X), mean over a model's heads of each kind "
            "(mean ± std over seeds)",
            header, rows)


def sublayer_value(layer: int, key: str) -> Callable[[object], float]:
    """Getter: ``key`` ("share_before" / "share_after") of attention sublayer ``layer`` of
    one cell (a :class:`~tokengeo.experiments.sweep.TrainResult` or a cell's dict)."""
    def get(result) -> float:
        rows = result.get(SUBLAYERS) if isinstance(result, dict) else result.sublayers
        row = next((r for r in rows or () if r["layer"] == layer), None)
        if row is None:
            raise ValueError(f"the cell has no {SUBLAYERS} row for block {layer}")
        return row[key]
    return get


def sublayer_table(res: SweepResults, labels: list[str], depth: int) -> tuple:
    """Rows: block; per label, the within-sequence share of the token variance before and
    after the block's attention sublayer and their difference, mean ± std over seeds (a
    falling share: the sublayer, all its heads together, smooths)."""
    header = ["block"] + [f"{lab} {what}" for lab in labels
                          for what in ("share before", "share after", "after − before")]
    rows = []
    for layer in range(depth):
        row = [f"block {layer + 1}"]
        for lab in labels:
            before = res.values(lab, sublayer_value(layer, "share_before"))
            after = res.values(lab, sublayer_value(layer, "share_after"))
            for values in (before, after, [a - b for a, b in zip(after, before, strict=True)]):
                iv = mean_interval(values)
                row.append(f"{iv.mean:.3g} ± {iv.std:.2g}")
        rows.append(row)
    return ("within-sequence share of the token variance before and after each attention "
            "sublayer (block input; stream after the attention's residual add), held-out "
            "inputs (mean ± std over seeds)", header, rows)


KIND_STYLE = {LAPLACIAN: ("C3", "o"), ATTENTION: ("C0", "s")}  # others: ("C2", "^")


def smoothing_plot(points: dict[str, list[tuple[float, float]]], title: str):
    """Figure: one point per head, x the Rayleigh quotient, y the variance derivative,
    colour and marker by head kind; zero lines split smoothing from sharpening."""
    from tokengeo.plotting import MIN_FONT_PT, new_figure

    fig, axes = new_figure(5.0, 4.0)
    ax = axes[0, 0]
    for kind, xy in points.items():
        color, marker = KIND_STYLE.get(kind, ("C2", "^"))
        ax.scatter([p[0] for p in xy], [p[1] for p in xy], c=color, marker=marker, s=18,
                   alpha=0.7, label=f"{kind} heads ({len(xy)})")
    ax.axhline(0.0, color="0.5", lw=0.8)
    ax.axvline(0.0, color="0.5", lw=0.8)
    ax.set_xlabel("(b) Rayleigh quotient of sym(W_V W_O) over centred tokens")
    ax.set_ylabel("(a) d/dε Var_w(X + ε O_h) / Var_w(X)  (< 0: smooths)")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=MIN_FONT_PT, title="one point per head, seed and k",
              title_fontsize=MIN_FONT_PT)
    return fig


def layer_points(res: SweepResults, labels: list[str], layer: int) -> dict:
    """{kind: [(rayleigh, variance_derivative)]} of block ``layer``'s heads, every label and
    seed."""
    points: dict[str, list[tuple[float, float]]] = {}
    for lab in labels:
        for seed in res.seeds:
            for r in rows_of(res.typed(lab, seed)):
                if r["layer"] == layer:
                    points.setdefault(r["kind"], []).append((r[RAYLEIGH], r[DERIVATIVE]))
    return points


def smoothing_figure(path: Path, res: SweepResults, labels: list[str], layer: int,
                     model: str) -> Path:
    """Write block ``layer``'s figure (:func:`smoothing_plot`) as PNG at ``path``."""
    from tokengeo.plotting import save_figure

    title = f"block {layer + 1} of {model}: smoothing sign per head, held-out inputs"
    return save_figure(smoothing_plot(layer_points(res, labels, layer), title), path)
