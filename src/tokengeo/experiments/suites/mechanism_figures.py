"""Tables and figures of the ``laplacian-mechanism`` suite (its claims are in
:mod:`tokengeo.experiments.suites.laplacian_mechanism`): learned (a, b) per layer and
head, within-sequence share per depth for every variant, and the path against t."""

from __future__ import annotations

from pathlib import Path

from tokengeo.experiments.stats import mean_interval
from tokengeo.experiments.suites import mechanism_readings as mech
from tokengeo.experiments.sweep import SweepResults

REFERENCE = {"attention (0, 1)": (0.0, 1.0), "Laplacian (1, −1)": (1.0, -1.0),
             "V + P V (1, 1)": (1.0, 1.0)}


def _fmt(values: list[float], digits: int = 3) -> str:
    iv = mean_interval(values)
    return f"{iv.mean:.{digits}g} ± {iv.std:.2g}"


def variant_table(res: SweepResults, last: int) -> tuple:
    """Rows: variant; columns: its (a, b), test accuracy and the within-sequence share at
    every depth (mean ± std over seeds)."""
    header = ["variant", "(a, b)", "test acc",
              *(f"within d{d}" for d in range(last + 1))]
    rows = []
    for label in res.labels:
        first = res.typed(label, res.seeds[0])
        ab = ("learned" if label == mech.LEARNED else
              "({:g}, {:g})".format(*first["coefficients"][0][-1]))
        rows.append([label, ab, _fmt(res.values(label, mech.accuracy), 4),
                     *(_fmt(res.values(label, mech.share("within_sequence_share", d)))
                       for d in range(last + 1))])
    return ("by variant (mean ± std over seeds); within dN: within-sequence share of the "
            "token variance at depth N (0: embedding, N: after block N)", header, rows)


STEP_MEASURES = {"variance_derivative": "smoothing sign of the chosen heads per block: mean "
                 "d/dε Var_w(X + ε O_h) / Var_w(X) over them",
                 "variance_step": "real update (ε = 1) of the chosen heads per block: mean "
                 "(Var_w(X + O_h) − Var_w(X)) / Var_w(X) over them",
                 "dirichlet_step": "Dirichlet energy on each chosen head's own pattern P per "
                 "block: mean (E_P(X + O_h) − E_P(X)) / E_P(X) over them"}


def smoothing_table(res: SweepResults, key: str = "variance_derivative") -> tuple:
    """Rows: variant; per block, the mean over its mixed (chosen) heads of ``key``: the
    variance derivative d/dε Var_w(X + ε O_h) / Var_w(X), the real update's relative change
    ``variance_step`` (ε = 1) or the Dirichlet energy's on the head's own pattern
    ``dirichlet_step`` (each < 0: they smooth), mean ± std over seeds
    (:mod:`tokengeo.probes.smoothing`)."""
    first = res.typed(res.labels[0], res.seeds[0]).get("smoothing") or []
    depth = 1 + max((r["layer"] for r in first), default=-1)

    def mean_of(layer: int):
        def get(value: dict) -> float:
            rows = [r[key] for r in value["smoothing"]
                    if r["layer"] == layer and r["kind"] != "attention"]
            return sum(rows) / len(rows)
        return get

    rows = [[label, *(_fmt(res.values(label, mean_of(layer))) for layer in range(depth))]
            for label in res.labels]
    return (f"{STEP_MEASURES[key]} on held-out test images (< 0: they smooth; mean ± std over "
            "seeds)", ["variant", *(f"block {b + 1}" for b in range(depth))], rows)


def learned_table(res: SweepResults, k: int) -> tuple:
    """Rows: (layer, head) of the learned run's chosen heads; a, b and ψ over seeds."""
    seeds = [res.typed(mech.LEARNED, s)["coefficients"] for s in res.seeds]
    n_heads = len(seeds[0][0])
    rows = []
    for layer in range(len(seeds[0])):
        for head in range(n_heads - k, n_heads):
            ab = [c[layer][head] for c in seeds]
            rows.append([str(layer), str(head), _fmt([a for a, _ in ab]),
                         _fmt([b for _, b in ab]),
                         _fmt([mech.line_angle(a, b) for a, b in ab])])
    return ("learned (a, b) of the mixed heads, started at attention (0, 1) (mean ± std over "
            "seeds); ψ = atan2(b, a) mod 180°: attention 90°, Laplacian 135°, V + P V 45°",
            ["layer", "head", "a", "b", "ψ (°)"], rows)


