"""Never touch what tokengeo did not write: the one ``--out`` rule of every command.

``train``, ``flow``, ``similarity`` and ``reproduce`` write into ``--out`` only when it is

* new, or empty (a lock file and temporaries aside), or
* a previous output of the *same* command: it holds that command's marker file
  ``OUT/.tokengeo-output.json`` (``{"command": "flow", "outputs": [...], ...}``) and every
  file under it is one the marker lists (``outputs``: the names and patterns of what the
  command writes there).

A file the marker does not list (a user's ``notes.txt``, a ``report.md`` in a folder no
tokengeo command made) makes the folder refused with one line naming the file, even with
``--overwrite``, which replaces only a folder whose every file the marker lists (another
command's files there count when their sidecar vouches for them: :func:`vouched_files`); a command
that resumes (``reproduce``, ``train --resume``) never removes anything::

    check_output(out, "similarity", overwrite=...)   # the rule, writing nothing

Commands apply it through :func:`tokengeo.outfolder.output_folder`, which also locks the
folder, writes the marker and makes ``--overwrite`` a swap.

A symbolic link under ``--out`` is refused too: a write through it would land outside
(only where every write is an atomic rename, a reproduce output's ``cells/``, is a linked
file harmless: the rename replaces the link itself).
"""

from __future__ import annotations

import fnmatch
import functools
import os
import re
from pathlib import Path

from tokengeo.errors import ConfigError
from tokengeo.io import is_temporary, read_json, write_json

MARKER = ".tokengeo-output.json"
LOCK_NAME = ".tokengeo.lock"  # see tokengeo.runlock (not imported: runlock imports us)

# what each command writes under --out (fnmatch patterns of POSIX paths relative to it)
OUTPUTS: dict[str, tuple[str, ...]] = {
    "flow": ("flow.json", "flow.partial.json", "snapshots.png", "energy.png", "g2.png",
             "balance.png", "scaling.png", "sphere.gif"),
    "similarity": ("similarity.json", "mean_similarity.npy", "config.json",
                   "mean_similarity.png", "distance_profiles.png", "within_sentence.png"),
    "reproduce": ("report.md", "report.html", "report.json", "run.json", "cells/*", "figures/*"),
    "train": ("config.json", "metrics.jsonl", "metrics.csv", "summary.json", "curves.png",
              "checkpoints/*", "tensorboard/*", "wandb/*"),
}
# a reproduce run's training runs: runs/<suite>/.../<run>/ (a run folder may nest: retrofit
# names one after its corpus path). A file there is reproduce's only when its run folder is
# a training run's (it holds the train marker, or, from before markers, a checkpoints/
# folder) and the file is one a training cell writes: a user's config.json elsewhere under
# runs/ is a user's file (see _run_file).
RUNS = "runs"
RUN_FILES = (*OUTPUTS["train"], MARKER, LOCK_NAME, "converted.json", "curve.json")
# where every write is an atomic rename, which replaces a link to a file instead of writing
# through it (a damaged cell there is recomputed); links elsewhere are refused
ATOMIC_ONLY: dict[str, tuple[str, ...]] = {"reproduce": ("cells/",)}
# commands that write single files into folders they share (with the user, or with another
# command's output: ``probe RUN``, ``view --out RUN/page.html``), each file vouched for by a
# sidecar ``.<name>.tokengeo.json`` holding its SHA-256 (see vouched_files)
FILE_WRITERS = ("probe", "view")
SIDECAR = re.compile(r"\.(.+)\.tokengeo\.json")
# a run folder the library wrote before markers existed is recognised by these files
SIGNATURES: dict[str, str] = {"train": "config.json", "reproduce": "cells/*"}


def write_marker(folder: str | Path, command: str) -> None:
    from tokengeo import __version__

    write_json(Path(folder) / MARKER, {"command": command, "tokengeo": __version__,
                                       "outputs": list(OUTPUTS[command])})


def read_marker(folder: str | Path) -> dict | None:
    """The marker of ``folder`` (None: none, unreadable, or not a marker object)."""
    try:
        data = read_json(Path(folder) / MARKER, dict, limit=1 << 16)
    except (OSError, ValueError, ConfigError):
        return None
    if not isinstance(data.get("command"), str):
        return None
    return data


def marker_command(folder: str | Path) -> str | None:
    """The command named by ``folder``'s marker (None: no marker, or an unreadable one)."""
    data = read_marker(folder)
    return None if data is None else data["command"]


def is_own(folder: str | Path, rel: str) -> bool:
    """Whether ``rel`` (a path inside ``folder``) is tokengeo's own bookkeeping."""
    name = rel.split("/")[-1]
    return rel in (MARKER, LOCK_NAME) or is_temporary(name)


def output_files(folder: Path) -> list[str]:
    """Every file and link under ``folder`` (POSIX paths relative to it), bookkeeping aside;
    folders themselves are not listed (empty ones are harmless)."""
    found = []
    for root, dirs, files in os.walk(folder):
        base = Path(root).relative_to(folder)
        for name in files + [d for d in dirs if os.path.islink(os.path.join(root, d))]:
            rel = (base / name).as_posix()
            if not is_own(folder, rel):
                found.append(rel)
    return sorted(found)


