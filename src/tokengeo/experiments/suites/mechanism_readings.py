"""Readings of a ``laplacian-mechanism`` cell's value, shared by the suite's claims
(:mod:`~tokengeo.experiments.suites.laplacian_mechanism`) and its tables and figures
(:mod:`~tokengeo.experiments.suites.mechanism_figures`): the variants' labels, the line of a
head's (a, b), test accuracy and the within-sequence share at a depth."""

from __future__ import annotations

import math
from collections.abc import Callable

LEARNED, CONTROL = "learned", "V+PV"  # the learnable-(a, b) variant; the (1, 1) control


def path_label(t: float) -> str:
    """The label of the path point (a, b) = (t, 1 − 2t)."""
    return f"t={t:g}"


def line_angle(a: float, b: float) -> float:
    """ψ = atan2(b, a) mod 180°, in [0, 180): the line of (a, b), which is all a head's
    function depends on (scale and sign go into the output projection)."""
    return math.degrees(math.atan2(b, a)) % 180.0


def accuracy(value: dict) -> float:
    return float(value["final"]["test"]["accuracy"])


def share(key: str, depth: int) -> Callable[[dict], float]:
    """Getter of ``key`` (a variance share) at ``depth`` (0 = the embedding)."""
    return lambda value: float(value["layers"][key][depth])
