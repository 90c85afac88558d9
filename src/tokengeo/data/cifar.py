"""CIFAR-10 and CIFAR-100 (Krizhevsky 2009) from the python archives the user downloads.

The archives (``cifar-10-python.tar.gz``, ``cifar-100-python.tar.gz``, from
https://www.cs.toronto.edu/~kriz/cifar.html) hold pickled dicts written by Python 2: ``data``
a (N, 3072) uint8 array whose rows are the red, green and blue 32x32 planes in turn, and the
labels as a list (``labels``; CIFAR-100: ``fine_labels`` and ``coarse_labels``); a meta file
names the classes. Either the archive or its extracted folder is read; the pickles go through
:func:`tokengeo.data.safe_pickle.load_record`, which builds only numpy arrays and plain values,
and every member's size is bounded before it is read.

The official test batch is the test split; validation is a seeded stratified cut of the
training batches.
"""

from __future__ import annotations

import tarfile
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath

import numpy as np
import torch

from tokengeo.data.bundles import ImageClassificationData, ImageSplit
from tokengeo.data.images import image_bundle
from tokengeo.data.safe_pickle import UnsafePickleError, load_record
from tokengeo.errors import ConfigError, DataNotFoundError

PIXELS = 3 * 32 * 32  # one row of ``data``: R, G, B planes of 32x32
URL = "https://www.cs.toronto.edu/~kriz/cifar.html"


@dataclass(frozen=True)
class CifarLayout:
    """Where one CIFAR archive keeps its batches and which keys name the labels."""

    name: str  # the data set's name in the registry
    archive: str  # the file the user downloads
    folder: str  # the folder the archive extracts to
    train: tuple[str, ...]  # training batch files
    test: str
    meta: str
    label_key: str
    names_key: str
    n_images: int  # training + test images of the real data set (bounds every read)

    def max_member_bytes(self) -> int:
        """The most bytes one pickle of the data set can hold: all its images, with room
        for labels and file names (about 40 bytes each in the real files)."""
        return self.n_images * (PIXELS + 256) + (1 << 20)

    def missing(self, root: Path, why: str) -> DataNotFoundError:
        return DataNotFoundError(f"{root} {why}; give the CIFAR python archive {self.archive} "
                                 f"(from {URL}) or the folder {self.folder} it extracts to")


CIFAR10 = CifarLayout("cifar10", "cifar-10-python.tar.gz", "cifar-10-batches-py",
                      tuple(f"data_batch_{i}" for i in range(1, 6)), "test_batch",
                      "batches.meta", "labels", "label_names", 60000)
CIFAR100 = CifarLayout("cifar100", "cifar-100-python.tar.gz", "cifar-100-python", ("train",),
                       "test", "meta", "fine_labels", "fine_label_names", 60000)
CIFAR100_COARSE = replace(CIFAR100, label_key="coarse_labels", names_key="coarse_label_names")


def read_members(root: str | Path | None, layout: CifarLayout) -> dict[str, bytes]:
    """The raw bytes of the layout's batch and meta files, from the archive or folder."""
    if root is None:
        raise DataNotFoundError(f"{layout.name} is not bundled: download {layout.archive} from "
                                f"{URL} and give its path: --data {layout.name}:/path/to/"
                                f"{layout.archive} (or data_options root=...)")
    path = Path(root).expanduser()
    if not path.exists():
        raise layout.missing(path, "does not exist")
    wanted = (*layout.train, layout.test, layout.meta)
    if path.is_dir():
        folder = path / layout.folder if (path / layout.folder).is_dir() else path
        return {name: _read_file(folder / name, layout) for name in wanted}
    if not path.is_file():  # a FIFO or a device would block the read
        raise ConfigError(f"{path} is not a regular file; give {layout.archive} or its folder")
    return _read_archive(path, layout, wanted)


def _read_file(path: Path, layout: CifarLayout) -> bytes:
    from tokengeo.io import read_small

    if not path.is_file():
        raise layout.missing(path.parent, f"lacks the file {path.name}")
    try:
        return read_small(path, layout.max_member_bytes())
    except OSError as exc:
        raise ConfigError(f"cannot read {path} ({exc.strerror or type(exc).__name__})") from None


def _read_archive(path: Path, layout: CifarLayout, wanted: tuple[str, ...]) -> dict[str, bytes]:
    """The wanted members (by file name, in any folder of the archive), each bounded."""
    limit = layout.max_member_bytes()
    found: dict[str, bytes] = {}
    try:
        with tarfile.open(path, "r:*") as tar:
            for member in tar:
                name = PurePosixPath(member.name).name
                if name not in wanted or name in found:
                    continue
                if not member.isfile():
                    raise ConfigError(f"{path}: {member.name} is not a regular file in the "
                                      f"archive; download {layout.archive} again")
                if member.size > limit:
                    raise ConfigError(f"{path}: {member.name} declares {member.size:,} bytes, "
                                      f"more than {layout.name} can hold ({limit:,}); the "
                                      f"archive is not {layout.archive}")
                found[name] = tar.extractfile(member).read(limit + 1)
    except (tarfile.TarError, EOFError, OSError) as exc:  # gzip.BadGzipFile is an OSError
        raise ConfigError(f"{path} is not a readable tar archive ({type(exc).__name__}); "
                          f"give {layout.archive} from {URL} or its extracted folder") from None
    absent = [n for n in wanted if n not in found]
    if absent:
        raise ConfigError(f"{path} lacks {layout.folder}/{absent[0]} (and {len(absent) - 1} more"
                          f" of {len(wanted)} files): it is not {layout.archive}")
    return found


