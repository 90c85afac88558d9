"""Is a Laplacian sweep's model at its plateau, and does the k = H − k = 0 gap depend on the
budget? Two budgets from one run per cell: a constant-rate tail.

A cell whose ``train`` table sets ``decay_steps`` < ``steps`` decays its rate by the cosine
to ``min_lr`` at ``decay_steps`` (budget 1, the usual run) and then trains at ``min_lr`` up to
``steps`` (budget 2); its learning curve (``curve_every``, dividing both) records the metric
on the same held-out examples at both. Per k, paired by seed:

* the change from budget 1 to budget 2, Δ = m(steps) − m(decay_steps): the model is *at its
  plateau* (within ``tolerance`` of what more training at the final rate gives) when the
  95 % interval of the mean Δ lies inside (−tolerance, +tolerance); *not at its plateau* when
  the interval lies wholly outside; *undecided* otherwise;
* the gap k = H − k = 0 at each budget (so "Laplacian heads lower accuracy" can be told from
  "Laplacian heads converge more slowly": the gap should shrink with the budget in the
  latter case).

The accuracy claims read the cells' final numbers, i.e. the largest budget. Zhang & Papyan
(arXiv 2602.09297) compare trained models; a comparison before the plateau compares stages
of training, not architectures.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tokengeo.errors import ConfigError
from tokengeo.experiments.stats import Interval, mean_interval, paired_difference
from tokengeo.experiments.sweep import SweepResults, k_label

TOLERANCE = 0.003  # 0.3 point of accuracy: "within 0.3 pt of its asymptote"


def budgets(settings: dict) -> tuple[int, int] | None:
    """(decay_steps, steps) of a sweep with a constant-rate tail, else None."""
    train = settings["train"]
    decay = train.get("decay_steps")
    return (int(decay), int(train["steps"])) if decay and decay < train["steps"] else None


def check(where: str, settings: dict) -> None:
    """A tail needs a learning curve with a point at both budgets."""
    pair = budgets(settings)
    if pair is None:
        return
    every = settings.get("curve_every", 0)
    if not every or any(b % every for b in pair):
        raise ConfigError(f"{where}: train.decay_steps = {pair[0]} (a constant-rate tail to "
                          f"steps = {pair[1]}) needs curve_every dividing both, so the "
                          f"learning curve measures both budgets; curve_every is {every or 0}")


def status(change: Interval, tolerance: float = TOLERANCE) -> str:
    """"at plateau" / "not at plateau" / "undecided" from the interval of the mean change."""
    if -tolerance < change.lo and change.hi < tolerance:
        return "at plateau"
    if change.lo >= tolerance or change.hi <= -tolerance:
        return "not at plateau"
    return "undecided"


@dataclass(frozen=True)
class Plateau:
    """One sweep's budget comparison of metric ``key``: per k label, the metric at both
    budgets and the change; the gap k = H − k = 0 at both budgets."""

    budgets: tuple[int, int]
    at: dict[str, tuple[Interval, Interval]]  # label -> (budget 1, budget 2)
    change: dict[str, Interval]  # label -> mean per-seed change budget 1 -> 2
    status: dict[str, str]
    gap: tuple[Interval, Interval]  # k = H − k = 0 at budget 1 and at budget 2


def plateau(res: SweepResults, settings: dict, heads: int, where: str = "metrics",
            key: str = "accuracy", tolerance: float = TOLERANCE) -> Plateau | None:
    """:class:`Plateau` of ``key`` from the cells' curves; None without a tail or when a cell
    did not run."""
    pair = budgets(settings)
    if pair is None or res.not_run():
        return None

    first, last = (curve_value(b, where, key) for b in pair)
    at, change, state = {}, {}, {}
    for k in sorted(settings["ks"]):
        lab = k_label(k)
        a, b = res.values(lab, first), res.values(lab, last)
        at[lab] = (mean_interval(a), mean_interval(b))
        change[lab] = paired_difference(b, a)
        state[lab] = status(change[lab], tolerance)
    top, zero = k_label(heads), k_label(0)
    gap = tuple(paired_difference(res.values(top, get), res.values(zero, get))
                for get in (first, last))
    return Plateau(pair, at, change, state, gap)


def plateau_table(p: Plateau, name: str = "test acc", tolerance: float = TOLERANCE) -> tuple:
    """Rows: k; the metric at both budgets, the change and its status; a last row the gap
    k = H − k = 0 at both budgets (mean [95 % interval] over seeds)."""
    b1, b2 = p.budgets
    rows = [[lab, f"{one.fmt(4)}", f"{two.fmt(4)}", p.change[lab].fmt(4), p.status[lab]]
            for lab, (one, two) in p.at.items()]
    top = list(p.at)[-1]
    rows.append([f"gap {top} − k=0", p.gap[0].fmt(4), p.gap[1].fmt(4),
                 f"{p.gap[1].mean - p.gap[0].mean:+.4g}", "—"])
    return (f"{name} at two budgets: step {b1} (end of the cosine decay) and step {b2} (after "
            f"a tail at the final rate); at plateau when the 95 % interval of the change lies "
            f"within ±{tolerance:g}", ["setting", f"step {b1}", f"step {b2}", "change",
                                       "plateau"], rows)


def curve_value(step: int, where: str, key: str) -> Callable[[Any], float]:
    """Getter of ``where`` ("metrics" or "geometry") number ``key`` at ``step`` of a cell's
    learning curve."""
    def get(result) -> float:
        point = next((p for p in result.curve or () if p["step"] == step), None)
        if point is None or point.get(where) is None:
            raise ValueError(f"the learning curve has no {where} at step {step}")
        return point[where][key]
    return get
