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

Every file is created with ``O_EXCL | O_NOFOLLOW`` (a symbolic link planted at the temporary
name is never followed) and renamed over the destination, which replaces a link there
instead of writing through it. Reads of small files (configs, sidecars, cells, markers, TOML)
go through :func:`read_small` / :func:`read_json` / :func:`read_toml`: opened ``O_NONBLOCK``
(a FIFO or a device never blocks), refused unless a regular file, bounded in size, and JSON
checked for its top-level type::

    read_json(path, dict, limit=1 << 20)  # ConfigError naming the file on any problem

Every JSON tokengeo reads (a file, a line of ``metrics.jsonl``, a sidecar) goes through
:func:`parse_json`: nested at most :data:`MAX_JSON_DEPTH` deep (checked on the text, before
the parser recurses), no ``NaN``/``Infinity`` (not JSON; Python's parser would accept them),
bounded in size. Writes that must not replace a file the user wrote meanwhile pass
``check=`` to :func:`atomic_path`: it runs again just before the rename.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

from tokengeo.errors import ConfigError

TMP_PREFIX = ".tmp-"  # temporary siblings start with this (see remove_temporaries)
# the whole name of a temporary tokengeo made: .tmp-[tag]<name>-<8 hex digits>; a user's
# ".tmp-notes.txt" does not match, so it is never taken for ours nor deleted
TMP_NAME = re.compile(r"\.tmp-.+-[0-9a-f]{8}")
NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)  # POSIX; 0 where it does not exist
NONBLOCK = getattr(os, "O_NONBLOCK", 0)
SMALL_FILE = 64 << 20  # the default bound of read_small: configs, sidecars, cells
MAX_JSON_DEPTH = 64  # no file tokengeo writes nests deeper than a handful of levels
_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)


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
                flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW
                os.close(os.open(tmp, flags, 0o666))
            return tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name beside {path}")


@contextmanager
def atomic_path(path: str | Path, *, check: Callable[[], None] | None = None
                ) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it onto ``path`` if the block succeeds.

    The temporary file is created empty with mode ``0o666 & ~umask``; the block may reopen
    or overwrite it. On success it is fsynced and renamed over ``path``; on error (or if
    the block raises) it is removed and the destination is left untouched. ``check`` (which
    raises to refuse) runs right before the rename: the ownership of ``path`` is decided at
    the write, not seconds earlier.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _new_sibling(path)
    try:
        yield tmp
        _fsync_file(tmp)
        if check is not None:
            check()
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def write_bytes(path: str | Path, data: bytes, *,
                check: Callable[[], None] | None = None) -> None:
    """Write ``data`` to ``path`` atomically (``check``: see :func:`atomic_path`)."""
    with atomic_path(path, check=check) as tmp:
        fd = os.open(tmp, os.O_WRONLY | os.O_TRUNC | NOFOLLOW)
        with os.fdopen(fd, "wb") as f:
            f.write(data)