def learned_figure(path: Path, res: SweepResults, k: int, model: str) -> Path:
    """The learned (a, b) of every chosen head and seed, coloured by layer, with the
    reference heads and their lines through the origin (the scales one function allows)."""
    from tokengeo.plotting import MIN_FONT_PT, curve_colors, new_figure, save_figure

    fig, axes = new_figure(5.5, 4.6)
    ax = axes[0, 0]
    runs = [res.typed(mech.LEARNED, s)["coefficients"] for s in res.seeds]
    colors = curve_colors(len(runs[0]))
    for layer, color in enumerate(colors):
        pts = [ab for c in runs for ab in c[layer][len(c[layer]) - k:]]
        ax.scatter([a for a, _ in pts], [b for _, b in pts], s=14, color=color,
                   label=f"layer {layer}")
    reach = max(1.5, *(abs(x) for c in runs for row in c for ab in row for x in ab))
    for name, (a, b) in REFERENCE.items():
        ax.plot([-reach * a, reach * a], [-reach * b, reach * b], ls=":", lw=0.8, color="grey")
        ax.scatter([a], [b], marker="x", s=40, color="black")
        ax.annotate(name, (a, b), fontsize=MIN_FONT_PT, xytext=(4, 4),
                    textcoords="offset points")
    ax.set_xlabel("a (coefficient of V)")
    ax.set_ylabel("b (coefficient of P V)")
    ax.set_title(f"learned (a, b) from attention, {model}; {len(runs)} seeds", fontsize=10)
    ax.legend(fontsize=MIN_FONT_PT, title="dotted: lines of one function",
              title_fontsize=MIN_FONT_PT)
    return save_figure(fig, path)


def _errorbar(ax, xs, per_x: list[list[float]], **kw) -> None:
    ivs = [mean_interval(v) for v in per_x]
    ax.errorbar(xs, [iv.mean for iv in ivs], yerr=[iv.std for iv in ivs], marker="o",
                capsize=3, **kw)


def depth_figure(path: Path, res: SweepResults, model: str) -> Path:
    """Within-sequence share against depth, one line per variant (± std over seeds)."""
    from tokengeo.plotting import MIN_FONT_PT, integer_ticks, new_figure, save_figure

    fig, axes = new_figure(5.5, 3.8)
    ax = axes[0, 0]
    n = len(res.typed(res.labels[0], res.seeds[0])["layers"]["within_sequence_share"])
    for label in res.labels:
        _errorbar(ax, list(range(n)), [res.values(label, mech.share("within_sequence_share",
                                                                     d)) for d in range(n)],
                  label=label)
    integer_ticks(ax.xaxis)
    ax.set_xlabel("depth (0: embedding, l: after block l)")
    ax.set_ylabel("within-sequence share of variance")
    ax.set_title(f"token smoothing by depth, {model}", fontsize=10)
    ax.legend(fontsize=MIN_FONT_PT, title=f"bars ± std over {len(res.seeds)} seeds",
              title_fontsize=MIN_FONT_PT)
    return save_figure(fig, path)


def path_figure(path: Path, res: SweepResults, ts: list[float], model: str) -> Path:
    """Last-layer within-sequence share and test accuracy against t on the path
    (t, 1 − 2t); the control (1, 1) and the learned run as dashed levels."""
    from tokengeo.plotting import MIN_FONT_PT, new_figure, save_figure

    fig, axes = new_figure(9.0, 3.6, ncols=2)
    n = len(res.typed(res.labels[0], res.seeds[0])["layers"]["within_sequence_share"])
    panels = [(mech.share("within_sequence_share", n - 1), "within-sequence share, last layer"),
              (mech.accuracy, "test accuracy")]
    for ax, (get, ylabel) in zip(axes[0], panels, strict=True):
        _errorbar(ax, ts, [res.values(mech.path_label(t), get) for t in ts], label="(t, 1 − 2t)")
        for label, style in ((mech.CONTROL, "--"), (mech.LEARNED, ":")):
            level = mean_interval(res.values(label, get)).mean
            ax.axhline(level, ls=style, color="grey", label=f"{label} (mean)")
        ax.set_xlabel("t: (a, b) = (t, 1 − 2t)")
        ax.set_ylabel(ylabel)
        ax.legend(fontsize=MIN_FONT_PT)
    fig.suptitle(f"attention (t = 0) to Laplacian (t = 1), {model}; ± std over "
                 f"{len(res.seeds)} seeds", fontsize=10)
    return save_figure(fig, path)
