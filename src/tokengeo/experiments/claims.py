"""A claim of a paper, what tokengeo measured for it, and the verdict."""

from __future__ import annotations

from dataclasses import dataclass, field

from tokengeo.experiments.stats import Interval, Region, verdict


@dataclass
class Claim:
    """One line of the report's summary table.

    ``measured`` is the quantity the rule judges (often a paired difference over seeds);
    ``detail`` holds the per-setting numbers a reader wants next to it.
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
