"""The claims catalogue: every claim the four papers make, once, as the paper states it, with
the report rows that test it or why none does.

One TOML file per paper in this folder (``laplacian.toml``: Zhang & Papyan;
``ltransformer.toml``: El Ichi et al.; ``pde.toml``: Massucco et al.; ``similarity.toml``:
Halevi et al.), each a list of ``[[claim]]`` tables::

    [[claim]]
    id = "laplacian.vit-accuracy"      # "<file stem>.<kebab-name>", unique across the files
    section = "Sec. 5.1"                # where the paper states it
    statement = "..."                   # the paper's statement, in its own words
    value = "..."                       # the paper's number, "" when it gives none
    tests = ["laplacian-images:Laplacian heads raise test accuracy"]
    not_tested = ""                     # required (why: cost, scale, data) when tests = []

A test names a report row as ``"<suite>:<claim text>"`` (the row's text in the shipped
settings; rows are matched to entries by the id they carry, since a text may name the run's
own k or p). A tallied row (kind ``paper`` or ``stand-in``)
carries the id of exactly one entry in its ``catalogue`` field, and no two tallied rows carry
the same id (:func:`check_report`); rows of kind ``new``, ``construction`` or ``sanity`` may
carry one too (an entry tested by a construction check) and are never tallied.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from tokengeo.errors import ConfigError

FOLDER = Path(__file__).parent
PAPERS = {  # file stem -> the paper
    "laplacian": "Zhang & Papyan, Laplacian heads (arXiv 2602.09297)",
    "ltransformer": "El Ichi et al., the L-Transformer (arXiv 2603.05727)",
    "pde": "Massucco et al., multi-head transformers as Wasserstein gradient flows "
           "(arXiv 2605.18870)",
    "similarity": "Halevi et al., self-attention output similarities (arXiv 2512.21956)",
}
FIELDS = {"id": str, "section": str, "statement": str, "value": str, "tests": list,
          "not_tested": str}
ID = re.compile(r"^(?P<paper>[a-z]+)\.[a-z0-9]+(?:-[a-z0-9]+)*$")
TALLIED = ("paper", "stand-in")
MAX_BYTES = 1_000_000


@dataclass(frozen=True)
class Entry:
    """One claim of one paper (see the module docstring)."""

    id: str
    section: str
    statement: str
    value: str
    tests: tuple[str, ...]
    not_tested: str

    @property
    def paper(self) -> str:
        return self.id.split(".", 1)[0]

    @property
    def tested(self) -> bool:
        return bool(self.tests)


def _entry(where: str, stem: str, table: object) -> Entry:
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: a [[claim]] must be a table")
    missing = [k for k in FIELDS if k not in table]
    extra = sorted(set(table) - set(FIELDS))
    if missing or extra:
        raise ConfigError(f"{where}: claim {table.get('id', '?')!r} has missing fields "
                          f"{missing} / unknown fields {extra}; a claim holds {list(FIELDS)}")
    for key, kind in FIELDS.items():
        if not isinstance(table[key], kind):
            raise ConfigError(f"{where}: claim {table['id']!r}: {key} must be a "
                              f"{kind.__name__}")
    cid = table["id"]
    m = ID.match(cid)
    if not m or m["paper"] != stem:
        raise ConfigError(f"{where}: id {cid!r} must read \"{stem}.<kebab-name>\"")
    tests = table["tests"]
    if not all(isinstance(t, str) and ":" in t for t in tests):
        raise ConfigError(f"{where}: {cid}: each test reads \"<suite>:<claim text>\"")
    if not tests and not table["not_tested"].strip():
        raise ConfigError(f"{where}: {cid} has no tests; say why in not_tested")
    if tests and table["not_tested"].strip():
        raise ConfigError(f"{where}: {cid} has tests and a not_tested reason; keep one")
    if not table["statement"].strip() or not table["section"].strip():
        raise ConfigError(f"{where}: {cid} needs its section and the paper's statement")
    return Entry(cid, table["section"], table["statement"], table["value"], tuple(tests),
                 table["not_tested"])


def read_file(path: Path) -> list[Entry]:
    """The entries of one paper's file, each checked (:class:`ConfigError` naming it)."""
    path = Path(path)
    if path.stem not in PAPERS:
        raise ConfigError(f"{path}: catalogue files are {sorted(PAPERS)} (.toml)")
    if path.stat().st_size > MAX_BYTES:
        raise ConfigError(f"{path} is larger than {MAX_BYTES} bytes")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path} is not valid UTF-8 TOML: {exc}") from None
    if set(data) != {"claim"} or not isinstance(data["claim"], list):
        raise ConfigError(f"{path}: a catalogue file holds only [[claim]] tables")
    return [_entry(str(path), path.stem, t) for t in data["claim"]]


