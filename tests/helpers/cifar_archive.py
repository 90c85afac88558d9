"""Small CIFAR python archives in the real format, for the loader and reproduce tests.

The real batches are dicts pickled by Python 2 (protocol 2): keys, file names and the
array's raw bytes are Python 2 strings (``SHORT_BINSTRING`` / ``BINSTRING`` opcodes), which
Python 3's pickler never writes; :class:`Py2Pickler` writes them so.
"""

from __future__ import annotations

import io
import pickle
import struct
import tarfile
from pathlib import Path

import numpy as np


class Py2Pickler(pickle._Pickler):
    """Protocol 2 with every ``str`` and ``bytes`` written as a Python 2 string."""

    dispatch = dict(pickle._Pickler.dispatch)

    def save_py2_string(self, obj) -> None:
        raw = obj.encode("latin-1") if isinstance(obj, str) else obj
        if len(raw) < 256:
            self.write(pickle.SHORT_BINSTRING + bytes([len(raw)]) + raw)
        else:
            self.write(pickle.BINSTRING + struct.pack("<i", len(raw)) + raw)
        self.memoize(obj)

    dispatch[str] = save_py2_string
    dispatch[bytes] = save_py2_string


def py2_dumps(obj) -> bytes:
    f = io.BytesIO()
    Py2Pickler(f, protocol=2).dump(obj)
    return f.getvalue()


def batch(rng: np.random.Generator, labels: list[int], label_key: str = "labels",
          **more) -> dict:
    """One batch: random pixels (N, 3072) uint8 with the given labels."""
    data = rng.integers(0, 256, (len(labels), 3072), dtype=np.uint8)
    return {"batch_label": "a batch", "data": data, label_key: list(labels),
            "filenames": [f"img_{i}.png" for i in range(len(labels))], **more}


def cifar10_members(seed: int = 0) -> dict[str, dict]:
    """data_batch_1..5 (4 images each, classes 0..2) and a test_batch of 6, with meta."""
    rng = np.random.default_rng(seed)
    members = {f"data_batch_{i}": batch(rng, [0, 1, 2, (i % 3)]) for i in range(1, 6)}
    members["test_batch"] = batch(rng, [0, 1, 2, 0, 1, 2])
    members["batches.meta"] = {"label_names": [f"class{k}" for k in range(10)],
                               "num_cases_per_batch": 4, "num_vis": 3072}
    return members


def cifar100_members(seed: int = 0) -> dict[str, dict]:
    """train (12 images in fine classes 0..3 / coarse 0..1) and test (4), with meta."""
    rng = np.random.default_rng(seed)
    fine = [0, 1, 2, 3] * 3

    def record(labels):
        return batch(rng, labels, "fine_labels", coarse_labels=[k // 2 for k in labels])

    return {"train": record(fine), "test": record([0, 1, 2, 3]),
            "meta": {"fine_label_names": [f"fine{k}" for k in range(100)],
                     "coarse_label_names": [f"coarse{k}" for k in range(20)]}}


def write_folder(root: Path, folder: str, members: dict[str, dict]) -> Path:
    (root / folder).mkdir(parents=True)
    for name, record in members.items():
        (root / folder / name).write_bytes(py2_dumps(record))
    return root / folder


def write_archive(path: Path, folder: str, members: dict[str, dict | bytes]) -> Path:
    """A ``.tar.gz`` holding ``folder/<name>`` for each member (a dict is pickled)."""
    with tarfile.open(path, "w:gz") as tar:
        for name, record in members.items():
            raw = record if isinstance(record, bytes) else py2_dumps(record)
            info = tarfile.TarInfo(f"{folder}/{name}")
            info.size = len(raw)
            tar.addfile(info, io.BytesIO(raw))
    return path
