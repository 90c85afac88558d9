"""Atomic file writes: the one place tokengeo writes a file or folder that readers may see.

Everything is written into a hidden temporary sibling (``.tmp-<name>-XXXX``), flushed to
disk (``fsync``) and then renamed over the destination, so a reader sees either the old
file or the whole new one, never a torn one. A write that raises removes its temporary
file. Files and folders get the permissions an ordinary ``open(path, "w")`` /
``mkdir`` would give (``0o666 & ~umask`` / ``0o777 & ~umask``), not ``mkstemp``'s 0600.

::

    write_json(path, obj)                 # also write_text / write_bytes
    with atomic_path(path) as tmp:        # for writers that want a path (safetensors, npz)
        save_file(tensors, tmp)
    with atomic_dir(folder) as tmp:       # a whole folder, renamed into place when complete
        ...
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

TMP_PREFIX = ".tmp-"  # temporary siblings start with this (see remove_temporaries)


def _new_sibling(path: Path, *, folder: bool = False, tag: str = "") -> Path:
    """Create an empty file (or folder) ``.tmp-[tag]<name>-<random>`` beside ``path``.

    Created like ``open(p, "w")`` / ``mkdir`` do, with mode 0o666 (0o777) that the kernel
    reduces by the umask, so no umask is read or changed (``mkstemp`` would give 0o600).
    """
    for _ in range(100):
        tmp = path.parent / f"{TMP_PREFIX}{tag}{path.name}-{secrets.token_hex(4)}"
        try:
            if folder:
                os.mkdir(tmp, 0o777)
            else:
                os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
            return tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name beside {path}")


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it onto ``path`` if the block succeeds.

    The temporary file is created empty with mode ``0o666 & ~umask``; the block may reopen
    or overwrite it. On success it is fsynced and renamed over ``path``; on error (or if
    the block raises) it is removed and the destination is left untouched.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _new_sibling(path)
    try:
        yield tmp
        _fsync_file(tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def write_bytes(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically."""
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        f.write(data)


def write_text(path: str | Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    write_bytes(path, text.encode("utf-8"))


def write_json(path: str | Path, obj: Any, *, indent: int | None = 2,
               allow_nan: bool = False) -> None:
    """Write ``obj`` as JSON (with a final newline) to ``path`` atomically.

    ``allow_nan=False`` (the default) refuses NaN/inf, which are not JSON; the error comes
    before anything is written.
    """
    write_text(path, json.dumps(obj, indent=indent, allow_nan=allow_nan) + "\n")


@contextmanager
def atomic_dir(path: str | Path) -> Iterator[Path]:
    """Yield a temporary folder beside ``path``; move it onto ``path`` if the block succeeds.

    The folder gets mode ``0o777 & ~umask``. On success every file in it is fsynced and an
    existing ``path`` is replaced (moved aside, deleted once the new one is in place). On
    error the temporary folder is removed.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _new_sibling(path, folder=True)
    try:
        yield tmp
        _fsync_tree(tmp)
        _replace_dir(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _fsync_dir(path.parent)


def remove_temporaries(folder: str | Path) -> None:
    """Delete temporary files and folders left in ``folder`` by an interrupted write."""
    folder = Path(folder)
    for p in folder.glob(f"{TMP_PREFIX}*") if folder.is_dir() else []:
        shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)


def _replace_dir(tmp: Path, path: Path) -> None:
    if not path.exists():
        os.replace(tmp, path)
        return
    if not path.is_dir():
        path.unlink()
        os.replace(tmp, path)
        return
    old = _new_sibling(path, folder=True, tag="old-")
    os.replace(path, old / path.name)
    os.replace(tmp, path)
    shutil.rmtree(old)


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_tree(root: Path) -> None:
    """fsync every file and folder under ``root`` (the contents of a folder about to appear)."""
    for folder, _dirs, files in os.walk(root):
        for name in files:
            _fsync_file(Path(folder) / name)
        _fsync_dir(Path(folder))


def _fsync_dir(path: Path) -> None:
    """Persist a rename (POSIX; a no-op where folders cannot be opened, e.g. Windows)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
