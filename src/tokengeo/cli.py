"""The ``tokengeo`` command line: parse, then hand over to the library.

Each sub-command lives in ``tokengeo.commands.<name>`` and provides
``add_arguments(parser)`` and ``run(args) -> int``; modules are imported only when
their command runs, so ``tokengeo --help`` stays fast. Bad input
(:class:`~tokengeo.errors.TokengeoError`, or arguments argparse rejects) prints one line and
exits with status 2; Ctrl-C prints one line and exits with status 130, SIGTERM likewise with
status 143 (the atomic writer of :mod:`tokengeo.io` removes its temporary files on the way
out, worker processes are stopped). A full disk or a permission error names the path and
exits 2. Under ``torchrun`` only rank 0 prints these lines.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import os
import signal
import sys

from tokengeo import __version__
from tokengeo.commands.flags import DefaultsHelp
from tokengeo.errors import Terminated, TokengeoError
from tokengeo.runlock import release_run_folders

# name -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "list-models": ("tokengeo.commands.list_models", "list the registered model variants"),
    "bench": ("tokengeo.commands.bench", "run one benchmark, or all of them, and print it"),
    "train": ("tokengeo.commands.train", "train a model on a dataset (or --resume a run)"),
    "reproduce": ("tokengeo.commands.reproduce", "check the papers' claims and write a report"),
    "report": ("tokengeo.commands.report", "a run's tally, and the docs generated from its "
               "report.json (--write-docs, --check-docs)"),
    "probe": ("tokengeo.commands.probe", "token-geometry metrics of a trained run"),
    "flow": ("tokengeo.commands.flow", "simulate tokens on the sphere under multi-head attention"),
    "similarity": ("tokengeo.commands.similarity", "head-output similarity analysis of an encoder"),
    "view": ("tokengeo.commands.view", "an offline interactive HTML explorer of heads and runs"),
}


# errors of the environment, not bugs: one line naming the path, exit 2
ENVIRONMENT_ERRNOS = {errno.ENOSPC, errno.EFBIG, errno.EDQUOT, errno.EACCES, errno.EPERM,
                      errno.EROFS, errno.ENAMETOOLONG}


def main(argv: list[str] | None = None) -> int:
    """Run one command. Called in-process (``argv`` given) it restores the caller's SIGINT
    handler; run as the program (``argv`` None) it leaves SIGINT ignored once a Ctrl-C was
    handled, so that nothing after the "interrupted" line can turn exit status 130 into a
    death by signal."""
    in_process = argv is not None
    argv = sys.argv[1:] if argv is None else argv
    command = argv[0] if argv and argv[0] in COMMANDS else None
    previous = _on_sigterm()
    sigint = signal.getsignal(signal.SIGINT)
    try:
        try:
            return _main(argv, command)
        except KeyboardInterrupt as exc:  # a second Ctrl-C while the first was handled
            _ignore_sigint()
            terminated = isinstance(exc, Terminated)
            _say(command, "terminated" if terminated else "interrupted")
            return 143 if terminated else 130
    finally:
        _restore_sigterm(previous)
        if in_process or signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
            _restore_sigint(sigint)


def _main(argv: list[str], command: str | None) -> int:
    try:
        try:
            parser = build_parser_for(argv)
            args = parser.parse_args(argv)
            return int(importlib.import_module(args._module).run(args) or 0)
        finally:
            release_run_folders()  # the --out locks the command took
    except TokengeoError as exc:
        _say(command, f"error: {exc}")
        return 2
    except KeyboardInterrupt as exc:  # also Terminated (SIGTERM)
        _ignore_sigint()  # a second Ctrl-C now would only interrupt this message
        terminated = isinstance(exc, Terminated)
        _say(command, "terminated" if terminated else "interrupted")
        return 143 if terminated else 130
    except OSError as exc:
        if exc.errno not in ENVIRONMENT_ERRNOS:
            raise
        _say(command, f"error: {environment_message(exc)}")
        return 2


def environment_message(exc: OSError) -> str:
    """One line for an error of the environment: the user's path (never a temporary
    sibling's name) and the fix that fits the cause."""
    from tokengeo.io import destination_of

    where = f"{destination_of(exc.filename)}: " if exc.filename else ""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        fix = "free disk space, or choose a path on another disk"
    elif exc.errno == errno.ENAMETOOLONG:
        fix = "choose a shorter path"
    else:  # EACCES, EPERM, EROFS
        fix = "choose a path you can write to"
    return f"{where}{exc.strerror}; {fix}"


def _ignore_sigint() -> None:
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # not the main thread
        pass


def _restore_sigint(previous) -> None:
    if previous is None:
        return
    try:
        signal.signal(signal.SIGINT, previous)
    except (ValueError, TypeError):
        pass


def _on_sigterm():
    """Turn SIGTERM into :class:`Terminated` (main thread only; else leave it alone)."""
    def handler(signum, frame):
        raise Terminated()

    try:
        return signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread
        return None


def _restore_sigterm(previous) -> None:
    if previous is not None:
        try:
            signal.signal(signal.SIGTERM, previous)
        except ValueError:
            pass


def _say(command: str | None, text: str) -> None:
    if os.environ.get("RANK", "0") not in ("", "0"):  # torchrun: rank 0 speaks for all
        return
    prog = f"tokengeo {command}" if command else "tokengeo"
    print(f"{prog}: {text}", file=sys.stderr, flush=True)


class OneLineParser(argparse.ArgumentParser):
    """argparse whose errors are one line (no usage block) and exit 2, like every other
    bad input; ``--help`` shows the usage."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser_for(argv: list[str]) -> argparse.ArgumentParser:
    """Parser with the arguments of the requested command (all commands for --help)."""
    parser = OneLineParser(
        prog="tokengeo",
        description="The geometry of token representations: Laplacian heads, "
        "L-Transformers, attention flows on the sphere, head-output similarity.",
    )
    parser.add_argument("--version", action="version", version=f"tokengeo {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    wanted = argv[0] if argv else None
    for name, (module, help_text) in COMMANDS.items():
        cmd = sub.add_parser(name, help=help_text, description=help_text,
                             formatter_class=DefaultsHelp)
        cmd.set_defaults(_module=module)
        if name == wanted:
            importlib.import_module(module).add_arguments(cmd)
    return parser


if __name__ == "__main__":
    sys.exit(main())
