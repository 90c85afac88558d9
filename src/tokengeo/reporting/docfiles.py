"""The doc blocks of README.md and docs/: a parser, not a pattern, and a rewrite that never
loses a user's text.

A block is two marker lines, each alone on its line, outside fenced code::

    <!-- tokengeo:begin NAME -->
    ...rendered from report.json (:mod:`tokengeo.reporting.blocks`)...
    <!-- tokengeo:end NAME -->

Every begin pairs with the next end of the same name: a nested, crossed or stray marker, a
marker-like line that is not exactly a marker (a trailing space) or a begin without its end
is one :class:`~tokengeo.errors.ConfigError` naming file:line. A marker inside text or inside
``````` / ``~~~`` fenced code is text. Rendered text never holds a marker (``<!--`` is
written ``&lt;!--``). Files are README.md, docs/*.md and docs/*/*.md under the root: regular
files only (a symbolic link among them or their folders is refused, so nothing outside the
root is read or written and no link is replaced), read bounded and as UTF-8. Every file is
parsed and rendered before the first is written; each is written atomically with its mode
and line endings kept, and only if it did not change since it was read.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from tokengeo.errors import ConfigError
from tokengeo.reporting.blocks import render

BEGIN = "<!-- tokengeo:begin {} -->"
END = "<!-- tokengeo:end {} -->"
MARKER = re.compile(r"<!-- tokengeo:(?P<kind>begin|end) (?P<name>\S+) -->")
MARKER_LIKE = re.compile(r"\s*<!--\s*tokengeo:.*-->\s*")
FENCE = re.compile(r" {0,3}(?P<fence>`{3,}|~{3,})")
DOC_LIMIT = 8 << 20  # a doc file is far smaller; a larger one is not a doc
DOC_GLOBS = ("README.md", "docs/*.md", "docs/*/*.md")


@dataclass(frozen=True)
class Block:
    name: str
    begin: int  # index of the begin line; the body is lines[begin + 1:end]
    end: int


@dataclass
class DocFile:
    path: Path
    raw: bytes
    lines: list[str]  # with their line endings
    blocks: list[Block]


def _bare(line: str) -> str:
    return line.rstrip("\r\n")


def _marker(line: str, where: str) -> tuple[str, str] | None:
    """(kind, name) of a marker line; None for text; ConfigError for a near-marker."""
    bare = _bare(line)
    m = MARKER.fullmatch(bare)
    if m:
        return m["kind"], m["name"]
    if MARKER_LIKE.fullmatch(bare):
        raise ConfigError(f"{where}: {bare.strip()[:60]!r} looks like a doc-block marker but "
                          "is not exactly one; write `<!-- tokengeo:begin NAME -->` or "
                          "`<!-- tokengeo:end NAME -->` alone on the line (no spaces around)")
    return None


def parse(lines: list[str], what: str) -> list[Block]:
    """The blocks of a file's ``lines``; ConfigError (``what:line``) unless every marker
    outside fenced code pairs up (no nesting, crossing or strays)."""
    blocks, fence, open_at, name = [], None, None, ""
    for i, line in enumerate(lines):
        where = f"{what}:{i + 1}"
        if open_at is None and fence is not None:
            m = FENCE.match(line)
            if m and m["fence"][0] == fence[0] and len(m["fence"]) >= len(fence) \
                    and not _bare(line)[m.end():].strip():
                fence = None
            continue
        if open_at is None and (m := FENCE.match(line)):
            fence = m["fence"]
            continue
        marker = _marker(line, where)
        if marker is None:
            continue
        kind, this = marker
        if open_at is None and kind == "end":
            raise ConfigError(f"{where}: end marker of {this!r} with no begin before it; "
                              "remove it or add its begin marker")
        if open_at is not None and kind == "begin":
            raise ConfigError(f"{where}: begin marker of {this!r} inside block {name!r} "
                              f"(begun at line {open_at + 1}); blocks do not nest: close "
                              f"{name!r} first or remove the stray marker")
        if open_at is not None and this != name:
            raise ConfigError(f"{where}: end marker of {this!r} closes block {name!r} (begun "
                              f"at line {open_at + 1}); markers must pair in order")
        if kind == "begin":
            open_at, name = i, this
        else:
            blocks.append(Block(name, open_at, i))
            open_at = None
    if open_at is not None:
        raise ConfigError(f"{what}:{open_at + 1}: block {name!r} has no end marker; add "
                          f"`{END.format(name)}` on its own line after it")
    return blocks


# ---------------------------------------------------------------------- files
def _refuse_link(path: Path, root: Path) -> None:
    if path.is_symlink():
        raise ConfigError(f"{path.relative_to(root).as_posix()} is a symbolic link; doc blocks "
                          f"are rendered only into regular files under --root {root}: replace "
                          "the link by the file, or pass the folder it points to as --root")


def doc_files(root: Path) -> list[Path]:
    """README.md, docs/*.md and docs/*/*.md under ``root``; ConfigError for a symbolic link
    among them or their folders (nothing is read or written through one)."""
    root = Path(root)
    found = []
    for pattern in DOC_GLOBS:
        for path in sorted(root.glob(pattern)):
            rel = path.relative_to(root)
            for i in range(1, len(rel.parts) + 1):
                _refuse_link(root.joinpath(*rel.parts[:i]), root)
            if path.is_file():
                found.append(path)
    return found


def read_doc(path: Path, root: Path) -> DocFile:
    """A doc file, read bounded (:data:`DOC_LIMIT`) and as UTF-8, and parsed."""
    from tokengeo.io import read_small

    what = path.relative_to(root).as_posix()
    try:
        raw = read_small(path, DOC_LIMIT)
    except ConfigError as exc:
        raise ConfigError(f"{what}: not a doc file tokengeo renders blocks into ({exc})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{what}: not UTF-8 text (byte {exc.start}); save it as UTF-8") \
            from None
    *full, last = text.split("\n")  # lines end at "\n" only (a "\r" before it is kept)
    lines = [line + "\n" for line in full] + ([last] if last else [])
    return DocFile(path, raw, lines, parse(lines, what))


def safe_text(body: str) -> str:
    """Rendered text as it may stand in a doc: no HTML comment opens in it, so no marker."""
    return body.replace("<!--", "&lt;!--")


def _body(doc: DocFile, b: Block, data: dict, root: Path) -> list[str]:
    eol = "\r\n" if doc.lines[b.begin].endswith("\r\n") else "\n"
    text = safe_text(render(data, b.name, root))
    return [line + eol for line in text.split("\n")]


def rendered(doc: DocFile, data: dict, root: Path) -> str:
    """The file's text with every block re-rendered from ``data``."""
    out, at = [], 0
    for b in doc.blocks:
        out += doc.lines[at:b.begin + 1] + _body(doc, b, data, root)
        at = b.end
    return "".join(out + doc.lines[at:])