def write_text(path: str | Path, text: str, *,
               check: Callable[[], None] | None = None) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically (``check``: see :func:`atomic_path`)."""
    write_bytes(path, text.encode("utf-8"), check=check)


def write_json(path: str | Path, obj: Any, *, indent: int | None = 2,
               allow_nan: bool = False) -> None:
    """Write ``obj`` as JSON (with a final newline) to ``path`` atomically.

    ``allow_nan=False`` (the default) refuses NaN/inf, which are not JSON; the error comes
    before anything is written.
    """
    write_text(path, json.dumps(obj, indent=indent, allow_nan=allow_nan) + "\n")


@contextmanager
def atomic_dir(path: str | Path, *, check: Callable[[], None] | None = None
               ) -> Iterator[Path]:
    """Yield a temporary folder beside ``path``; move it onto ``path`` if the block succeeds.

    The folder gets mode ``0o777 & ~umask``. On success every file in it is fsynced and an
    existing ``path`` is replaced (moved aside, deleted once the new one is in place). On
    error the temporary folder is removed. ``check`` runs right before the replacement, as
    in :func:`atomic_path`.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _new_sibling(path, folder=True)
    try:
        yield tmp
        _fsync_tree(tmp)
        if check is not None:
            check()
        _replace_dir(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _fsync_dir(path.parent)


def current_umask() -> int:
    """The process umask, read without changing it where the kernel reports it (Linux),
    else by setting and restoring it."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def follow_umask(path: str | Path, *, folder: bool = False) -> None:
    """Give ``path`` the mode an ordinary ``open``/``mkdir`` would (``0o666`` / ``0o777``
    less the umask): writers such as safetensors' ``save_file`` create files 0600."""
    os.chmod(path, (0o777 if folder else 0o666) & ~current_umask())


def append_text(path: str | Path, text: str) -> None:
    """Append ``text`` to ``path`` (created if missing), never through a symbolic link."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | NOFOLLOW | NONBLOCK, 0o666)
    try:
        _require_regular(fd, Path(path))
        os.write(fd, text.encode("utf-8"))
    finally:
        os.close(fd)


def open_regular(path: str | Path) -> int:
    """A read-only descriptor of ``path``, opened without blocking (a FIFO or device never
    stalls the open) and refused with ConfigError unless it is a regular file."""
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY | NONBLOCK)
    except OSError as exc:
        raise ConfigError(f"cannot read {str(path)!r} ({exc.strerror or exc})") from None
    try:
        _require_regular(fd, path)
    except BaseException:
        os.close(fd)
        raise
    if NONBLOCK:  # back to ordinary blocking reads of a regular file
        os.set_blocking(fd, True)
    return fd


def open_binary(path: str | Path) -> BinaryIO:
    """``path`` opened ``"rb"`` through :func:`open_regular` (never blocks; a FIFO, device
    or folder is refused with ConfigError): for readers that want a file object (images,
    archives, safetensors headers)."""
    return os.fdopen(open_regular(path), "rb")


def read_text(path: str | Path, what: str, limit: int = SMALL_FILE) -> str:
    """The UTF-8 text of the regular file ``path`` (``what`` names it in errors: a flag and
    value, say), at most ``limit`` bytes; ConfigError otherwise."""
    data = read_small(path, limit)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{what} is not UTF-8 text (byte {exc.start}); give a text file"
                          ) from None


def read_toml(path: str | Path, what: str, limit: int = 1 << 20) -> dict[str, Any]:
    """The tables of the TOML file ``path`` (``what`` names it in errors: ``config file
    'x.toml'``, ``suite config ...``), read as a bounded regular file (:func:`read_text`: a
    FIFO never blocks, a folder or a file over ``limit`` bytes is refused); ConfigError
    with one line on any problem: the one TOML reader of tokengeo."""
    import tomllib

    path = Path(path)
    if path.is_dir():
        raise ConfigError(f"{what} is a folder; give a TOML file")
    if not path.exists() and not path.is_symlink():
        raise ConfigError(f"{what} does not exist; give a TOML file")
    text = read_text(path, what, limit)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{what} is not valid TOML: {exc}") from None


def _require_regular(fd: int, path: Path) -> None:
    import stat

    if not stat.S_ISREG(os.fstat(fd).st_mode):
        raise ConfigError(f"{str(path)!r} is not a regular file (a FIFO, device or socket); "
                          "replace it with a file")


def read_small(path: str | Path, limit: int = SMALL_FILE) -> bytes:
    """The bytes of the regular file ``path``, refused (ConfigError) when over ``limit``."""
    fd = open_regular(path)
    try:
        size = os.fstat(fd).st_size
        if size > limit:
            raise ConfigError(f"{str(path)!r} holds {size:,} bytes, more than the {limit:,} "
                              "such a file can hold; it is not what tokengeo wrote there")
        with os.fdopen(os.dup(fd), "rb") as f:
            data = f.read(limit + 1)
    finally:
        os.close(fd)
    if len(data) > limit:  # it grew meanwhile
        raise ConfigError(f"{str(path)!r} holds more than {limit:,} bytes")
    return data


def read_json(path: str | Path, kind: type | tuple[type, ...] = dict, *,
              limit: int = SMALL_FILE, allow_nan: bool = False) -> Any:
    """The JSON value in ``path``, which must be ``kind`` (e.g. ``dict``); ConfigError naming
    the file when it is unreadable, too large, not UTF-8 JSON (nested too deep, NaN or
    Infinity in it: see :func:`parse_json`), or of another type."""
    return parse_json(read_small(path, limit), repr(str(path)), kind, limit=limit,
                      allow_nan=allow_nan)


def parse_json(data: bytes | str, what: str, kind: type | tuple[type, ...] | None = None, *,
               limit: int = SMALL_FILE, allow_nan: bool = False) -> Any:
    """The JSON value of ``data``; ConfigError naming ``what`` (a file, a line) when it is
    longer than ``limit`` bytes, nested deeper than :data:`MAX_JSON_DEPTH`, holds NaN or
    Infinity (unless ``allow_nan``: files tokengeo writes with ``allow_nan=True``, such as
    cells and metrics, where a diverged run's NaN is a result), is not UTF-8 JSON, or (with
    ``kind``) is not of that type."""
    raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    if len(raw) > limit:
        raise ConfigError(f"{what} holds {len(raw):,} bytes of JSON, more than the {limit:,} "
                          "it can hold; it is not what tokengeo wrote there")
    depth = json_depth(raw)
    if depth > MAX_JSON_DEPTH:
        raise ConfigError(f"{what} nests JSON {depth} levels deep (at most {MAX_JSON_DEPTH}); "
                          "it is not what tokengeo wrote there: remove or regenerate it")
    try:
        value = json.loads(raw.decode("utf-8"),
                           parse_constant=None if allow_nan else _no_constant)
    except UnicodeDecodeError:
        raise ConfigError(f"{what} is not UTF-8 text") from None
    except _NonFinite as exc:
        raise ConfigError(f"{what} holds {exc.args[0]}, which is not a JSON number; "
                          "regenerate the file (tokengeo writes null there)") from None
    except (ValueError, RecursionError) as exc:
        raise ConfigError(f"{what} is not valid JSON ({str(exc)[:80]})") from None
    kinds = kind if isinstance(kind, tuple) else (kind,) if kind is not None else None
    if kinds is not None and not isinstance(value, kinds):
        names = " or ".join({dict: "a JSON object", list: "a JSON list"}.get(
            k, f"a JSON {k.__name__}") for k in kinds)
        raise ConfigError(f"{what} must hold {names}, not "
                          f"{type(value).__name__} {_short(value)}")
    return value


class _NonFinite(ValueError):
    pass


def _no_constant(name: str):
    raise _NonFinite(name)


def json_depth(raw: bytes) -> int:
    """The deepest nesting of ``[`` / ``{`` in the JSON text ``raw`` (strings skipped), found
    without recursion, so a hostile file cannot exhaust the stack."""
    import numpy as np

    if raw.count(b"[") + raw.count(b"{") <= MAX_JSON_DEPTH:
        return 0  # too few brackets to nest deeper (the common case: no scan)
    bare = np.frombuffer(_JSON_STRING.sub(b'""', raw), dtype=np.uint8)
    steps = (np.isin(bare, (ord("["), ord("{"))).astype(np.int64)
             - np.isin(bare, (ord("]"), ord("}"))).astype(np.int64))
    return int(np.cumsum(steps).max(initial=0))


def _short(value: Any) -> str:
    text = json.dumps(value)[:200] if not isinstance(value, list | dict) else \
        f"of {len(value)} items"
    return text if len(text) <= 40 else text[:37] + "..."


def member_path(root: str | Path, name: str) -> Path | None:
    """Where an archive member ``name`` goes under ``root``, or None when it would land
    outside (an absolute name, ``..``, a drive, a path through a link): every member of an
    extracted archive is resolved under its target, never trusted."""
    root = Path(root).resolve()
    if not name or "\0" in name or Path(name).is_absolute() or name.startswith(("/", "\\")):
        return None
    target = (root / name).resolve()
    return target if target != root and target.is_relative_to(root) else None


def is_temporary(name: str) -> bool:
    """Whether the file name ``name`` is one of tokengeo's temporaries (see :data:`TMP_NAME`)."""
    return TMP_NAME.fullmatch(name) is not None


def destination_of(path: str | Path) -> str:
    """The path a temporary sibling stands for (``.tmp-probe.json-1a2b3c4d`` ->
    ``probe.json`` in the same folder), or ``path`` itself: what a message names."""
    path = Path(path)
    if not is_temporary(path.name):
        return str(path)
    name = path.name[len(TMP_PREFIX):].rsplit("-", 1)[0]
    name = name.removeprefix("old-")  # a folder moved aside while replaced
    return str(path.with_name(name))


def remove_temporaries(folder: str | Path) -> None:
    """Delete temporary files and folders left in ``folder`` by an interrupted write (only
    names tokengeo gives its temporaries: a user's ``.tmp-notes`` stays)."""
    folder = Path(folder)
    for p in folder.glob(f"{TMP_PREFIX}*") if folder.is_dir() else []:
        if not is_temporary(p.name):
            continue
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
