"""A claim of a paper, what tokengeo measured for it, and the verdict."""

from __future__ import annotations

from dataclasses import dataclass, field

from tokengeo.experiments.stats import Interval, Region, verdict


CLAIM_KINDS = ("paper", "stand-in", "sanity", "construction", "new")


@dataclass
class Claim:
    """One line of the report's summary table.

    ``measured`` is the quantity the rule judges (often a paired difference over seeds);
    ``detail`` holds the per-setting numbers a reader wants next to it.

    ``kind`` says what the claim is to the paper (see :data:`CLAIM_KINDS`): ``paper`` (the
    paper states it, measured as stated), ``stand-in`` (the paper's claim through a proxy
    model, data set or metric, named in ``proxy``), ``sanity`` (a precondition the other
    claims need), ``construction`` (holds by construction or is pinned by a unit test) or
    ``new`` (tokengeo's own question). ``paper_effect`` is the paper's own number in the
    unit of ``measured``, when the paper gives one.
    """

    suite: str
    text: str
    source: str
    paper_value: str
    quantity: str
    region: Region
    measured: Interval | None = None
    not_run: str | None = None
    detail: str = ""
    figures: list[str] = field(default_factory=list)
    kind: str = "paper"
    proxy: str | None = None
    paper_effect: float | None = None

    @property
    def verdict(self) -> str:
        if self.not_run is not None:
            return f"not run: {self.not_run}"
        if self.measured is None:
            return "not run: no measurement"
        return verdict(self.measured, self.region)

    @property
    def rule(self) -> str:
        return (f"reproduced if the 95% interval of {self.quantity} lies {self.region.text}; "
                "not reproduced if it lies outside; inconclusive otherwise")

    def to_dict(self) -> dict:
        return {
            "suite": self.suite, "claim": self.text, "source": self.source,
            "paper": self.paper_value, "quantity": self.quantity,
            "region": self.region.text,
            "measured": self.measured.to_dict() if self.measured else None,
            "verdict": self.verdict, "rule": self.rule, "detail": self.detail,
        }
