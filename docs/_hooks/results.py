"""MkDocs hook: a paper's page shows its suites' section of the published run.

``<!-- published-results: HEADING -->`` in a page becomes the ``## HEADING`` section of
``docs/results/report.md`` (the report ``tokengeo reproduce --full`` wrote), its headings one
level down and its figure links made relative to the page. A heading that is not in the
report fails the build, so a renamed suite cannot leave a page silently empty.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path

MARKER = re.compile(r"<!-- published-results: (.+?) -->")
FIGURE = re.compile(r"!\[([^\]]*)\]\((figures/[^)]+)\)")


def _sections(report: str) -> dict[str, str]:
    parts = re.split(r"^## (.+)$", report, flags=re.M)
    return {parts[k].strip(): parts[k + 1] for k in range(1, len(parts), 2)}


def on_page_markdown(markdown: str, page, config, files) -> str:
    if page.file.src_uri == "results/README.md":  # on the site report.md is report.html
        return markdown.replace("](report.html)", "](report.md)")
    if "published-results:" not in markdown:
        return markdown
    report = Path(config["docs_dir"]) / "results" / "report.md"
    sections = _sections(report.read_text(encoding="utf-8"))
    here = posixpath.dirname(page.file.src_uri)
    to_results = posixpath.relpath("results", here or ".")

    def replace(m: re.Match) -> str:
        title = m.group(1).strip()
        if title not in sections:
            raise ValueError(f"{page.file.src_uri}: no section {title!r} in {report} "
                             f"(it has: {', '.join(sections)})")
        body = FIGURE.sub(lambda f: f"![{f.group(1)}]({to_results}/{f.group(2)})",
                          sections[title])
        return f"### {title}\n{body}"

    return MARKER.sub(replace, markdown)
