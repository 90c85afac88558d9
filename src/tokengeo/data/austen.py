"""Jane Austen's six novels (the R package ``janeaustenr``) for causal language modelling.

The novels ship in Debian's ``r-cran-janeaustenr`` as an R lazy-load database: an index
``data/Rdata.rdx`` (a gzip'd R serialisation of ``list(variables = list(emma = c(offset,
length), ...), references, compressed)``) and ``data/Rdata.rdb``, where each variable is
``length`` bytes at ``offset``: a 4-byte big-endian uncompressed size, then a zlib stream
holding an R character vector, one line of the novel per element. ``rdata`` parses the R
serialisations; nothing here needs R.

``scripts/install_austen.sh`` downloads the Debian package (never ``apt-get install``: that
pulls R) and extracts it under ``$TOKENGEO_DATA`` (default ``~/.cache/tokengeo``).

Train and validation are split *by novel* (default: *Persuasion*, 11% of the characters,
is validation). A contiguous-chunk split would put passages of one novel on both sides,
sharing its characters' names and plot; a held-out novel shares only the author.
"""

from __future__ import annotations

import gzip
import struct
import warnings
import zlib
from pathlib import Path

from tokengeo._deps import require
from tokengeo.checks import check_choice
from tokengeo.data.bundles import LanguageModelData
from tokengeo.data.documents import SEPARATOR, TOKENIZERS, documents_lm_data
from tokengeo.data.sources import Source, data_home
from tokengeo.data.tokenizer import Tokenizer
from tokengeo.errors import ConfigError

PACKAGE_DATA = "usr/lib/R/site-library/janeaustenr/data"  # inside the extracted .deb
AUSTEN = Source(
    "austen",
    "TOKENGEO_AUSTEN_DIR",
    lambda: data_home() / "r-cran-janeaustenr" / PACKAGE_DATA,
    ("Rdata.rdx", "Rdata.rdb"),
    "bash scripts/install_austen.sh (it runs: apt-get download r-cran-janeaustenr && "
    "dpkg-deb -x r-cran-janeaustenr_*.deb ~/.cache/tokengeo/r-cran-janeaustenr; "
    "and pip install rdata)",
    "https://github.com/juliasilge/janeaustenr (Project Gutenberg texts)",
)
NOVELS = ("emma", "mansfieldpark", "northangerabbey", "persuasion", "prideprejudice",
          "sensesensibility")  # the package's variable names, sorted
VAL_NOVELS = ("persuasion",)
__all__ = ["AUSTEN", "NOVELS", "SEPARATOR", "TOKENIZERS", "VAL_NOVELS", "load_austen",
           "read_novels", "split_novels"]


def _corrupt(path: Path, why: str):
    return AUSTEN.missing(f"{path} is corrupt ({why}); reinstall it")


def _parse_r(raw: bytes):
    """An R serialisation (XDR or native, as ``saveRDS`` writes) converted to Python:
    a named list becomes a dict, a character vector an array of str (NA: None)."""
    rdata = require("rdata")
    with warnings.catch_warnings():  # rdata warns that a bare serialisation "assumed RDS"
        warnings.simplefilter("ignore", UserWarning)
        return rdata.conversion.convert(rdata.parser.parse_data(raw))


def _why(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def read_index(folder: Path) -> dict[str, tuple[int, int]]:
    """``{variable: (offset, length)}`` of the lazy-load index ``folder/Rdata.rdx``."""
    path = folder / "Rdata.rdx"
    try:
        index = _parse_r(gzip.decompress(path.read_bytes()))
        compressed = index.get("compressed", True)
        variables = {str(k): (int(v[0]), int(v[1])) for k, v in index["variables"].items()}
    except ImportError:
        raise
    except Exception as exc:  # bad gzip, not an R serialisation, not the index's shape
        raise _corrupt(path, _why(exc)) from None
    flag = compressed[0] if hasattr(compressed, "__len__") else compressed
    if flag != 1:  # TRUE (zlib); R writes 2 for bzip2, 3 for xz
        raise _corrupt(path, f"compression {compressed!r}: only zlib (TRUE) is read")
    return variables


def read_variable(folder: Path, offset: int, length: int) -> list[str]:
    """One character vector of ``folder/Rdata.rdb``: its ``length`` bytes at ``offset`` are
    a big-endian uncompressed size and a zlib stream of its R serialisation."""
    path = folder / "Rdata.rdb"
    with open(path, "rb") as f:
        f.seek(offset)
        blob = f.read(length)
    try:
        if len(blob) != length or length < 5:
            raise ValueError(f"{length} bytes at offset {offset}, {len(blob)} there")
        size = struct.unpack(">I", blob[:4])[0]
        raw = zlib.decompress(blob[4:])
        if len(raw) != size:
            raise ValueError(f"{len(raw)} bytes decompressed, the header says {size}")
        lines = _parse_r(raw)
        out = ["" if line is None else str(line) for line in lines]
    except ImportError:
        raise
    except Exception as exc:  # truncation, bad zlib, not a character vector
        raise _corrupt(path, _why(exc)) from None
    return out


def read_novels(root: str | None = None) -> dict[str, str]:
    """``{novel: text}`` for the six novels (lines joined by newlines), sorted by name.
    A missing or corrupt file raises :class:`~tokengeo.errors.DataNotFoundError` with one
    line naming the install command."""
    folder = AUSTEN.locate(root)
    index = read_index(folder)
    absent = [n for n in NOVELS if n not in index]
    if absent:
        raise _corrupt(folder / "Rdata.rdx", f"no variable(s) {absent}")
    return {n: "\n".join(read_variable(folder, *index[n])) for n in NOVELS}


def split_novels(val_novels: tuple[str, ...] = VAL_NOVELS) -> tuple[list[str], list[str]]:
    """(train novels, validation novels): ``val_novels`` to validation, the rest to train."""
    unknown = sorted(set(val_novels) - set(NOVELS))
    if unknown:
        raise ConfigError(f"val_novels {unknown} are not novels; choose from {list(NOVELS)}")
    if set(val_novels) == set(NOVELS) or not val_novels:
        raise ConfigError(f"val_novels={list(val_novels)} must name 1 to 5 of {list(NOVELS)}")
    return [n for n in NOVELS if n not in val_novels], [n for n in NOVELS if n in val_novels]


def load_austen(
    tokenizer: str | Tokenizer = "bpe",
    root: str | None = None,
    val_novels: tuple[str, ...] = VAL_NOVELS,
    bpe_vocab_size: int = 4096,
) -> LanguageModelData:
    """Austen's novels tokenised by ``tokenizer`` (``bpe``: a byte-level BPE of
    ``bpe_vocab_size`` trained on the training novels only; ``char``; ``gpt2``; or a
    :class:`Tokenizer` object), split by novel."""
    if isinstance(tokenizer, str):
        check_choice("tokenizer", tokenizer, TOKENIZERS)
    train, val = split_novels(tuple(val_novels))
    novels = read_novels(root)
    return documents_lm_data("austen", novels, train, val, tokenizer, bpe_vocab_size)
