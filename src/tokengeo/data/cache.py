"""The on-disk cache (trained tokenizers): ``$TOKENGEO_CACHE`` or ``~/.cache/tokengeo``."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from tokengeo.io import atomic_path


def cache_dir(*parts: str) -> Path:
    root = Path(os.environ.get("TOKENGEO_CACHE") or Path.home() / ".cache" / "tokengeo")
    path = root.joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


def _narrow(x: torch.Tensor) -> np.ndarray:
    """The smallest unsigned dtype holding non-negative int64 ``x`` (GPT-2 ids fit uint16)."""
    top = int(x.max()) if x.numel() else 0
    dtype = np.uint16 if top < 2**16 else np.uint32 if top < 2**32 else np.int64
    return x.numpy().astype(dtype)


def cached_int_arrays(
    kind: str, key_parts: list[str], compute: Callable[[], dict[str, torch.Tensor]]
) -> dict[str, torch.Tensor]:
    """``compute()``'s non-negative int64 tensors, cached at
    ``<cache>/<kind>/<sha256 of key_parts>.npz`` (written atomically, read back with
    ``allow_pickle=False``: never unpickled)."""
    h = hashlib.sha256()
    for part in key_parts:
        h.update(part.encode("utf-8", "surrogatepass") + b"\x00")
    path = cache_dir(kind) / f"{h.hexdigest()[:24]}.npz"
    if path.exists():
        with np.load(path, allow_pickle=False) as z:
            return {k: torch.from_numpy(z[k].astype(np.int64)) for k in z.files}
    arrays = compute()
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        np.savez(f, **{k: _narrow(v) for k, v in arrays.items()})
    return arrays


def cached_tokens(key_parts: list[str], encode: Callable[[], torch.Tensor]) -> torch.Tensor:
    """``encode()``'s int64 token stream (N,), cached (see :func:`cached_int_arrays`)."""
    return cached_int_arrays("tokens", key_parts, lambda: {"tokens": encode()})["tokens"]
