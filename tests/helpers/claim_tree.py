"""Claims by text, nested members included, and the finding a row states (its text without
the k / block / final-norm qualifier): one tallied row per finding (issue 40 item 11)."""

from __future__ import annotations

import re

from tokengeo.experiments.claims import TALLIED_KINDS

_QUALIFIERS = [
    r"^k=\d+( of \d+)?( \(all heads Laplacian\))?: ",  # k = H, k = H/2 ...
    r"^with more Laplacian heads \(k = 0 … \d+\), ",  # a trend over k
    r",? (at k < H|as k grows|after every block|after some block|at every block's output"
    r"|at the final norm|at block \d+).*$",
]


def every_claim(claims) -> dict:
    """{text: claim} over the rows and every member below them."""
    return {c.text: c for top in claims for c in (top, *top.descendants())}


def finding_text(text: str) -> str:
    """The finding a row states: "k=4 (all heads Laplacian): Laplacian heads raise test
    accuracy" and "Laplacian heads raise test accuracy as k grows (...)" are one."""
    t = text
    for pattern in _QUALIFIERS:
        t = re.sub(pattern, "", t)
    t = t.strip().lower()
    m = re.match(r"^(.*) rises with the number k of laplacian heads$", t)
    return f"laplacian heads raise {m.group(1)}" if m else t


def repeated_findings(claims) -> dict[str, int]:
    """Findings stated by more than one tallied row."""
    seen: dict[str, int] = {}
    for c in claims:
        if c.kind in TALLIED_KINDS:
            key = finding_text(c.text)
            seen[key] = seen.get(key, 0) + 1
    return {k: n for k, n in seen.items() if n > 1}
