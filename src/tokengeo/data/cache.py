"""The on-disk cache (trained tokenizers): ``$TOKENGEO_CACHE`` or ``~/.cache/tokengeo``."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from tokengeo.errors import ConfigError
from tokengeo.io import atomic_path


def cache_dir(*parts: str) -> Path:
    """``$TOKENGEO_CACHE/<parts>`` (default ``~/.cache/tokengeo``), created; a root that is
    a file, a link to one (``/dev/null``) or not writable is a ConfigError naming it."""
    env = os.environ.get("TOKENGEO_CACHE")
    root = Path(env).expanduser() if env else Path.home() / ".cache" / "tokengeo"
    what = f"TOKENGEO_CACHE={env!r}" if env else f"the cache folder {str(root)!r}"
    if root.exists() and not root.is_dir():
        raise ConfigError(f"{what} is not a folder (a file or a device); point TOKENGEO_CACHE "
                          "at a folder, or unset it")
    path = root.joinpath(*parts)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise ConfigError(f"{what}: {str(path)!r} is a file, not a folder; remove it or point "
                          "TOKENGEO_CACHE elsewhere") from None
    except OSError as exc:
        raise ConfigError(f"{what}: cannot create {str(path)!r} ({exc.strerror}); point "
                          "TOKENGEO_CACHE at a writable folder") from None
    return path


def _narrow(x: torch.Tensor) -> np.ndarray:
    """The smallest unsigned dtype holding non-negative int64 ``x`` (GPT-2 ids fit uint16)."""
    top = int(x.max()) if x.numel() else 0
    dtype = np.uint16 if top < 2**16 else np.uint32 if top < 2**32 else np.int64
    return x.numpy().astype(dtype)


def cached_int_arrays(
    kind: str, key_parts: list[str], compute: Callable[[], dict[str, torch.Tensor]],
    keys: tuple[str, ...] = (),
) -> dict[str, torch.Tensor]:
    """``compute()``'s non-negative int64 tensors, cached at
    ``<cache>/<kind>/<sha256 of key_parts>.npz`` (written atomically, read back with
    ``allow_pickle=False``: never unpickled). A cache file that is damaged, or lacks one of
    ``keys``, is recomputed and rewritten."""
    h = hashlib.sha256()
    for part in key_parts:
        h.update(part.encode("utf-8", "surrogatepass") + b"\x00")
    path = cache_dir(kind) / f"{h.hexdigest()[:24]}.npz"
    cached = _read_cached(path)
    if cached is not None and set(keys) <= cached.keys():
        return cached
    arrays = compute()
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        np.savez(f, **{k: _narrow(v) for k, v in arrays.items()})
    return arrays


def _read_cached(path: Path) -> dict[str, torch.Tensor] | None:
    """The arrays of a cached ``.npz``, or None (then recomputed and rewritten) when it is
    missing or not what this module writes: truncated, empty, object arrays (never
    unpickled), not integers, a FIFO."""
    import zipfile

    from tokengeo.io import open_binary

    if not path.exists():
        return None
    try:
        with open_binary(path) as f, np.load(f, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except (OSError, ValueError, EOFError, ConfigError, zipfile.BadZipFile, KeyError):
        return None
    if not arrays or not all(a.dtype.kind in "ui" and a.ndim == 1 for a in arrays.values()):
        return None
    return {k: torch.from_numpy(a.astype(np.int64)) for k, a in arrays.items()}


def cached_tokens(key_parts: list[str], encode: Callable[[], torch.Tensor]) -> torch.Tensor:
    """``encode()``'s int64 token stream (N,), cached (see :func:`cached_int_arrays`)."""
    return cached_int_arrays("tokens", key_parts, lambda: {"tokens": encode()},
                             keys=("tokens",))["tokens"]