def check_docs(data: dict, root: Path) -> list[str]:
    """One line per block name whose text differs from what ``data`` renders, naming the
    files it differs in (empty: every block agrees)."""
    differs: dict[str, list[str]] = {}
    for path in doc_files(root):
        doc = read_doc(path, root)
        for b in doc.blocks:
            if doc.lines[b.begin + 1:b.end] != _body(doc, b, data, root):
                differs.setdefault(b.name, []).append(path.relative_to(root).as_posix())
    return [f"block {name} differs from report.json in {', '.join(files)}"
            for name, files in differs.items()]


def _write_kept(doc: DocFile, text: str) -> None:
    """Replace the file atomically by ``text``, keeping its mode; refused if it changed (or
    became a link) since it was read."""
    from tokengeo.io import atomic_path, read_small

    mode = stat.S_IMODE(os.lstat(doc.path).st_mode)

    def unchanged() -> None:
        if doc.path.is_symlink() or read_small(doc.path, DOC_LIMIT) != doc.raw:
            raise ConfigError(f"{doc.path} changed while the docs were rendered; run the "
                              "command again")

    with atomic_path(doc.path, check=unchanged) as tmp:
        tmp.write_bytes(text.encode("utf-8"))
        os.chmod(tmp, mode)


def write_docs(data: dict, root: Path) -> list[Path]:
    """Re-render every block under ``root``; return the files that changed. Every file is
    read, parsed and rendered before the first is written."""
    root = Path(root)
    docs = [read_doc(path, root) for path in doc_files(root)]
    new = [(doc, rendered(doc, data, root)) for doc in docs]
    changed = [(doc, text) for doc, text in new if text.encode("utf-8") != doc.raw]
    for doc, _ in changed:  # a folder we cannot write into: refused before the first write
        if not os.access(doc.path.parent, os.W_OK | os.X_OK):
            raise ConfigError(f"cannot write into {doc.path.parent} (for {doc.path.name}); "
                              "make the folder writable or pass another --root")
    for doc, text in changed:
        _write_kept(doc, text)
    return [doc.path for doc, _ in changed]
