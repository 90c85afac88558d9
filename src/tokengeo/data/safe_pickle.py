"""Load numpy arrays from pickles without executing code.

Animal-MNIST ships its arrays as gzip'd pickles. ``pickle.load`` would import and call
any global a file names; :class:`ArrayUnpickler` resolves only the three globals a
pickled plain ``numpy.ndarray`` needs (``_reconstruct``, ``ndarray``, ``dtype``) and
refuses every other one, so a tampered file raises instead of running code.
"""

from __future__ import annotations

import io
import pickle

import numpy as np

from tokengeo.errors import TokengeoError


def _allowed() -> dict[tuple[str, str], object]:
    try:
        from numpy._core.multiarray import _reconstruct  # numpy >= 2
    except ImportError:  # pragma: no cover - numpy 1.x
        from numpy.core.multiarray import _reconstruct
    allowed: dict[tuple[str, str], object] = {("numpy", "ndarray"): np.ndarray}
    allowed[("numpy", "dtype")] = np.dtype
    for module in ("numpy.core.multiarray", "numpy._core.multiarray"):
        allowed[(module, "_reconstruct")] = _reconstruct
    return allowed


class UnsafePickleError(TokengeoError):
    """A pickle asked for something other than a plain numpy array."""


class ArrayUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        obj = _allowed().get((module, name))
        if obj is None:
            raise UnsafePickleError(
                f"refusing to unpickle global {module}.{name}: only numpy arrays are allowed"
            )
        return obj


def load_array(data: bytes) -> np.ndarray:
    """The numpy array pickled in ``data``; anything else raises ``UnsafePickleError``."""
    obj = ArrayUnpickler(io.BytesIO(data)).load()
    if not isinstance(obj, np.ndarray) or obj.dtype.hasobject:
        raise UnsafePickleError(f"expected a numeric numpy array, got {type(obj).__name__}")
    return obj
