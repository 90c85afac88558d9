"""Exceptions raised for bad input. Each message names the problem and the fix.

The CLI turns any :class:`TokengeoError` into one line on stderr and exit status 2.
"""

from __future__ import annotations


class TokengeoError(Exception):
    """Base class of errors caused by the user's input or environment (not bugs)."""


class ConfigError(TokengeoError, ValueError):
    """An invalid configuration value, model name, keyword or argument."""


class DataNotFoundError(TokengeoError, FileNotFoundError):
    """A data source is not installed; the message says how to install it."""


class MissingDependencyError(TokengeoError, ImportError):
    """An optional dependency is not installed; the message names the install command."""


class CheckpointError(TokengeoError):
    """A checkpoint is corrupt, incomplete or does not match the model/config."""


class Terminated(KeyboardInterrupt):
    """SIGTERM reached the process: it unwinds like Ctrl-C (temporary files removed, workers
    stopped) and the CLI exits with status 143."""
