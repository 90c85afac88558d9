"""Clustering and stationary points: does time dependence prevent clustering, and do the
tokens of the integrable regime reach a stationary point of the limiting energy?

Massucco et al., arXiv 2605.18870, Sec. 5–6: token clustering is not universal but depends
on the stability of the parameter dynamics; in the integrable regime (e.g. OU without
noise) every element of the ω-limit set is a stationary point of the limiting energy. The
control of "time dependence prevents clustering" is, per drift, the static flow at that
drift's own time-averaged weights D̄ over [T/2, T] (runs.static_mean_cell): the claim is that
the time-dependent flow clusters less than its own static average, not than another
weight matrix. A static attractive flow (sanity) shows the simulator clusters at all.
"""

from __future__ import annotations

from tokengeo.experiments.cells import CellResult
from tokengeo.experiments.claims import Claim, family
from tokengeo.experiments.stats import Interval, Region, mean_interval, worst_run
from tokengeo.experiments.suites.flows.common import (
    CLUSTERED_COSINE,
    CONTROL_LABEL,
    COSINE_MARGIN,
    DRIFT_LABEL,
    DRIFTS,
    SOURCE,
    STATIONARY_MARGIN,
    STATIONARY_RELATIVE,
    THEORY_SOURCE,
    finished,
    mean,
    per_heads,
    per_path,
)


def clusters_words(s: dict) -> str:
    """t → clusters (mean over paths) at the sampled records, and the weights' spectrum."""
    paths = s["clusters_t"]
    steps = ", ".join(f"{t:g}: {sum(p[k] for p in paths) / len(paths):.1f}"
                      for k, t in enumerate(s["t_sampled"]))
    lo, hi = s["mean_weights_eig"]
    return (f"clusters (cos ≥ 0.99) over t: {steps}; mean ⟨xi,xj⟩ at T "
            f"{mean(s['mean_cosine_T']):.3f}; eigenvalues of the time-averaged D̄_h over "
            f"[T/2, T] in [{lo:.2f}, {hi:.2f}] (negative definite: attractive in this sign, "
            "positive definite: repulsive)")


def attractive_claim(settings: dict, results: dict[str, CellResult]) -> Claim:
    """Sanity: the static attractive control clusters (the simulator can cluster)."""
    heads = settings.get("control_heads", settings["heads"])
    H_c = max(heads)
    control = Claim(
        "flows", "static attractive control (frozen weights, positive-definite value map "
        "−D_h): the tokens cluster", SOURCE, "clustering for static weights (the framing)",
        f"mean ⟨xi,xj⟩ at T, H={H_c}", Region.above(CLUSTERED_COSINE, COSINE_MARGIN),
        kind="sanity")
    s, missing = finished(results, f"attractive-H{H_c}")
    if s is None:
        control.not_run = missing
    else:
        control.measured = per_path(s["mean_cosine_T"])
        control.detail = ("mean ⟨xi,xj⟩ at T per H: "
                          + per_heads(results, "attractive", heads, "mean_cosine_T")
                          + f"; at H={H_c}: " + clusters_words(s))
    return control


def prevents_clustering_claim(settings: dict, results: dict[str, CellResult]) -> Claim:
    """Per drift at the largest H: mean ⟨xi,xj⟩ at T of the time-dependent flow minus that
    of the static flow at its own D̄ (paired by path); some drift must cluster clearly less
    than its static average (rule ``any``: clustering is not universal). The row's
    precondition is that every static flow clusters (its worst path's mean ⟨xi,xj⟩ at T
    above ``CLUSTERED_COSINE``): where one does not, prevention cannot show and the row is
    "not testable here"."""
    H = max(settings["heads"])
    text = ("time-dependent weights prevent the clustering of their own time-averaged "
            "static flow")
    members, statics, missing = [], [], None
    for drift in DRIFTS:
        s, why = finished(results, f"{drift}-H{H}")
        r = results.get(f"static-{drift}-H{H}")
        if s is None or r is None or r.value is None:
            missing = missing or why or ("cell missing" if r is None else r.not_run)
            continue
        c = r.value["summary"]
        statics += c["mean_cosine_T"]
        lo, hi = c["mean_weights_eig"]
        diff = [a - b for a, b in zip(s["mean_cosine_T"], c["mean_cosine_T"], strict=True)]
        m = Claim("flows", f"{DRIFT_LABEL[drift]}: fewer clustered than its static D̄ flow",
                  SOURCE, "qualitative", f"mean ⟨xi,xj⟩ at T, time-dependent − static at D̄, "
                  f"H={H}", Region.below(0.0, COSINE_MARGIN), label=drift,
                  measured=(Interval.exact_value(diff[0], "deterministic") if len(diff) == 1
                            else mean_interval(diff)))
        m.detail = (f"static at D̄ (eigenvalues in [{lo:.2f}, {hi:.2f}]): mean ⟨xi,xj⟩ at T "
                    f"{mean(c['mean_cosine_T']):.3f}, clusters {mean(c['clusters_T']):.1f}; "
                    f"time-dependent: {clusters_words(s)}")
        members.append(m)
    if missing or not members:
        return Claim("flows", text, SOURCE, "qualitative", "mean ⟨xi,xj⟩ difference",
                     Region.below(0.0, COSINE_MARGIN), kind="paper",
                     catalogue="pde.clustering-not-universal", not_run=missing or "no run")
    premise = Claim("flows", "every drift's static flow at its own time-averaged weights "
                    "clusters", SOURCE, "the control's premise", f"mean ⟨xi,xj⟩ at T, static "
                    f"at D̄, H={H}, worst path of every drift",
                    Region.above(CLUSTERED_COSINE, COSINE_MARGIN), kind="sanity",
                    measured=worst_run(statics, worst_is_high=False))
    row = family("flows", text, members, rule="any", kind="paper",
                 catalogue="pde.clustering-not-universal", precondition=premise)
    row.detail = "; ".join(f"{m.label}: {m.detail.split('; time-dependent')[0]}"
                           for m in members)
    return row