def _listed(rel: str, patterns: tuple[str, ...] | list[str]) -> bool:
    """Whether ``rel`` matches one of ``patterns``: ``*`` stands for one path segment (or
    part of one), ``**/`` for any number of folders, a final ``/*`` for anything below that
    folder."""
    return any(_pattern(p).fullmatch(rel) is not None for p in patterns)


def _run_file(out: Path, rel: str, runs: dict[Path, bool]) -> bool:
    """Whether ``rel`` is a file a reproduce training cell wrote: under ``runs/<suite>/``,
    inside a training run folder (``runs``: that answer per folder, filled as it goes), and
    named like one of :data:`RUN_FILES` relative to it."""
    parts = rel.split("/")
    if parts[0] != RUNS:
        return False
    for i in range(3, len(parts)):  # runs/<suite>/<run>[/...]: the run folder is parts[:i]
        folder = out.joinpath(*parts[:i])
        if folder not in runs:
            runs[folder] = (marker_command(folder) == "train"
                            or (folder / "checkpoints").is_dir())
        if runs[folder] and _listed("/".join(parts[i:]), RUN_FILES):
            return True
    return False


@functools.lru_cache(maxsize=256)
def _pattern(pattern: str) -> re.Pattern:
    below = pattern.endswith("/*")
    body = pattern[:-2] if below else pattern
    regex = "(?:[^/]+/)*".join("[^/]*".join(re.escape(part) for part in piece.split("*"))
                               for piece in body.split("**/"))
    return re.compile(regex + ("/.+" if below else ""))


def check_output(out: str | Path, command: str, *, overwrite: bool = False,
                 resume: bool = False) -> list[str]:
    """Refuse ``out`` unless the ``--out`` rule allows ``command`` to write there; return the
    files an ``--overwrite`` would replace (``[]`` for a new or empty folder). Writes nothing.

    ``resume``: the command continues a previous output of its own (no ``--overwrite``
    needed, nothing removed).
    """
    out = Path(out).expanduser()
    if out.is_symlink() and not out.is_dir():
        raise ConfigError(f"--out {str(out)!r} is a symbolic link to a file; choose a folder")
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {str(out)!r} is a file, not a folder; choose a folder path")
    files = output_files(out) if out.is_dir() else []
    if not files:
        return []
    links = [f for f in files if (out / f).is_symlink() and not (
        not (out / f).is_dir() and f.startswith(ATOMIC_ONLY.get(command, ())))]
    if links:  # a write through it (a logger, a figure) would land outside --out
        raise ConfigError(f"--out {str(out)!r} holds {links[0]!r}, a symbolic link; tokengeo "
                          "does not write through links: remove it or choose another --out")
    marker = read_marker(out)
    found = None if marker is None else marker["command"]
    signature = SIGNATURES.get(command)
    legacy = (found is None and resume and signature is not None
              and any(fnmatch.fnmatchcase(f, signature) for f in files))
    if found != command and not legacy:
        what = "no tokengeo output" if found is None else f"the output of `tokengeo {found}`"
        if command == "train" and not resume:  # the one flag that continues a run there
            raise ConfigError(
                f"--out {str(out)!r} exists and is not empty; pass --resume to continue a "
                f"run there, or choose a new --out (it holds {what}, first file "
                f"{files[0]!r}, which tokengeo will not write over)")
        if overwrite:
            tail = " and --overwrite will not delete it"
        elif command in ("flow", "similarity"):
            tail = f" (--overwrite replaces only a previous `tokengeo {command}` output)"
        else:
            tail = ""
        raise ConfigError(
            f"--out {str(out)!r} holds {what} (no {MARKER} of `tokengeo {command}`; "
            f"first file {files[0]!r}), so tokengeo will not write there{tail}; choose "
            "another --out or empty it yourself")
    runs: dict[Path, bool] = {}
    others = vouched_files(out, files)  # another command's files, unchanged: never foreign
    foreign = [f for f in files if not _listed(f, OUTPUTS[command]) and f not in others
               and not (command == "reproduce" and _run_file(out, f, runs))]
    if foreign:
        more = f" and {len(foreign) - 1} more" if len(foreign) > 1 else ""
        raise ConfigError(
            f"--out {str(out)!r} holds {foreign[0]!r}{more}, which `tokengeo {command}` did "
            "not write, so tokengeo will not write there nor delete it; move it away or "
            "choose another --out")
    if resume:
        return []
    if not overwrite:
        how = ("--resume to continue it, --overwrite to replace it" if command == "train"
               else "--overwrite to replace it")
        raise ConfigError(f"--out {str(out)!r} exists and is not empty (a previous "
                          f"`tokengeo {command}` output); pass {how}, or choose a new --out")
    return files


