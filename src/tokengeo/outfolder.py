"""One door for every output folder: check, lock, claim, write, swap, release.

Every command that writes a folder (``flow``, ``train``, ``similarity``, ``reproduce``)
enters it through :func:`output_folder`, in this one order::

    with output_folder(out, "flow", overwrite=args.overwrite) as work:
        ...write into work...          # out itself, or (overwrite) a folder beside it

1. a folder that can be written (:func:`tokengeo.checks.check_output_folder`);
2. the run lock (:class:`tokengeo.runlock.RunLock`): a folder another run holds is named
   as in use, whatever it holds;
3. the ``--out`` rule (:func:`tokengeo.outmarker.check_output`): new or empty, or a
   previous output of the same command (``--overwrite`` / ``resume``);
4. **overwrite is a swap**: when ``overwrite`` replaces a previous output, the block writes
   into a new folder beside ``out`` (marked, the lock carried into it) that replaces
   ``out`` only when the block ends without error, and only if ``out`` still holds nothing
   but that previous output; Ctrl-C, SIGTERM or an error leave the previous output as it
   was and remove the new folder. Otherwise the block writes into ``out`` itself (marked);
5. on the way out the lock is released, and a folder the claim created is removed again if
   the block left nothing in it (a run refused after claiming leaves nothing behind).

``resume`` continues a previous output of the same command in place (nothing removed).
:func:`check_folder` runs steps 1-3 and lets go, for a command that checks its folder
before slow work (a model to load) and claims it after.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tokengeo.checks import check_output_folder
from tokengeo.io import atomic_dir
from tokengeo.outmarker import check_output, write_marker
from tokengeo.runlock import RunLock


def check_folder(out: str | Path, command: str, *, overwrite: bool = False,
                 resume: bool = False) -> Path:
    """Every check of :func:`output_folder`, before the work starts (a folder in use by
    another run is named as such); leaves nothing behind."""
    with _locked(out, command, resume) as (out, _lock):
        check_output(out, command, overwrite=overwrite, resume=resume)
    return out


@contextmanager
def _locked(out: str | Path, command: str, resume: bool) -> Iterator[tuple[Path, RunLock]]:
    """``out`` checked writable, then locked for this block."""
    out = check_output_folder("--out", Path(out).expanduser())
    with RunLock(out, f"tokengeo {command}" + (" --resume" if resume else "")) as lock:
        yield out, lock


@contextmanager
def output_folder(out: str | Path, command: str, *, overwrite: bool = False,
                  resume: bool = False, aside: bool = False) -> Iterator[Path]:
    """Claim ``out`` for ``command`` (see the module docstring); yield the folder to write.
    ``aside``: build even a new output beside ``out`` (it appears whole or not at all)."""
    with _locked(out, command, resume) as (out, lock):
        previous = check_output(out, command, overwrite=overwrite, resume=resume)
        if not previous and not (aside and not resume):
            out.mkdir(parents=True, exist_ok=True)
            write_marker(out, command)
            yield out
            return
        with atomic_dir(out, check=lambda: check_output(out, command, overwrite=True)) as tmp:
            lock.carry_into(tmp)  # the lock stays held across the rename
            write_marker(tmp, command)
            yield tmp
