"""Plain-text corpora (lists of documents) for analyses that read prose, not batches:
Shakespeare's works, the Python 3.11 documentation sources, or the user's text files."""

from __future__ import annotations

from pathlib import Path

from tokengeo.checks import check_positive
from tokengeo.data import sources
from tokengeo.data.shakespeare import read_works
from tokengeo.data.user import _exists, read_text, text_files
from tokengeo.errors import ConfigError

CORPORA = ("shakespeare", "python-docs")


def read_python_docs(root: str | None = None) -> dict[str, str]:
    """``{relative path: reST source}`` of the 497 Python 3.11 doc pages, sorted by path."""
    d = sources.PYTHON_DOCS.locate(root)
    files = sorted(d.rglob("*.rst.txt"))
    return {str(f.relative_to(d)): f.read_text(encoding="utf-8") for f in files}


def load_corpus_dict(name_or_path: str | Path, root: str | None = None) -> dict[str, str]:
    """``{document name: text}`` of a named corpus (``CORPORA``) or a text file / folder."""
    if name_or_path == "shakespeare":
        return read_works(root)
    if name_or_path == "python-docs":
        return read_python_docs(root)
    if root is not None:
        raise ConfigError("root= only applies to the named corpora " + str(list(CORPORA)))
    path = Path(name_or_path).expanduser()
    if not path.exists() and path.suffix == "" and "/" not in str(name_or_path):
        raise ConfigError(
            f"unknown corpus {str(name_or_path)!r}; choose one of {list(CORPORA)} "
            "or give a text file or a folder of text files"
        )
    path = _exists(path)
    files = [path] if path.is_file() else text_files(path)
    return {str(f.relative_to(path) if path.is_dir() else f.name): read_text(f) for f in files}


def load_corpus(
    name_or_path: str | Path, root: str | None = None, max_documents: int | None = None
) -> list[str]:
    """The corpus's documents in a fixed order (sorted by name), optionally the first
    ``max_documents``: ``load_corpus("shakespeare")`` gives the 42 works' texts."""
    docs = list(load_corpus_dict(name_or_path, root).values())
    if max_documents is not None:
        check_positive("max_documents", max_documents)
        docs = docs[:max_documents]
    return docs
