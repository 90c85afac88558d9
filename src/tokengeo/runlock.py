"""One run per output folder: an exclusive lock on ``OUT/.tokengeo.lock``.

``train`` (also ``--resume``), ``flow``, ``similarity`` and ``reproduce`` take the lock on
their ``--out`` before they write anything there; a second run into the same folder exits
with status 2 naming the holder (pid, host, command, start time)::

    lock_run_folder(out, "tokengeo flow")   # held until release_run_folders() / exit
    with RunLock(out, "my script"):         # or scoped, from Python
        ...

The lock is ``fcntl.flock`` on the file: the kernel drops it when its process dies, also by
SIGKILL, so a lock left by a crashed run never blocks the next one (the stale file is simply
locked again). The lock file is opened ``O_NOFOLLOW | O_NONBLOCK`` and must be a regular
file: a ``.tokengeo.lock`` that is a symbolic link or a hard link (to a user's file, which a
truncate would destroy: the link count is checked once the file is locked, before it is
written), a FIFO or a device is refused with one line, never opened through. On release
the lock file is removed, and so are the folders the lock itself
created if they are still empty, so a run refused after locking (a bad data set, say)
leaves nothing behind. The holder line is written into the lock file in place, not through
:mod:`tokengeo.io`: an atomic rename would replace the locked inode.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import sys
import time
from pathlib import Path
from typing import Any

from tokengeo.errors import ConfigError
from tokengeo.io import NOFOLLOW, NONBLOCK, parse_json, read_small

try:  # POSIX; elsewhere runs are not locked
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

LOCK_NAME = ".tokengeo.lock"
_HELD: list[RunLock] = []  # taken by lock_run_folder, released by release_run_folders


def folder_entries(folder: str | Path) -> list[Path]:
    """The entries of ``folder`` other than a lock file (``[]`` for a missing folder)."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    from tokengeo.outmarker import MARKER

    return [p for p in folder.iterdir() if p.name not in (LOCK_NAME, MARKER)]


class RunLock:
    """An exclusive lock on ``folder`` for this process (a context manager)."""

    def __init__(self, folder: str | Path, command: str) -> None:
        self.folder = Path(folder).expanduser()
        self.path = self.folder / LOCK_NAME
        self.command = command
        self._fd: int | None = None
        self._created: list[Path] = []  # folders made for the lock, outermost first

    def acquire(self) -> RunLock:
        if self._fd is not None or fcntl is None:
            return self
        self._created = _make_folders(self.folder)
        try:
            self._fd = self._lock()
        except BaseException:
            _remove_empty(self._created)
            raise
        holder = {"pid": os.getpid(), "host": socket.gethostname(), "command": self.command,
                  "argv": sys.argv, "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, (json.dumps(holder) + "\n").encode(), 0)
        return self

    def _lock(self) -> int:
        """An open descriptor of the lock file, flock-ed; ConfigError naming a live holder."""
        while True:
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT | NOFOLLOW | NONBLOCK, 0o666)
            except OSError as exc:
                if self.path.is_symlink():
                    raise ConfigError(f"{str(self.path)!r} is a symbolic link; tokengeo never "
                                      "writes through one: remove it") from None
                raise ConfigError(f"cannot lock --out {str(self.folder)!r}: {exc.strerror}; "
                                  "choose a folder you can write to") from None
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                os.close(fd)
                raise ConfigError(f"{str(self.path)!r} is not a regular file (a FIFO, device "
                                  "or socket); remove it")
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                raise ConfigError(f"--out {str(self.folder)!r} is in use by {self._holder()}; "
                                  "wait for that run to end or choose another --out") from None
            if os.fstat(fd).st_nlink > 1:
                self._remove_dead_builds(fd)
            if os.fstat(fd).st_nlink > 1:  # a hard link to a user's file: never truncate it
                os.close(fd)
                raise ConfigError(f"{str(self.path)!r} is a hard link to another file (link "
                                  "count > 1), which the lock would overwrite; remove it")
            if _same_file(fd, self.path):  # else the holder removed it meanwhile: retry
                return fd
            os.close(fd)

    def _remove_dead_builds(self, fd: int) -> None:
        """Delete the outputs a killed run was building beside the folder: temporary siblings
        ``.tmp-<name>-<hex>`` (tokengeo's own names, :func:`tokengeo.io.atomic_dir`) whose
        lock file is a hard link to ours (:meth:`carry_into`). This process holds the flock
        on that file, so no live run is building them; unfinished, they were never an
        output. Another link (a user's) is left alone, and the lock is then refused."""
        import glob
        import shutil

        from tokengeo.io import TMP_PREFIX, is_temporary

        ours = os.fstat(fd)
        pattern = f"{TMP_PREFIX}{glob.escape(self.folder.name)}-*"
        for tmp in sorted(self.folder.parent.glob(pattern)):
            if not is_temporary(tmp.name) or tmp.is_symlink() or not tmp.is_dir():
                continue
            try:
                link = os.lstat(tmp / LOCK_NAME)
            except OSError:
                continue
            if (link.st_dev, link.st_ino) == (ours.st_dev, ours.st_ino):
                shutil.rmtree(tmp, ignore_errors=True)
                print(f"tokengeo: removed {tmp.name}, the unfinished output of a run of "
                      f"{str(self.folder)!r} that was killed", file=sys.stderr)

    def _holder(self) -> str:
        try:
            h: dict[str, Any] = parse_json(read_small(self.path, 1 << 16), "lock", dict)
            return (f"pid {h['pid']} on {h['host']} ({h['command']}, started {h['started']})")
        except (OSError, ValueError, KeyError, TypeError, ConfigError):
            return "another tokengeo run (it is starting)"

    def release(self) -> None:
        if self._fd is None:
            return
        if _same_file(self._fd, self.path):  # unlink while still holding it: no race
            self.path.unlink()
        os.close(self._fd)  # drops the flock
        self._fd = None
        _remove_empty(self._created)
        self._created = []

    def carry_into(self, folder: str | Path) -> None:
        """Hard-link the lock file into ``folder``, a temporary folder about to replace ours
        (see :func:`tokengeo.io.atomic_dir`), so the lock holds across the rename."""
        if self._fd is not None:
            os.link(self.path, Path(folder) / LOCK_NAME)

    @property
    def held(self) -> bool:
        return self._fd is not None

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def lock_run_folder(folder: str | Path, command: str) -> RunLock:
    """Lock ``folder`` until :func:`release_run_folders` (the CLI calls it on exit)."""
    lock = RunLock(folder, command).acquire()
    _HELD.append(lock)
    return lock


def release_run_folders() -> None:
    while _HELD:
        _HELD.pop().release()


def _make_folders(folder: Path) -> list[Path]:
    """Create ``folder`` and missing parents; return those created, outermost first."""
    missing = []
    p = folder
    while not p.exists() and p != p.parent:
        missing.append(p)
        p = p.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise ConfigError(f"--out {str(folder)!r} is a file, not a folder; "
                          "choose a folder path") from None
    except OSError as exc:
        raise ConfigError(f"cannot create --out {str(folder)!r}: {exc.strerror}; "
                          "choose a folder you can write to") from None
    return missing[::-1]


def _remove_empty(created: list[Path]) -> None:
    from tokengeo.outmarker import remove_lone_marker

    for folder in reversed(created):  # innermost first
        remove_lone_marker(folder)  # a run refused after claiming its --out leaves nothing
        try:
            folder.rmdir()
        except OSError:  # not empty (someone wrote there) or gone
            return


def _same_file(fd: int, path: Path) -> bool:
    try:
        a, b = os.fstat(fd), os.stat(path)
    except OSError:
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)
