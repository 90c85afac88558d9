"""Load numpy arrays from pickles without executing code or trusting declared sizes.

Animal-MNIST ships its arrays as gzip'd pickles. ``pickle.load`` would import and call
any global a file names; :class:`ArrayUnpickler` resolves only the three globals a
pickled plain ``numpy.ndarray`` needs (``_reconstruct``, ``ndarray``, ``dtype``) and
refuses every other one, so a tampered file raises instead of running code.

Nor does it allocate what a file merely declares. A pickled array is
``_reconstruct(ndarray, shape0, typecode)`` followed by ``__setstate__((version, shape,
dtype, fortran, raw))``; here ``_reconstruct`` returns an empty stand-in and the array is
built only after its state passed these checks: ``prod(shape) * itemsize`` bytes within the
caller's limit (and within the pickle's own length, which must hold them), and ``raw``
exactly that long. Before unpickling, every opcode is scanned (``pickletools.genops``), so a
length field promising gigabytes the data does not hold is refused before the C unpickler
would reserve them.

:func:`load_record` reads a pickled record of such arrays beside plain values (the CIFAR
batches: a dict of ``data`` array, label lists and file names, written by Python 2): the
same globals only, with dicts, lists, tuples, strings, bytes and numbers built by the
unpickler's own opcodes, which call no code.
"""

from __future__ import annotations

import io
import math
import pickle
import pickletools

import numpy as np

from tokengeo.errors import TokengeoError


def _reconstruct_names() -> list[tuple[str, str]]:
    return [(m, "_reconstruct") for m in ("numpy.core.multiarray", "numpy._core.multiarray")]


class UnsafePickleError(TokengeoError):
    """A pickle asked for something other than a plain numpy array, or a too large one."""


class _PendingArray:
    """What ``_reconstruct`` gives back here: no memory until a checked ``__setstate__``."""

    def __init__(self, unpickler: ArrayUnpickler) -> None:
        self._unpickler = unpickler
        self.array: np.ndarray | None = None

    def __setstate__(self, state) -> None:
        self.array = self._unpickler.build(state)


class ArrayUnpickler(pickle.Unpickler):
    """Unpickles plain numpy arrays whose data, in all, fits in ``max_bytes``."""

    def __init__(self, file, max_bytes: int, what: str = "pickle",
                 bound: str = "the limit", encoding: str = "ASCII") -> None:
        super().__init__(file, encoding=encoding)  # "bytes": Python 2 strings stay bytes
        self.max_bytes, self.what, self.bound, self.spent = int(max_bytes), what, bound, 0

    def refuse(self, why: str) -> UnsafePickleError:
        return UnsafePickleError(f"{self.what}: {why}; refusing to load it "
                                 "(reinstall the data set if it is damaged)")

    def find_class(self, module: str, name: str):
        if (module, name) == ("numpy", "ndarray"):
            return np.ndarray
        if (module, name) == ("numpy", "dtype"):
            return np.dtype
        if (module, name) in _reconstruct_names():
            return self._reconstruct
        raise UnsafePickleError(
            f"refusing to unpickle global {module}.{name}: only numpy arrays are allowed"
        )

    def _reconstruct(self, subtype, shape, typecode) -> _PendingArray:
        if subtype is not np.ndarray:
            raise self.refuse(f"_reconstruct of {subtype!r}, not numpy.ndarray")
        self._nbytes(shape, 1)  # numpy writes (0,); never allocated, but checked anyway
        return _PendingArray(self)

    def _nbytes(self, shape, itemsize: int) -> int:
        """``prod(shape) * itemsize``, refused when the shape is malformed or the total of
        arrays built so far would pass ``max_bytes``."""
        if not isinstance(shape, tuple) or not all(
                type(s) is int and s >= 0 for s in shape):
            raise self.refuse(f"array shape {shape!r} is not a tuple of sizes")
        nbytes = math.prod(shape) * itemsize
        if self.spent + nbytes > self.max_bytes:
            raise self.refuse(f"an array of shape {shape} ({nbytes:,} bytes) is larger than "
                              f"{self.bound} ({self.max_bytes:,} bytes)")
        return nbytes

    def build(self, state) -> np.ndarray:
        """The array of ``state`` = ``([version,] shape, dtype, fortran, raw)``, checked."""
        if not isinstance(state, tuple) or len(state) not in (4, 5):
            raise self.refuse("array state is not (version, shape, dtype, order, data)")
        shape, dtype, _, raw = state[-4:]
        if not isinstance(dtype, np.dtype) or dtype.hasobject:
            raise self.refuse(f"array dtype {dtype!r} is not a numeric numpy dtype")
        nbytes = self._nbytes(shape, dtype.itemsize)
        if not isinstance(raw, bytes) or len(raw) != nbytes:
            got = len(raw) if isinstance(raw, bytes) else type(raw).__name__
            raise self.refuse(f"array of shape {shape} needs {nbytes:,} data bytes, got {got}")
        self.spent += nbytes
        array = np.ndarray.__new__(np.ndarray, (0,), np.uint8)
        array.__setstate__(state)  # safe now: sizes and types checked
        return array


