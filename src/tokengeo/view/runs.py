"""A ``tokengeo reproduce`` folder for the explorer: the report's blocks, as data.

The folder's ``report.json`` is read by the one validating reader
(:func:`tokengeo.reporting.reader.read_report`) and turned into the same blocks report.md
and report.html are rendered from (:mod:`tokengeo.reporting.document`): an overview (tally,
summary, power), then one section per suite. Each block goes to the page as plain strings
(:func:`tokengeo.reporting.render.block_view`) that the viewer's script puts into the DOM
as text, so no field of a report.json ever becomes markup. Figures follow the report's
policy (PNG files inside the folder's own ``figures/``, bounded in all).
"""

from __future__ import annotations

from pathlib import Path

from tokengeo.errors import ConfigError


def _figures(root: Path, suite: dict) -> list[str]:
    """The suite's figures: those report.json lists, or (a report that lists none) the PNG
    files of ``figures/<suite>/``."""
    if "figures" in suite:
        return suite["figures"]
    folder = root / "figures" / suite["name"]
    try:
        inside = folder.resolve().is_relative_to((root / "figures").resolve())
    except (OSError, RuntimeError, ValueError):
        inside = False
    if not inside or not folder.is_dir():
        return []
    return [p.relative_to(root).as_posix() for p in sorted(folder.glob("*.png"))]


def read_run(folder: str | Path) -> dict:
    """The payload of a reproduce folder (``report.json`` and ``figures/``)."""
    from tokengeo.reporting.document import overview_blocks, suite_blocks, suites
    from tokengeo.reporting.reader import read_report
    from tokengeo.reporting.render import FIGURES_LIMIT, block_view

    root = Path(folder).expanduser()
    path = root / "report.json"
    if not path.exists() and not path.is_symlink():
        raise ConfigError(f"--report {str(root)!r} has no report.json; give the --out folder "
                          "of a finished `tokengeo reproduce` run")
    report = read_report(path)
    budget = [FIGURES_LIMIT]
    sections = [{"title": "Overview",
                 "blocks": [block_view(b, root, budget) for b in
                            [*overview_blocks(report)]]}]
    for s in suites(report):
        s = {**s, "figures": _figures(root, s)}
        sections.append({"title": s["title"], "blocks": [block_view(b, root, budget)
                                                         for b in suite_blocks(report, s)]})
    commit = str(report.get("commit") or "")[:10]
    title = f"tokengeo reproduce --{report['mode']}" + (f" ({commit})" if commit else "")
    return {"kind": "run", "title": title, "source": str(root), "sections": sections,
            "report": "report.html" if (root / "report.html").is_file() else ""}
