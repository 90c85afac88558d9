"""Assemble the explorer's HTML page: one file, its CSS, JavaScript and data inline.

Large matrix data (the per-head blobs of a big model and a long text) goes to one folder
beside the page, ``<page>_files/``, as small ``.js`` files the page loads on demand with
``<script src>`` tags (which, unlike ``fetch``, work from ``file://``). Nothing is fetched
from the network.
"""

from __future__ import annotations

import hashlib
import html
import json
import re
import shutil
from functools import partial
from importlib import resources
from pathlib import Path
from urllib.parse import quote

from tokengeo.errors import ConfigError
from tokengeo.io import atomic_dir, write_text
from tokengeo.outmarker import owned_file, read_file_marker, write_file_marker

# Above this many bytes of blobs the page keeps them in a folder beside it: a browser parses
# a 60 MB page slowly, while blobs loaded per head cost only what is looked at.
INLINE_LIMIT = 48 * 2**20


def asset(name: str) -> str:
    return resources.files("tokengeo.view").joinpath("assets", name).read_text(encoding="utf-8")


def _script_json(obj) -> str:
    """JSON safe inside a <script> element (no ``</script>``, no ``<!--``)."""
    text = json.dumps(obj, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def script_hash(script: str) -> str:
    """The CSP source that lets exactly this inline script run (``'sha256-…'``)."""
    import base64

    return "sha256-" + base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode()


GENERATOR = '<meta name="generator" content="tokengeo view">'  # for readers, not ownership
CHUNK_NAME = re.compile(r"c-[A-Za-z0-9_-]+\.js")  # the files of a page's folder
COMMAND = "view"


def files_folder(out: Path) -> Path:
    return out.with_name(out.stem + "_files")


def foreign_file(out: Path) -> Path | None:
    """What writing a page at ``out`` would replace that tokengeo did not write: ``out``
    itself, or anything in its ``_files`` folder, unless the page's sidecar marker
    (:func:`tokengeo.outmarker.file_marker`) lists it with its current SHA-256. A user's
    page with our generator tag in it, a file of theirs named like a chunk, or an edited
    copy of our page are all foreign. None when nothing would be lost."""
    recorded = read_file_marker(out, COMMAND)
    if out.is_symlink() or (out.exists() and not out.is_file()):
        return out
    if out.exists() and not owned_file(out, out.name, COMMAND, recorded):
        return out
    folder = files_folder(out)
    if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
        return folder
    if folder.is_dir():
        return next((c for c in sorted(folder.iterdir())
                     if not owned_file(c, f"{folder.name}/{c.name}", COMMAND, recorded)), None)
    return None


def _refuse_foreign(out: Path) -> None:
    foreign = foreign_file(out)
    if foreign is not None:
        raise ConfigError(f"--out {str(out)!r} would replace {str(foreign)!r}, which tokengeo "
                          "view did not write (or which changed since); choose another --out "
                          "or move it away")


def render(payload: dict, chunks: dict[str, str], *, title: str, out: Path,
           inline_limit: int = INLINE_LIMIT) -> tuple[str, dict[str, str]]:
    """The page's HTML and the files of its folder (name -> text): ``chunks`` (id -> base64)
    go inline or, when larger than ``inline_limit`` in all, into :func:`files_folder`."""
    size = sum(len(c) for c in chunks.values())
    inline = size <= inline_limit
    # the folder's name as a relative URL: a '#', '?' or '%' in it must not end the path
    payload = {**payload, "chunks": "inline" if inline else quote(files_folder(out).name)}
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        GENERATOR,
        # no network at view time: forbid every fetch except this page's own files; the
        # one inline script runs by its hash (no inline handler, no injected script runs)
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        f"script-src 'self' '{script_hash(asset('viewer.js'))}'; style-src 'unsafe-inline'; "
        "img-src data: blob:; connect-src data: blob:\">",
        f"<title>{html.escape(title)}</title>",
        f"<style>{asset('viewer.css')}</style></head><body>",
        '<div id="app"><p id="tg-loading">Loading…</p></div>',
        f'<script id="tg-data" type="application/json">{_script_json(payload)}</script>',
    ]
    files: dict[str, str] = {}
    if inline:
        parts += [f'<script type="text/plain" id="tg-chunk-{k}">{v}</script>'
                  for k, v in chunks.items()]
    else:
        files = {f"c-{k}.js": f'TG_CHUNK("{k}","{v}");\n' for k, v in chunks.items()}
    parts += [f"<script>{asset('viewer.js')}</script>", "</body></html>", ""]
    return "\n".join(parts), files


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def write_page(out: str | Path, payload: dict, chunks: dict[str, str] | None = None, *,
               title: str, inline_limit: int = INLINE_LIMIT) -> Path:
    """Write the page to ``out`` (an ``.html`` file) atomically; return its path.

    Ownership is checked again at each rename (a page the user wrote at ``out`` while the
    model ran stays). The sidecar marker first accepts the old and the new files, then only
    the new ones, so an interrupted write never makes our own page look foreign.
    """
    out = Path(out).expanduser()
    if out.suffix.lower() not in (".html", ".htm"):
        raise ConfigError(f"--out {str(out)!r} must name an .html file, e.g. --out page.html")
    if out.is_dir():
        raise ConfigError(f"--out {str(out)!r} is a folder; give a file name such as "
                          f"{out / 'view.html'}")
    if not out.parent.is_dir():
        raise ConfigError(f"the folder of --out {str(out)!r} does not exist; create it first")
    text, files = render(payload, chunks or {}, title=title, out=out, inline_limit=inline_limit)
    folder = files_folder(out)
    new = {out.name: [_sha(text)], **{f"{folder.name}/{k}": [_sha(v)] for k, v in files.items()}}
    _refuse_foreign(out)
    old = read_file_marker(out, COMMAND)
    write_file_marker(out, COMMAND, {k: sorted(set(old.get(k, [])) | set(new.get(k, [])))
                                     for k in old.keys() | new.keys()})
    check = partial(_refuse_foreign, out)
    if files:
        with atomic_dir(folder, check=check) as tmp:
            for name, body in files.items():
                write_text(tmp / name, body)
    elif folder.is_dir():  # an earlier page's folder, all ours (checked): no longer used
        check()
        shutil.rmtree(folder)
    write_text(out, text, check=check)
    write_file_marker(out, COMMAND, new)
    return out