def _scan(data: bytes, what: str) -> None:
    """Walk every opcode without building anything: a length field larger than what
    follows it (which the C unpickler would allocate first) is refused here."""
    try:
        for _ in pickletools.genops(data):
            pass
    except Exception as exc:  # ValueError for a truncated or malformed opcode stream
        raise UnsafePickleError(f"{what} is not a complete pickle ({exc}); refusing to load "
                                "it (reinstall the data set if it is damaged)") from None


def _unpickle(data: bytes, max_bytes: int | None, what: str, encoding: str = "ASCII"):
    """What ``data`` pickles, with every array in it built and checked (see the module)."""
    if max_bytes is None or max_bytes >= len(data):
        limit, bound = len(data), "the pickle itself, which must hold the array's bytes"
    else:
        limit, bound = int(max_bytes), "what the data set can hold"
    _scan(data, what)
    unpickler = ArrayUnpickler(io.BytesIO(data), limit, what, bound, encoding)
    try:
        obj = unpickler.load()
    except UnsafePickleError:
        raise
    except Exception as exc:  # malformed state, wrong argument types, ...
        raise unpickler.refuse(f"not a pickled numpy array ({type(exc).__name__}: {exc})") \
            from None
    return _built(obj, what)


MAX_DEPTH = 32  # a data set's record nests two or three levels (a dict of lists)


def _built(obj, what: str, depth: int = 0):
    """``obj`` with each pending array replaced by the array built from its checked state;
    containers nested deeper than :data:`MAX_DEPTH` are refused (before Python's recursion
    limit: one line, not thousands of traceback lines)."""
    if depth > MAX_DEPTH and isinstance(obj, dict | list | tuple):
        raise UnsafePickleError(f"{what} nests containers more than {MAX_DEPTH} deep; refusing "
                                "to load it (reinstall the data set if it is damaged)")
    if isinstance(obj, _PendingArray):
        return obj.array
    if isinstance(obj, dict):
        return {k: _built(v, what, depth + 1) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return type(obj)(_built(v, what, depth + 1) for v in obj)
    return obj


def load_array(data: bytes, max_bytes: int | None = None, what: str = "pickle") -> np.ndarray:
    """The numpy array pickled in ``data``; anything else raises ``UnsafePickleError``.

    ``max_bytes`` caps the array's size (default and upper bound: ``len(data)``, since the
    pickle must hold the array's bytes); ``what`` names the source in messages.
    """
    obj = _unpickle(data, max_bytes, what)
    if not isinstance(obj, np.ndarray) or obj.dtype.hasobject:
        raise UnsafePickleError(f"expected a numeric numpy array, got {type(obj).__name__}")
    return obj


def load_record(data: bytes, max_bytes: int | None = None, what: str = "pickle") -> dict:
    """The dict pickled in ``data`` (keys as written: Python 2 strings come back as bytes),
    its values numeric numpy arrays (``max_bytes`` in all, as in :func:`load_array`) or
    plain values; any other global, or a top-level object that is not a dict, raises
    ``UnsafePickleError``."""
    obj = _unpickle(data, max_bytes, what, encoding="bytes")
    if not isinstance(obj, dict):
        raise UnsafePickleError(f"{what}: expected a pickled dict, got {type(obj).__name__}")
    return obj
