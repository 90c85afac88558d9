"""The on-disk cache (trained tokenizers): ``$TOKENGEO_CACHE`` or ``~/.cache/tokengeo``."""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch


def cache_dir(*parts: str) -> Path:
    root = Path(os.environ.get("TOKENGEO_CACHE") or Path.home() / ".cache" / "tokengeo")
    path = root.joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


def write_atomic(path: Path, write: Callable[[Path], None]) -> None:
    """Call ``write(tmp)`` on a temporary file beside ``path``, then rename it into place.

    Readers never see a half-written file; a failed write leaves no temporary behind.
    """
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        write(Path(tmp))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def cached_tokens(key_parts: list[str], encode: Callable[[], torch.Tensor]) -> torch.Tensor:
    """``encode()``'s int64 stream, cached at ``tokens/<sha256 of key_parts>.npy``.

    Stored as a plain ``.npy`` (loaded with ``allow_pickle=False``: never unpickled)."""
    h = hashlib.sha256()
    for part in key_parts:
        h.update(part.encode("utf-8", "surrogatepass") + b"\x00")
    path = cache_dir("tokens") / f"{h.hexdigest()[:24]}.npy"
    if path.exists():
        return torch.from_numpy(np.load(path, allow_pickle=False).astype(np.int64))
    tokens = encode()  # (N,)
    small = tokens.numel() == 0 or int(tokens.max()) < 2**16
    narrow = tokens.numpy().astype(np.uint16 if small else np.uint32)  # GPT-2 ids fit uint16

    def write(tmp: Path) -> None:
        with open(tmp, "wb") as f:
            np.save(f, narrow, allow_pickle=False)

    write_atomic(path, write)
    return tokens
