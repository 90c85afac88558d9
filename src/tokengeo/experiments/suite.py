"""A reproduce suite as a type: its settings schema, its cells, its summary and claims.

Each built-in suite module defines ``SUITE = Suite(...)``. ``check(where, settings)`` refuses
settings that do not fit together (the suite owns its rules); ``cells(settings, ctx)`` lists
the units of work; ``summarise(settings, results, ctx)`` turns their results (by cell key) into
a :class:`~tokengeo.experiments.summary.SuiteOutput`. The :class:`SuiteContext` says where
the suite writes (run folders, figures) and why it was skipped, if it was: nothing of that
travels inside the settings.

Any suite's settings may hold ``skip = "reason"``: then no cell runs, and every claim is
reported as not run with that reason (the quick settings of a suite too long for the quick
run).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from tokengeo.experiments.cells import Cell, CellResult
from tokengeo.experiments.decidability import PlannedTest, seed_t
from tokengeo.experiments.settings import Setting
from tokengeo.experiments.summary import SuiteOutput

SKIP = "skip"  # the one settings key every suite accepts: a reason not to run its cells


@dataclass(frozen=True)
class SuiteContext:
    """Where a suite writes, and whether it runs."""

    out_dir: Path  # the report folder
    figure_dir: Path  # out_dir/figures/<suite>
    skipped: str | None = None  # the settings' ``skip`` reason

    def runs(self, suite: str) -> Path:
        """The folder of the suite's training runs."""
        return Path(self.out_dir) / "runs" / suite

    @classmethod
    def under(cls, out_dir: Path, suite: str, settings: Mapping | None = None) -> SuiteContext:
        skipped = (settings or {}).get(SKIP)
        return cls(Path(out_dir), Path(out_dir) / "figures" / suite, skipped)


def no_checks(where: str, settings: dict) -> None:
    """The settings of a suite whose values need no check beyond their schema."""


@dataclass(frozen=True)
class Suite:
    name: str
    title: str
    paper: str
    settings: Mapping[str, Setting]
    cells: Callable[[dict, SuiteContext], list[Cell]]
    summarise: Callable[[dict, dict[str, CellResult], SuiteContext], SuiteOutput]
    # ``check(where, settings)``: the suite's own cross-checks of its resolved settings (read
    # from ``where``), a ConfigError naming the setting; run by
    # :func:`tokengeo.experiments.validation.check_suite` before any cell is built
    check: Callable[[str, dict], None] = no_checks
    # ``planned(name, settings)``: the claims' tests whose power depends on the units the
    # settings give (:mod:`tokengeo.experiments.decidability`), checked before any cell
    planned: Callable[[str, dict], list[PlannedTest]] = seed_t

    @property
    def schema(self) -> dict[str, Setting]:
        """The settings schema with the ``skip`` key every suite accepts."""
        return {**self.settings, SKIP: Setting("str", required=False)}

    def plan(self, settings: dict, ctx: SuiteContext) -> list[Cell]:
        """The cells to run: none when the settings skip the suite."""
        return [] if ctx.skipped else self.cells(settings, ctx)