def load(folder: Path = FOLDER) -> list[Entry]:
    """Every entry of every paper's file under ``folder``, ids unique across them."""
    entries = [e for p in sorted(Path(folder).glob("*.toml")) for e in read_file(p)]
    seen: set[str] = set()
    for e in entries:
        if e.id in seen:
            raise ConfigError(f"catalogue id {e.id!r} is used twice; ids are unique")
        seen.add(e.id)
    return entries


def suites_of(entry: Entry) -> set[str]:
    """The suites whose rows test ``entry``."""
    return {t.split(":", 1)[0] for t in entry.tests}


def check_suites(entries: list[Entry], suites: set[str]) -> list[str]:
    """Every test names one of ``suites`` (the suite names ``tokengeo reproduce`` runs)."""
    return [f"{e.id}: test {t!r} names no suite (suites: {sorted(suites)})"
            for e in entries for t in e.tests if t.split(":", 1)[0] not in suites]


def check_report(entries: list[Entry], claims: list[dict]) -> list[str]:
    """What breaks the catalogue's contract in report rows ``claims`` (report.json's
    ``claims``): a tallied row without an id, an unknown id, an id two tallied rows carry,
    a row in a suite its entry does not list, and an entry tested in a suite the report
    holds whose id no row carries. Empty: the rows keep the contract. (Rows are matched
    by id: a row's text may name the run's own settings, k = H or p.)"""
    by_id = {e.id: e for e in entries}
    suites = {c["suite"] for c in claims}
    problems, tallied, carried = [], {}, set()
    for c in claims:
        name, cid = f"{c['suite']}:{c['claim']}", c.get("catalogue")
        if c["kind"] in TALLIED and not cid:
            problems.append(f"tallied row {name!r} names no catalogue entry")
        if cid is None:
            continue
        if cid not in by_id:
            problems.append(f"row {name!r} names unknown catalogue entry {cid!r}")
            continue
        carried.add(cid)
        if c["kind"] in TALLIED:
            if cid in tallied:
                problems.append(f"catalogue entry {cid!r} is tallied twice: {tallied[cid]!r}"
                                f" and {name!r}")
            tallied[cid] = name
        if c["suite"] not in suites_of(by_id[cid]):
            problems.append(f"row {name!r} names {cid!r}, whose tests name no row of "
                            f"suite {c['suite']!r}")
    for e in entries:
        if suites_of(e) & suites and e.id not in carried:
            problems.append(f"{e.id}: tested in {sorted(suites_of(e) & suites)}, but no "
                            "row of this report carries its id")
    return problems


def rows_of(entry: Entry, claims: list[dict]) -> list[dict]:
    """The report rows that carry ``entry``'s id."""
    return [c for c in claims if c.get("catalogue") == entry.id]


def coverage(entries: list[Entry]) -> dict[str, dict[str, int]]:
    """Per paper (file stem): claims stated, tested, not tested."""
    out = {p: {"stated": 0, "tested": 0, "not tested": 0} for p in PAPERS}
    for e in entries:
        out[e.paper]["stated"] += 1
        out[e.paper]["tested" if e.tested else "not tested"] += 1
    return out
