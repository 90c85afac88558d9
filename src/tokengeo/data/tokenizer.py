"""The tokenizer interface every bundle carries, and the character-level tokenizer."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol, runtime_checkable

import numpy as np
import torch

from tokengeo.errors import ConfigError


@runtime_checkable
class Tokenizer(Protocol):
    name: str
    vocab_size: int

    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: Iterable[int]) -> str: ...


class CharTokenizer:
    """One id per character: id ``i`` is the i-th character of the sorted alphabet."""

    name = "char"

    def __init__(self, alphabet: Iterable[str]):
        self.chars: list[str] = sorted(set(alphabet))
        self._ids = {c: i for i, c in enumerate(self.chars)}
        self.vocab_size = len(self.chars)

    @classmethod
    def from_texts(cls, texts: Iterable[str]) -> CharTokenizer:
        alphabet: set[str] = set()
        for text in texts:
            alphabet.update(text)
        return cls(alphabet)

    def encode(self, text: str) -> list[int]:
        try:
            return [self._ids[c] for c in text]
        except KeyError as exc:
            raise ConfigError(f"character {exc.args[0]!r} is not in the vocabulary") from None

    def decode(self, ids: Iterable[int]) -> str:
        return "".join(self.chars[int(i)] for i in ids)

    def to_dict(self) -> dict:
        """JSON-able state (store it beside a checkpoint); inverse of ``from_dict``."""
        return {"kind": "char", "chars": "".join(self.chars)}

    @classmethod
    def from_dict(cls, state: dict) -> CharTokenizer:
        return cls(state["chars"])


def _char_ids(tok: CharTokenizer, text: str) -> torch.Tensor:
    """Vectorised ``tok.encode``: a code-point lookup table instead of a Python loop."""
    codes = np.frombuffer(text.encode("utf-32-le"), dtype="<u4")  # (len(text),)
    table = np.full(max(map(ord, tok.chars)) + 1, -1, dtype=np.int64)
    table[[ord(c) for c in tok.chars]] = np.arange(tok.vocab_size)
    ids = table[np.minimum(codes, len(table) - 1)]
    bad = (codes >= len(table)) | (ids < 0)
    if bad.any():
        c = chr(int(codes[np.argmax(bad)]))
        raise ConfigError(f"character {c!r} is not in the vocabulary")
    return torch.from_numpy(ids)


def encode_documents(tok: Tokenizer, texts: list[str], separator: str = "\n\n") -> torch.Tensor:
    """One int64 stream (N,): each text encoded on its own, ``separator`` encoded between.

    For a character tokenizer this equals ``encode(separator.join(texts))``; for BPE it
    differs only in that no token spans two documents."""
    if isinstance(tok, CharTokenizer):
        return _char_ids(tok, separator.join(texts))
    sep = tok.encode(separator) if separator else []
    batch = getattr(tok, "encode_batch", None)
    encoded = batch(texts) if batch else [tok.encode(t) for t in texts]
    ids: list[int] = []
    for i, doc in enumerate(encoded):
        ids.extend(sep if i else [])
        ids.extend(doc)
    return torch.tensor(ids, dtype=torch.long)


def count_characters(texts: list[str], separator: str = "\n\n") -> int:
    """Characters of ``separator.join(texts)``: the text :func:`encode_documents` encodes."""
    return sum(map(len, texts)) + len(separator) * max(len(texts) - 1, 0)