def _stationarity_words(s: dict) -> str:
    st, rnd = s["stationarity_T"], s["stationarity_random"]
    return (f"tangential share of grad E(x_T; D̄) {mean(st['relative']):.3g} (uniform random "
            f"tokens: {mean(rnd['relative']):.3g}); of the flow's own field under D̄ "
            f"{mean(st['field_relative']):.3g} ({mean(rnd['field_relative']):.3g})")


def stationarity_claim(settings: dict, results: dict[str, CellResult]) -> Claim:
    """At T, how far the tokens are from a stationary point of E under the time-averaged
    weights D̄ (flows.diagnostics.energy_stationarity): one claim, read on OU without noise
    (integrable) and on the paper's noisy OU (its time average in place of a limit); the
    oscillating presets and the attractive control in the detail, for comparison."""
    H_c, H = max(settings.get("control_heads", settings["heads"])), max(settings["heads"])
    others = []
    for key, label in ((f"inphase-H{H}", DRIFT_LABEL["inphase"]),
                       (f"oscillating-H{H}", DRIFT_LABEL["oscillating"]),
                       (f"attractive-H{H_c}", CONTROL_LABEL["attractive"])):
        s, _ = finished(results, key)
        if s is not None:
            others.append(f"{label}, {key.rsplit('-', 1)[1]}: {_stationarity_words(s)}")
    text = ("integrable regime: at T the tokens are near a stationary point of the limiting "
            "energy E(x; D̄)")
    members, missing = [], None
    for key, label, heads in ((f"ou-quiet-H{H_c}", "ou-quiet",
                               settings.get("control_heads", settings["heads"])),
                              (f"ou-H{H}", "ou", settings["heads"])):
        s, why = finished(results, key)
        if s is None:
            missing = missing or why
            continue
        who = CONTROL_LABEL["ou-quiet"] if label == "ou-quiet" else \
            "OU weights (σ² = 2), D̄ over [T/2, T]"
        m = Claim("flows", f"{who}: near a stationary point of E(x; D̄)", THEORY_SOURCE,
                  "the ω-limit set consists of stationary points (theorem)",
                  f"|P grad E| / |grad E| at T under D̄, H={key.rsplit('H', 1)[1]}",
                  Region.below(STATIONARY_RELATIVE, STATIONARY_MARGIN), label=label,
                  measured=per_path(s["stationarity_T"]["relative"]))
        m.detail = ("per H: " + per_heads(results, key.rsplit("-H", 1)[0], heads,
                                          "stationarity_T")
                    + f"; {_stationarity_words(s)}")
        members.append(m)
    if missing or not members:
        return Claim("flows", text, THEORY_SOURCE, "theorem", "tangential share",
                     Region.below(STATIONARY_RELATIVE, STATIONARY_MARGIN), kind="paper",
                     catalogue="pde.integrable-stationary", not_run=missing or "no run")
    row = family("flows", text, members, rule="all", kind="paper",
                 catalogue="pde.integrable-stationary",
                 proxy="the noisy OU reading takes the time average over [T/2, T] in place "
                       "of the limit (its noise never stops)")
    row.detail = "against: " + "; ".join(others) if others else ""
    return row
