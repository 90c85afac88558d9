"""The flags several commands share: one name and one meaning each.

==================  ====================================================================
``--no-figures``    write the numbers, skip the PNG figures (flow, similarity)
``--quiet``         no progress bar (train, flow, similarity); bars show only on a terminal
``--device``        ``auto``, ``cpu`` or ``cuda`` (train, view, similarity, probe, flow;
                    bench: ``cuda:N`` too); ``cuda`` without one: one line, exit 2
``--threads N``     torch's intra-op CPU threads (train, flow, similarity, probe, view)
``--overwrite``     replace this command's previous output in ``--out`` (train, flow,
                    similarity); a folder the command did not write is never replaced
``--loggers``       where train's metrics go besides metrics.jsonl (``tensorboard,csv``)
==================  ====================================================================

:class:`DefaultsHelp` shows every default in ``--help``.
"""

from __future__ import annotations

import argparse

DEVICES = ("auto", "cpu", "cuda")


class DefaultsHelp(argparse.HelpFormatter):
    """``--help`` with ``(default: X)`` after each option whose help does not state it."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if (argparse.SUPPRESS in (text, default) or "default" in text.lower()
                or default in (None, False, [], "") or action.required):
            return text
        return f"{text} (default: %(default)s)"


def add_no_figures(parser: argparse.ArgumentParser, what: str = "the PNG figures") -> None:
    parser.add_argument("--no-figures", action="store_true", help=f"skip {what}")


def add_quiet(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quiet", action="store_true",
                        help="no progress bar (one shows only when stderr is a terminal)")


def add_device(parser: argparse.ArgumentParser, default: str | None = "auto",
               help: str = "where the model runs (auto: cuda when available)") -> None:
    parser.add_argument("--device", choices=DEVICES, default=default, help=help)


def add_threads(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--threads", type=int, default=None, metavar="N",
                        help="torch CPU threads (default: torch's own choice)")


def add_overwrite(parser: argparse.ArgumentParser, command: str) -> None:
    parser.add_argument("--overwrite", action="store_true",
                        help=f"replace the previous {command} output in --out (only a folder "
                             f"`tokengeo {command}` wrote is replaced)")


def apply_threads(threads: int | None) -> None:
    """Set torch's thread count (refusing a bad one with one line); None leaves it."""
    from tokengeo.errors import ConfigError

    if threads is None:
        return
    if isinstance(threads, bool) or threads < 1:
        raise ConfigError(f"--threads {threads} must be >= 1")
    import torch

    torch.set_num_threads(threads)


def resolve_device(device: str | None) -> str:
    """``auto`` -> ``cuda`` when available, else ``cpu``; ``cuda`` without one is refused."""
    import torch

    from tokengeo.errors import ConfigError

    if device in (None, "auto"):
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise ConfigError("--device cuda, but torch sees no CUDA device; use --device cpu")
    return device
