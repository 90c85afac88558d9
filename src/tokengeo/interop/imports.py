"""Import TransformerLens and nnsight (the ``interp`` extra) without their side effects.

Importing TransformerLens sets the ``transformers`` logger to ERROR and adds process-wide
warning filters (``ignore`` for some ``UserWarning`` and generation messages); a library
that quietly silences the warnings of the code around it hides tokengeo's own. Both are
saved before the import and put back after it.
"""

from __future__ import annotations

import logging
import warnings
from contextlib import contextmanager
from types import ModuleType

from tokengeo._deps import require

_QUIETED = ("transformers",)  # loggers an interp import is known to silence


@contextmanager
def side_effects_undone():
    """Restore the warning filters and the levels of :data:`_QUIETED` loggers on exit."""
    filters = list(warnings.filters)
    levels = {name: logging.getLogger(name).level for name in _QUIETED}
    try:
        yield
    finally:
        warnings.filters[:] = filters
        warnings._filters_mutated()  # the module's cache of the filters (as catch_warnings)
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)


def transformer_lens() -> ModuleType:
    """``transformer_lens`` with its bridge builder loaded, or an error naming the extra."""
    with side_effects_undone():
        module = require("transformer_lens")
        require("transformer_lens.model_bridge.sources._bridge_builder")
    return module


def nnsight() -> ModuleType:
    """``nnsight``, or an error naming the extra."""
    with side_effects_undone():
        return require("nnsight")
