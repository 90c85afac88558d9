"""A causal-LM bundle from named documents split by document (Shakespeare's works, Austen's
novels): one tokenizer rule, one cached encoding, one :class:`LanguageModelData` layout.

Splitting by document keeps every passage of a validation document out of training; the
documents of a split are joined with :data:`SEPARATOR` before encoding.
"""

from __future__ import annotations

import torch

from tokengeo.data.bpe import gpt2_tokenizer, train_bpe
from tokengeo.data.bundles import LanguageModelData
from tokengeo.data.cache import cached_tokens
from tokengeo.data.tokenizer import CharTokenizer, Tokenizer, count_characters, encode_documents

TOKENIZERS = ("char", "gpt2", "bpe")
SEPARATOR = "\n\n"  # between consecutive documents of a split


def make_tokenizer(kind: str, corpus: str, documents: dict[str, str], train: list[str],
                   bpe_vocab_size: int) -> Tokenizer:
    """``char``: the alphabet of every document (validation has no unknown character);
    ``gpt2``: GPT-2's byte-level BPE; ``bpe``: a byte-level BPE of ``bpe_vocab_size``
    trained on the ``train`` documents only (named after ``corpus``)."""
    if kind == "char":
        return CharTokenizer.from_texts([*documents.values(), SEPARATOR])
    if kind == "gpt2":
        return gpt2_tokenizer()
    return train_bpe([documents[d] for d in train], bpe_vocab_size, name=corpus)


def encode_split(corpus: str, tok: Tokenizer, texts: list[str]) -> torch.Tensor:
    """``texts`` joined by :data:`SEPARATOR` and encoded, (N,) int64. BPE streams take
    seconds to encode: they are cached on disk, keyed by ``corpus``, the tokenizer's
    fingerprint and the texts; characters are encoded directly (fast)."""
    fingerprint = getattr(tok, "fingerprint", None)
    if fingerprint is None:
        return encode_documents(tok, texts, SEPARATOR)
    return cached_tokens([corpus, fingerprint, SEPARATOR, *texts],
                         lambda: encode_documents(tok, texts, SEPARATOR))


def documents_lm_data(corpus: str, documents: dict[str, str], train: list[str],
                      val: list[str], tokenizer: str | Tokenizer,
                      bpe_vocab_size: int) -> LanguageModelData:
    """The bundle of ``documents`` (``{name: text}``) with the ``train`` names on one side
    and the ``val`` names on the other, tokenised by ``tokenizer`` (a name of
    :data:`TOKENIZERS`, checked by the caller, or a :class:`Tokenizer`); its name is
    ``f"{corpus}-{tokenizer name}"``."""
    if isinstance(tokenizer, str):
        tok, name = make_tokenizer(tokenizer, corpus, documents, train, bpe_vocab_size), \
            tokenizer
    else:
        tok, name = tokenizer, tokenizer.name
    train_texts, val_texts = [documents[d] for d in train], [documents[d] for d in val]
    return LanguageModelData(
        name=f"{corpus}-{name}",
        train_tokens=encode_split(corpus, tok, train_texts),
        val_tokens=encode_split(corpus, tok, val_texts),
        vocab_size=tok.vocab_size,
        tokenizer=tok,
        train_documents=train,
        val_documents=val,
        train_characters=count_characters(train_texts, SEPARATOR),
        val_characters=count_characters(val_texts, SEPARATOR),
    )
