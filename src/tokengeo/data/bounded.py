"""Bounded reads of (optionally gzip'd) data files: never more bytes than the data can hold.

A gzip'd file can expand a thousandfold (100 MB of zeros compress to ~100 kB), and a header
can declare any size. Readers here take the most bytes the data set can hold, read at most
one byte more (``read(n + 1)``, which decompresses no further), and refuse a file that holds
more, or a header declaring more, with one line naming the file.
"""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path

from tokengeo.errors import DataNotFoundError


class CorruptDataError(DataNotFoundError):
    """A data file exists but is not what it should be (too large, truncated, not gzip).

    A :class:`DataNotFoundError`: the source is unusable until it is reinstalled, so
    ``tokengeo reproduce`` records its cells as not run and the CLI exits 2."""


def corrupt(path: Path, why: str) -> CorruptDataError:
    return CorruptDataError(f"{path} {why}; reinstall the data set or point its "
                            "environment variable at an intact copy")


class BoundedReader:
    """``path`` opened for reading (gunzipped when it ends in ``.gz``), errors as one line."""

    def __init__(self, path: Path) -> None:
        from tokengeo.errors import ConfigError
        from tokengeo.io import open_binary

        self.path = Path(path)
        try:  # a FIFO or a device is refused, never waited on
            raw = open_binary(self.path)
        except ConfigError as exc:
            raise corrupt(self.path, f"cannot be read ({exc})") from None
        self.file = gzip.GzipFile(fileobj=raw) if self.path.suffix == ".gz" else raw
        self._raw = raw

    def __enter__(self) -> BoundedReader:
        return self

    def __exit__(self, *exc) -> None:
        self.file.close()
        self._raw.close()

    def read(self, n: int) -> bytes:
        """Up to ``n`` bytes (fewer at the end of the file)."""
        try:
            return self.file.read(n)
        except (OSError, EOFError, zlib.error) as exc:  # not gzip, truncated, bad CRC
            raise corrupt(self.path, f"is not a readable gzip file ({exc})") from None

    def read_exactly(self, n: int, what: str) -> bytes:
        """Exactly ``n`` bytes, refused when the file ends sooner."""
        data = self.read(n)
        if len(data) < n:
            raise corrupt(self.path, f"is truncated: {len(data)} of {n} bytes of {what}")
        return data

    def read_rest(self, max_bytes: int) -> bytes:
        """The rest of the file, refused (after reading ``max_bytes + 1``) when longer."""
        data = self.read(max_bytes + 1)
        if len(data) > max_bytes:
            raise corrupt(self.path, f"holds more than the {max_bytes:,} bytes the data set "
                          "can hold")
        return data


def read_bounded(path: Path, max_bytes: int) -> bytes:
    """The (gunzipped) bytes of ``path``, at most ``max_bytes`` of them."""
    with BoundedReader(path) as f:
        return f.read_rest(max_bytes)


def load_image(Image, path: Path, mode: str):
    """The image file ``path`` decoded and converted to ``mode`` (a PIL image), read through
    :func:`tokengeo.io.open_binary` (a FIFO or device named like an image is refused, never
    waited on). A corrupt file, or one whose pixel count passes PIL's decompression-bomb
    limit (PIL would print a two-line warning, or raise), is refused with one line naming it.
    ``Image`` is the ``PIL.Image`` module (imported by the caller, which names the package
    when it is missing)."""
    import warnings

    from tokengeo.errors import ConfigError
    from tokengeo.io import open_binary

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with open_binary(path) as f, Image.open(f) as im:
                return im.convert(mode)
    except (Image.DecompressionBombWarning, Image.DecompressionBombError) as exc:
        raise ConfigError(f"the image {path} is too large to decode safely ({_first(exc)}); "
                          "resize it or remove it") from None
    except ConfigError as exc:
        raise ConfigError(f"cannot read the image {path} ({exc}); remove or replace it"
                          ) from None
    except Exception as exc:  # PIL raises OSError, SyntaxError, ... on bad files
        raise ConfigError(f"cannot read the image {path} ({_first(exc)}); remove or replace "
                          "it") from None


def _first(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:160]}" if text else type(exc).__name__
