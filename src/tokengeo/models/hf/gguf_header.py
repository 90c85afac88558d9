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


def read_gguf_metadata(path: Path, stop_when: Callable[[dict[str, Any]], bool] | None = None
                       ) -> dict[str, Any]:
    """The scalar and string values of a GGUF file's metadata, in file order; arrays (the
    tokenizer's vocabulary) are skipped and recorded as None. Stops once ``stop_when(values)``
    holds. A file that is not GGUF, or ends inside its header, is a ConfigError."""
    values: dict[str, Any] = {}
    try:
        with open(path, "rb") as f:
            if f.read(4) != b"GGUF" or _scalar(f, "<I") not in (2, 3):
                raise ConfigError(f"{path} is not a GGUF v2/v3 file")
            _scalar(f, "<Q")  # tensor count
            for _ in range(_scalar(f, "<Q")):
                key = _string(f)
                values[key] = _value(f, _scalar(f, "<I"), path)
                if stop_when is not None and stop_when(values):
                    break
    except struct.error:
        raise ConfigError(f"{path} ends inside its GGUF header (a truncated file); reinstall "
                          "the package that holds it") from None
    return values


@functools.lru_cache(maxsize=8)
def gguf_sizes(path: Path, mtime_ns: int) -> dict[str, Any]:
    """Layer, head, position and vocabulary counts under their Hugging Face names (``{}``
    where the header lacks them); ``mtime_ns`` keys the cache to the file's version."""
    values = read_gguf_metadata(path, stop_when=lambda kv: _sizes(kv) is not None)
    return _sizes(values) or {}


def _sizes(kv: dict[str, Any]) -> dict[str, Any] | None:
    arch = kv.get("general.architecture")
    if arch is None or any(f"{arch}.{key}" not in kv for key in HF_KEYS.values()):
        return None
    return {hf: kv[f"{arch}.{key}"] for hf, key in HF_KEYS.items()}


def _value(f: BinaryIO, kind: int, path: Path) -> Any:
    if kind in SCALARS:
        return _scalar(f, SCALARS[kind])
    if kind == STRING:
        return _string(f)
    _skip(f, kind, 1, path)
    return None


def _skip(f: BinaryIO, kind: int, count: int, path: Path) -> None:
    """Move past ``count`` values of type ``kind`` without keeping them."""
    if kind in SCALARS:
        f.seek(count * struct.calcsize(SCALARS[kind]), 1)
    elif kind == STRING:
        for _ in range(count):
            f.seek(_scalar(f, "<Q"), 1)
    elif kind == ARRAY:
        for _ in range(count):
            inner = _scalar(f, "<I")
            _skip(f, inner, _scalar(f, "<Q"), path)
    else:
        raise ConfigError(f"{path}: unknown GGUF value type {kind}; not a GGUF file")


def _scalar(f: BinaryIO, fmt: str) -> Any:
    return struct.unpack(fmt, f.read(struct.calcsize(fmt)))[0]


def _string(f: BinaryIO) -> str:
    return f.read(_scalar(f, "<Q")).decode("utf-8", errors="replace")