def _record(raw: bytes, what: str) -> dict:
    try:
        record = load_record(raw, what=what)
    except UnsafePickleError as exc:
        raise ConfigError(str(exc)) from None
    return {k.decode("latin-1") if isinstance(k, bytes) else k: v for k, v in record.items()}


def decode_batch(raw: bytes, what: str, label_key: str,
                 n_classes: int) -> tuple[torch.Tensor, torch.Tensor]:
    """One pickled batch -> images (N, 3, 32, 32) uint8 and labels (N,) int64."""
    record = _record(raw, what)
    data, labels = record.get("data"), record.get(label_key)
    if isinstance(labels, np.ndarray) and labels.ndim == 1 and labels.dtype.kind in "iu":
        labels = labels.tolist()  # a re-saved batch may hold its labels as an array
    if not isinstance(data, np.ndarray) or data.dtype != np.uint8 or data.ndim != 2 \
            or data.shape[1] != PIXELS:
        got = f"{data.dtype} {data.shape}" if isinstance(data, np.ndarray) else type(data).__name__
        raise ConfigError(f"{what}: 'data' must be a (N, {PIXELS}) uint8 array, got {got}")
    if not isinstance(labels, list) or not all(type(v) is int for v in labels):
        raise ConfigError(f"{what}: {label_key!r} must be a list of whole numbers; "
                          f"keys present: {sorted(map(str, record))}")
    if len(labels) != len(data):
        raise ConfigError(f"{what}: {len(data)} images but {len(labels)} labels")
    if labels and not 0 <= min(labels) <= max(labels) < n_classes:
        raise ConfigError(f"{what}: labels run from {min(labels)} to {max(labels)}, outside "
                          f"0..{n_classes - 1}")
    images = torch.from_numpy(np.ascontiguousarray(data).reshape(-1, 3, 32, 32))
    return images, torch.tensor(labels, dtype=torch.long)


def class_names(raw: bytes, what: str, names_key: str) -> list[str]:
    names = _record(raw, what).get(names_key)
    if not isinstance(names, list) or not names or \
            not all(isinstance(n, bytes | str) for n in names):
        raise ConfigError(f"{what}: {names_key!r} must be a non-empty list of class names")
    return [n.decode("latin-1") if isinstance(n, bytes) else n for n in names]


def _decode_all(layout: CifarLayout, root: str | Path | None):
    members = read_members(root, layout)

    def where(member: str) -> str:
        return f"{Path(root).expanduser()} [{member}]"

    names = class_names(members[layout.meta], where(layout.meta), layout.names_key)
    parts = [decode_batch(members[b], where(b), layout.label_key, len(names))
             for b in layout.train]
    test = decode_batch(members[layout.test], where(layout.test), layout.label_key, len(names))
    return names, parts, test


def check_cifar(layout: CifarLayout, root: str | Path) -> None:
    """Read and decode every batch of the archive or folder at ``root`` (a truncated
    archive, a pickle asking for code, a batch of the wrong shape raise here), without
    splitting it: ``reproduce`` checks supplied data before it claims its --out."""
    _decode_all(layout, root)


def load_cifar(layout: CifarLayout, root: str | Path | None, val_fraction: float,
               seed: int) -> ImageClassificationData:
    names, parts, test_part = _decode_all(layout, root)
    x_train, y_train = torch.cat([x for x, _ in parts]), torch.cat([y for _, y in parts])
    test = ImageSplit(*test_part)
    return image_bundle(layout.name, x_train, y_train, names, (val_fraction,), seed, test)


def load_cifar10(root: str | None = None, val_fraction: float = 0.1,
                 seed: int = 0) -> ImageClassificationData:
    """CIFAR-10: 50000 train (minus ``val_fraction`` for val) / 10000 test, 3x32x32, 10
    classes, from ``cifar-10-python.tar.gz`` or its folder at ``root``."""
    return load_cifar(CIFAR10, root, val_fraction, seed)


def load_cifar100(root: str | None = None, coarse: bool = False, val_fraction: float = 0.1,
                  seed: int = 0) -> ImageClassificationData:
    """CIFAR-100: 50000 train / 10000 test, 3x32x32; the 100 fine classes (``coarse=True``:
    the 20 superclasses), from ``cifar-100-python.tar.gz`` or its folder at ``root``."""
    return load_cifar(CIFAR100_COARSE if coarse else CIFAR100, root, val_fraction, seed)