def remove_lone_marker(folder: Path) -> None:
    """Remove a marker that is all a folder holds (a run refused after claiming it)."""
    if (folder / MARKER).is_file() and not output_files(folder):
        entries = [p.name for p in folder.iterdir() if p.name != LOCK_NAME]
        if entries == [MARKER]:
            (folder / MARKER).unlink(missing_ok=True)


# ---- single files written beside a user's own (view's page): a sidecar marker -----------------

def file_marker(path: str | Path) -> Path:
    """The sidecar marker of a file tokengeo writes into a folder it does not own (``view``'s
    page): ``.<name>.tokengeo.json`` beside it."""
    path = Path(path)
    return path.with_name(f".{path.name}.tokengeo.json")


def file_digest(path: str | Path) -> str | None:
    """The SHA-256 of the regular file ``path`` (None: missing, a link or not a regular file)."""
    import hashlib

    from tokengeo.io import open_binary

    path = Path(path)
    if path.is_symlink():
        return None
    try:
        with open_binary(path) as f:
            return hashlib.file_digest(f, "sha256").hexdigest()
    except (OSError, ConfigError):
        return None


def read_file_marker(path: str | Path, command: str) -> dict[str, list[str]]:
    """``{relative name: [accepted SHA-256, ...]}`` of the files ``command`` wrote at ``path``
    (and beside it), from its sidecar; ``{}`` when there is none or it is not ours."""
    try:
        data = read_json(file_marker(path), dict, limit=1 << 22)
    except (OSError, ValueError, ConfigError):
        return {}
    files = data.get("files")
    if data.get("command") != command or not isinstance(files, dict):
        return {}
    return {k: [d for d in v if isinstance(d, str)] for k, v in files.items()
            if isinstance(k, str) and isinstance(v, list)}


def write_file_marker(path: str | Path, command: str, files: dict[str, list[str]]) -> None:
    """Record ``files`` (relative name -> accepted SHA-256s) as written by ``command``."""
    from tokengeo import __version__

    write_json(file_marker(path), {"command": command, "tokengeo": __version__,
                                   "files": files}, indent=None)


def vouched_files(out: Path, files: list[str]) -> set[str]:
    """The files among ``files`` (under ``out``) that a command of :data:`FILE_WRITERS`
    wrote and nobody changed since: its sidecar beside them lists each with its current
    SHA-256 (a page's ``<page>_files/`` too), and the sidecars that vouch for at least one
    of them. A file of the user's, or an edited copy of ours, is not among them."""
    vouched: set[str] = set()
    for rel in files:
        path = out / rel
        if SIDECAR.fullmatch(path.name) is None:
            continue
        for writer in FILE_WRITERS:
            recorded = read_file_marker(path.parent / SIDECAR.fullmatch(path.name)[1], writer)
            base = Path(rel).parent
            ok = {(base / k).as_posix() for k in recorded
                  if owned_file(path.parent / k, k, writer, recorded)}
            if ok:
                vouched |= {rel, *ok}
    return vouched


def check_own_file(path: str | Path, command: str, what: str) -> Path:
    """Refuse to write ``path`` (one file tokengeo puts into a folder it shares with the
    user: ``RUN/probe.json``) unless it is new, or is ``command``'s own unchanged output
    (its sidecar records its SHA-256); a folder, a link or a FIFO there is refused too.
    ``what`` names the file in the message. Writes nothing."""
    from tokengeo.checks import check_output_file

    path = Path(path)
    if path.is_symlink() or (path.exists() and not path.is_file()):
        kind = ("a symbolic link" if path.is_symlink() else
                "a folder" if path.is_dir() else "not a regular file")
        raise ConfigError(f"{what} {str(path)!r} is {kind}; tokengeo writes a file there: "
                          "move it away")
    check_output_file(what, path)
    if path.exists() and not owned_file(path, path.name, command,
                                        read_file_marker(path, command)):
        raise ConfigError(f"{what} {str(path)!r} exists and `tokengeo {command}` did not "
                          "write it (or it changed since), so tokengeo will not replace it; "
                          "move it away")
    return path


def write_own_file(path: str | Path, command: str, what: str, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically under the rule of :func:`check_own_file`
    (checked again at the rename) and record it in its sidecar."""
    import hashlib

    from tokengeo.io import write_bytes

    path = Path(path)
    write_file_marker(path, command, {path.name: sorted(
        {*read_file_marker(path, command).get(path.name, []),
         hashlib.sha256(data).hexdigest()})})
    write_bytes(path, data, check=lambda: check_own_file(path, command, what))
    write_file_marker(path, command, {path.name: [hashlib.sha256(data).hexdigest()]})


def owned_file(path: str | Path, rel: str, command: str,
               recorded: dict[str, list[str]] | None = None) -> bool:
    """Whether the file at ``path`` (named ``rel`` in the sidecar of the page it belongs
    to) is one ``command`` wrote and nobody changed since: its sidecar lists ``rel`` with the
    file's current SHA-256. A user's file cannot pass by accident (a tag inside it does not
    count), and neither can an edited copy of ours."""
    digest = file_digest(path)
    return digest is not None and digest in (recorded or {}).get(rel, [])
