"""The on-disk cache (trained tokenizers): ``$TOKENGEO_CACHE`` or ``~/.cache/tokengeo``."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path


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
