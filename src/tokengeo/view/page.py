"""Assemble the explorer's HTML page: one file, its CSS, JavaScript and data inline.

Large matrix data (the per-head blobs of a big model and a long text) goes to one folder
beside the page, ``<page>_files/``, as small ``.js`` files the page loads on demand with
``<script src>`` tags (which, unlike ``fetch``, work from ``file://``). Nothing is fetched
from the network.
"""

from __future__ import annotations

import html
import json
import re
from importlib import resources
from pathlib import Path

from tokengeo.errors import ConfigError
from tokengeo.io import atomic_dir, write_text

# Above this many bytes of blobs the page keeps them in a folder beside it: a browser parses
# a 60 MB page slowly, while blobs loaded per head cost only what is looked at.
INLINE_LIMIT = 48 * 2**20


def asset(name: str) -> str:
    return resources.files("tokengeo.view").joinpath("assets", name).read_text(encoding="utf-8")


def _script_json(obj) -> str:
    """JSON safe inside a <script> element (no ``</script>``, no ``<!--``)."""
    text = json.dumps(obj, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


GENERATOR = '<meta name="generator" content="tokengeo view">'  # marks a page tokengeo wrote
CHUNK_NAME = re.compile(r"c-[A-Za-z0-9_-]+\.js")  # the files of a page's folder


def files_folder(out: Path) -> Path:
    return out.with_name(out.stem + "_files")


def foreign_file(out: Path) -> Path | None:
    """What writing a page at ``out`` would replace that tokengeo did not write: ``out``
    itself (not a regular file, or without the generator mark) or something in its
    ``_files`` folder other than chunk files; None when nothing would be lost."""
    if out.is_symlink() or (out.exists() and not out.is_file()):
        return out
    if out.is_file():
        with open(out, "rb") as f:
            head = f.read(4096)
        if GENERATOR.encode() not in head:
            return out
    folder = files_folder(out)
    if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
        return folder
    if folder.is_dir():
        return next((c for c in sorted(folder.iterdir())
                     if c.is_symlink() or not c.is_file() or not CHUNK_NAME.fullmatch(c.name)),
                    None)
    return None


def render(payload: dict, chunks: dict[str, str], *, title: str, out: Path,
           inline_limit: int = INLINE_LIMIT) -> str:
    """The page's HTML; ``chunks`` (id -> base64) go inline or, when larger than
    ``inline_limit`` in all, into :func:`files_folder` (written here, atomically)."""
    size = sum(len(c) for c in chunks.values())
    inline = size <= inline_limit
    payload = {**payload, "chunks": "inline" if inline else files_folder(out).name}
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        GENERATOR,
        # no network at view time: forbid every fetch except this page's own files
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "script-src 'self' 'unsafe-inline'; style-src 'unsafe-inline'; "
        "img-src data: blob:; connect-src data: blob:\">",
        f"<title>{html.escape(title)}</title>",
        f"<style>{asset('viewer.css')}</style></head><body>",
        '<div id="app"><p id="tg-loading">Loading…</p></div>',
        f'<script id="tg-data" type="application/json">{_script_json(payload)}</script>',
    ]
    if inline:
        parts += [f'<script type="text/plain" id="tg-chunk-{k}">{v}</script>'
                  for k, v in chunks.items()]
    else:
        _write_chunk_folder(files_folder(out), chunks)
    parts += [f"<script>{asset('viewer.js')}</script>", "</body></html>", ""]
    return "\n".join(parts)


def _write_chunk_folder(folder: Path, chunks: dict[str, str]) -> None:
    with atomic_dir(folder) as tmp:
        for key, data in chunks.items():
            (tmp / f"c-{key}.js").write_text(f'TG_CHUNK("{key}","{data}");\n', encoding="utf-8")


def write_page(out: str | Path, payload: dict, chunks: dict[str, str] | None = None, *,
               title: str, inline_limit: int = INLINE_LIMIT) -> Path:
    """Write the page to ``out`` (an ``.html`` file) atomically; return its path."""
    out = Path(out).expanduser()
    if out.suffix.lower() not in (".html", ".htm"):
        raise ConfigError(f"--out {str(out)!r} must name an .html file, e.g. --out page.html")
    if out.is_dir():
        raise ConfigError(f"--out {str(out)!r} is a folder; give a file name such as "
                          f"{out / 'view.html'}")
    if not out.parent.is_dir():
        raise ConfigError(f"the folder of --out {str(out)!r} does not exist; create it first")
    write_text(out, render(payload, chunks or {}, title=title, out=out,
                           inline_limit=inline_limit))
    return out
