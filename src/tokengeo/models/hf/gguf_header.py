"""The metadata of a GGUF file, read from its key/value section alone: a model's sizes
before its (quantised) weights are read or dequantised.

Layout (the GGUF spec, v2 and v3): ``b"GGUF"``, uint32 version, uint64 tensor count,
uint64 key/value count, then per key: a string key, a uint32 value type and the value.
A string is a uint64 byte length and UTF-8 bytes; an array is a uint32 item type, a uint64
count and the items. All little-endian. The tensor infos and data that follow are not read.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

from tokengeo.errors import ConfigError

SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
           10: "<Q", 11: "<q", 12: "<d"}  # value type -> struct format
STRING, ARRAY = 8, 9
# Hugging Face config key -> GGUF key under the architecture's prefix (``llama.block_count``)
HF_KEYS = {"num_hidden_layers": "block_count", "num_attention_heads": "attention.head_count",
           "max_position_embeddings": "context_length", "vocab_size": "vocab_size"}


MAX_ARRAY_DEPTH = 4  # arrays of arrays (the spec allows them; real files nest one level)


def read_gguf_metadata(path: Path, stop_when: Callable[[dict[str, Any]], bool] | None = None
                       ) -> dict[str, Any]:
    """The scalar and string values of a GGUF file's metadata, in file order; arrays (the
    tokenizer's vocabulary) are skipped and recorded as None. Stops once ``stop_when(values)``
    holds. A file that is not GGUF, ends inside its header, or declares more than it holds
    (a count, a length or a nesting no real file has) is a ConfigError naming it: every
    length is checked against the bytes left before it is read, skipped or looped over."""
    from tokengeo.io import open_binary

    values: dict[str, Any] = {}
    try:
        with open_binary(path) as f:
            r = _Reader(f, path)
            if f.read(4) != b"GGUF" or r.scalar("<I") not in (2, 3):
                raise ConfigError(f"{path} is not a GGUF v2/v3 file")
            r.scalar("<Q")  # tensor count
            for _ in range(r.count(r.scalar("<Q"), 12, "key/value pairs")):
                key = r.string()
                values[key] = r.value(r.scalar("<I"))
                if stop_when is not None and stop_when(values):
                    break
    except struct.error:
        raise ConfigError(f"{path} ends inside its GGUF header (a truncated file); reinstall "
                          "the package that holds it") from None
    return values


class _Reader:
    """Bounded reads of a GGUF header: nothing is read, skipped or counted past the file."""

    def __init__(self, f: BinaryIO, path: Path) -> None:
        import os

        self.f, self.path = f, path
        self.size = os.fstat(f.fileno()).st_size

    def left(self) -> int:
        return self.size - self.f.tell()

    def count(self, n: int, min_bytes: int, what: str) -> int:
        """``n`` items of at least ``min_bytes`` each, refused unless the file holds them."""
        if n * min_bytes > self.left():
            raise ConfigError(f"{self.path} ends inside its GGUF header: it declares {n:,} "
                              f"{what}, more than the {self.left():,} bytes left (a truncated "
                              "or invalid file); reinstall the package that holds it")
        return n

    def scalar(self, fmt: str) -> Any:
        return struct.unpack(fmt, self.f.read(struct.calcsize(fmt)))[0]

    def string(self) -> str:
        n = self.count(self.scalar("<Q"), 1, "bytes of a string")
        return self.f.read(n).decode("utf-8", errors="replace")

    def value(self, kind: int) -> Any:
        if kind in SCALARS:
            return self.scalar(SCALARS[kind])
        if kind == STRING:
            return self.string()
        self.skip(kind, 1, 0)
        return None

    def skip(self, kind: int, count: int, depth: int) -> None:
        """Move past ``count`` values of type ``kind`` without keeping them."""
        if depth > MAX_ARRAY_DEPTH:
            raise ConfigError(f"{self.path} nests GGUF arrays more than {MAX_ARRAY_DEPTH} "
                              "deep; it is not a valid GGUF file")
        if kind in SCALARS:
            width = struct.calcsize(SCALARS[kind])
            self.f.seek(self.count(count, width, "array items") * width, 1)
        elif kind == STRING:
            for _ in range(self.count(count, 8, "strings")):
                self.f.seek(self.count(self.scalar("<Q"), 1, "bytes of a string"), 1)
        elif kind == ARRAY:
            for _ in range(self.count(count, 12, "arrays")):
                inner = self.scalar("<I")
                self.skip(inner, self.scalar("<Q"), depth + 1)
        else:
            raise ConfigError(f"{self.path}: unknown GGUF value type {kind}; not a GGUF file")


@functools.lru_cache(maxsize=8)
def gguf_sizes(path: Path, mtime_ns: int) -> dict[str, Any]:
    """Layer, head, position and vocabulary counts under their Hugging Face names (``{}``
    where the header lacks them); ``mtime_ns`` keys the cache to the file's version."""
    values = read_gguf_metadata(path, stop_when=lambda kv: _sizes(kv) is not None)
    sizes = _sizes(values) or {}
    for key, value in sizes.items():  # a crafted header: a string, a float, 0 or 2^63
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 1 << 24:
            raise ConfigError(f"{path}: its {key} is {value!r}, not a count a model has; it "
                              "is not a valid GGUF file: reinstall the package that holds it")
    return sizes


def _sizes(kv: dict[str, Any]) -> dict[str, Any] | None:
    arch = kv.get("general.architecture")
    if arch is None or any(f"{arch}.{key}" not in kv for key in HF_KEYS.values()):
        return None
    return {hf: kv[f"{arch}.{key}"] for hf, key in HF_KEYS.items()}
