"""Never delete what tokengeo did not write: an output marker and the overwrite check.

A command that may replace its whole ``--out`` (``similarity --overwrite``) writes a marker
file ``OUT/.tokengeo-output.json`` (``{"command": "similarity", ...}``) with its results, and
replaces only a folder that holds its own marker: a mistyped ``--out`` naming an unrelated,
non-empty folder is refused (exit 2) and its files survive::

    check_replaceable(out, "similarity", overwrite=args.overwrite)   # before any work
    write_marker(tmp, "similarity")                                   # with the results
"""

from __future__ import annotations

import json
from pathlib import Path

from tokengeo.errors import ConfigError
from tokengeo.io import write_json
from tokengeo.runlock import folder_entries

MARKER = ".tokengeo-output.json"


def write_marker(folder: str | Path, command: str) -> None:
    from tokengeo import __version__

    write_json(Path(folder) / MARKER, {"command": command, "tokengeo": __version__})


def marker_command(folder: str | Path) -> str | None:
    """The command named by ``folder``'s marker (None: no marker, or an unreadable one)."""
    try:
        data = json.loads((Path(folder) / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    command = data.get("command") if isinstance(data, dict) else None
    return command if isinstance(command, str) else None


def check_replaceable(out: str | Path, command: str, *, overwrite: bool) -> None:
    """Refuse an ``--out`` that is a file, or non-empty without ``overwrite``, or non-empty
    without a marker of a previous ``tokengeo <command>`` output (a lock file is ignored)."""
    out = Path(out).expanduser()
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {str(out)!r} is a file, not a folder; choose a folder path")
    if not folder_entries(out):
        return
    if not overwrite:
        raise ConfigError(f"--out {str(out)!r} exists and is not empty; pass --overwrite to "
                          "replace a previous output, or choose a new --out")
    found = marker_command(out)
    if found != command:
        what = "no tokengeo output" if found is None else f"the output of `tokengeo {found}`"
        raise ConfigError(
            f"--out {str(out)!r} holds {what} (no {MARKER} of `tokengeo {command}`), so "
            "--overwrite will not delete it; choose another --out or empty it yourself"
        )
