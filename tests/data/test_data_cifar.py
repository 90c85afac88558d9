"""CIFAR-10/100 read from small archives in the real python format (made here)."""

from __future__ import annotations

import gzip
import pickle

import numpy as np
import pytest
import torch
from helpers.cifar_archive import (
    cifar10_members,
    cifar100_members,
    py2_dumps,
    write_archive,
    write_folder,
)

from tokengeo.cli import main
from tokengeo.data import dataset_kind, load_dataset
from tokengeo.data.cifar import load_cifar10, load_cifar100
from tokengeo.errors import ConfigError, DataNotFoundError


def _rows(images: torch.Tensor) -> np.ndarray:
    """(N, 3, 32, 32) -> the archive's (N, 3072) rows: R plane, G plane, B plane."""
    return images.reshape(len(images), -1).numpy()


def _sorted_rows(rows: np.ndarray) -> list[bytes]:
    return sorted(r.tobytes() for r in rows)


@pytest.fixture
def cifar10_tar(tmp_path):
    return write_archive(tmp_path / "cifar-10-python.tar.gz", "cifar-10-batches-py",
                         cifar10_members())


def test_cifar10_archive_is_read_pixel_for_pixel(cifar10_tar):
    members = cifar10_members()
    data = load_dataset(f"cifar10:{cifar10_tar}", val_fraction=0.2, seed=3)
    test = members["test_batch"]
    assert data.image_shape == (3, 32, 32) and data.num_classes == 10
    assert data.class_names == [f"class{k}" for k in range(10)]
    assert np.array_equal(_rows(data.test.images), test["data"])  # the official test batch
    assert data.test.labels.tolist() == test["labels"]
    train_rows = np.concatenate([members[f"data_batch_{i}"]["data"] for i in range(1, 6)])
    ours = np.concatenate([_rows(data.train.images), _rows(data.val.images)])
    assert _sorted_rows(ours) == _sorted_rows(train_rows)  # train + val = the five batches
    # the first channel of an image is the first 1024 values of its row, row-major
    first = members["test_batch"]["data"][0]
    assert data.test.images[0, 0, 1, 2].item() == first[1 * 32 + 2]
    assert data.test.images[0, 2, 31, 31].item() == first[3071]


def test_extracted_folder_and_its_parent_give_the_same_data(tmp_path, cifar10_tar):
    folder = write_folder(tmp_path / "x", "cifar-10-batches-py", cifar10_members())
    a, b, c = (load_cifar10(str(p), val_fraction=0.2) for p in (cifar10_tar, folder,
                                                                 tmp_path / "x"))
    for other in (b, c):
        assert torch.equal(a.train.images, other.train.images)
        assert torch.equal(a.val.labels, other.val.labels)
        assert torch.equal(a.test.images, other.test.images)


def test_cifar100_fine_and_coarse_labels(tmp_path):
    members = cifar100_members()
    path = write_archive(tmp_path / "c100.tar.gz", "cifar-100-python", members)
    fine = load_cifar100(str(path), val_fraction=0.25)
    coarse = load_dataset(f"cifar100:{path}", coarse=True, val_fraction=0.25)
    assert (fine.num_classes, coarse.num_classes) == (100, 20)
    assert fine.test.labels.tolist() == members["test"]["fine_labels"]
    assert coarse.test.labels.tolist() == members["test"]["coarse_labels"]
    def pairs(data, relabel=lambda y: y):
        splits = (data.train, data.val)
        return sorted((img.numpy().tobytes(), int(relabel(y))) for s in splits
                      for img, y in zip(s.images, s.labels, strict=True))

    assert pairs(coarse) == pairs(fine, lambda y: y // 2)  # the same images, coarse labels
    assert dataset_kind(f"cifar100:{path}") == "image-classification"


def test_a_root_option_works_as_the_path(cifar10_tar):
    a = load_dataset("cifar10", root=str(cifar10_tar), val_fraction=0.2)
    assert len(a.test) == 6
    with pytest.raises(ConfigError, match="drop the root option"):
        load_dataset(f"cifar10:{cifar10_tar}", root=str(cifar10_tar))


def _refusal(path, loader=load_cifar10) -> str:
    with pytest.raises((ConfigError, DataNotFoundError)) as err:
        loader(str(path))
    message = str(err.value)
    assert "\n" not in message and "Traceback" not in message
    return message


def test_missing_path_and_no_path(tmp_path):
    assert "does not exist" in _refusal(tmp_path / "nope.tar.gz")
    assert "cifar10:/path/to/cifar-10-python.tar.gz" in str(
        pytest.raises(DataNotFoundError, load_cifar10).value)


def test_corrupt_archives_are_refused(tmp_path, cifar10_tar):
    (tmp_path / "junk.tar.gz").write_bytes(b"not an archive at all" * 10)
    assert "not a readable tar archive" in _refusal(tmp_path / "junk.tar.gz")
    raw = cifar10_tar.read_bytes()
    (tmp_path / "cut.tar.gz").write_bytes(raw[: len(raw) // 2])  # a broken download
    assert "not a readable tar archive" in _refusal(tmp_path / "cut.tar.gz")


def test_wrong_archive_is_refused_by_name(tmp_path, cifar10_tar):
    c100 = write_archive(tmp_path / "c100.tar.gz", "cifar-100-python", cifar100_members())
    assert "it is not cifar-10-python.tar.gz" in _refusal(c100)
    assert "it is not cifar-100-python.tar.gz" in _refusal(cifar10_tar, load_cifar100)
    (tmp_path / "x.csv").write_text("text,label\nhi,a\n")
    assert "not a readable tar archive" in _refusal(tmp_path / "x.csv")


def test_a_pickle_naming_code_is_refused(tmp_path):
    members = {**cifar10_members(), "test_batch": pickle.dumps(print)}  # builtins.print
    path = write_archive(tmp_path / "evil.tar.gz", "cifar-10-batches-py", members)
    assert "refusing to unpickle global builtins.print" in _refusal(path)


@pytest.mark.parametrize("change, message", [
    (lambda b: {**b, "data": b["data"][:, :100]}, "must be a (N, 3072) uint8 array"),
    (lambda b: {**b, "data": b["data"].astype(np.int16)}, "must be a (N, 3072) uint8 array"),
    (lambda b: {k: v for k, v in b.items() if k != "labels"}, "'labels' must be a list"),
    (lambda b: {**b, "labels": b["labels"][:-1]}, "4 images but 3 labels"),
    (lambda b: {**b, "labels": [0, 1, 2, 10]}, "labels run from 0 to 10, outside 0..9"),
])
def test_a_batch_of_the_wrong_format_is_refused(tmp_path, change, message):
    members = cifar10_members()
    members["data_batch_3"] = change(members["data_batch_3"])
    path = write_archive(tmp_path / "bad.tar.gz", "cifar-10-batches-py", members)
    assert message in _refusal(path)
    assert "data_batch_3" in _refusal(path)


def test_a_gzip_of_one_pickle_is_not_the_archive(tmp_path):
    (tmp_path / "one.gz").write_bytes(gzip.compress(py2_dumps(cifar10_members()["test_batch"])))
    assert "not a readable tar archive" in _refusal(tmp_path / "one.gz")


def test_train_cli_refuses_a_missing_cifar_path_in_one_line(tmp_path, capsys):
    code = main(["train", "--model", "vit-tiny", "--data", f"cifar10:{tmp_path}/none.tar.gz",
                 "--steps", "1", "--out", str(tmp_path / "run"), "--quiet"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "none.tar.gz does not exist" in err[0]
    assert not (tmp_path / "run").exists()


def test_labels_saved_as_an_array_are_read_too(tmp_path):
    members = cifar10_members()
    members["test_batch"]["labels"] = np.array(members["test_batch"]["labels"], np.int64)
    path = write_archive(tmp_path / "c.tar.gz", "cifar-10-batches-py", members)
    assert load_cifar10(str(path), val_fraction=0.2).test.labels.tolist() == [0, 1, 2, 0, 1, 2]


def test_a_fifo_is_refused_without_blocking(tmp_path):
    import os

    os.mkfifo(tmp_path / "pipe.tar.gz")
    assert "not a regular file" in _refusal(tmp_path / "pipe.tar.gz")


def test_an_archive_under_its_own_name_is_recognised(cifar10_tar, tmp_path):
    assert dataset_kind(str(cifar10_tar)) == "image-classification"
    assert len(load_dataset(str(cifar10_tar), val_fraction=0.2).test) == 6
    folder = write_folder(tmp_path / "y", "cifar-10-batches-py", cifar10_members())
    assert load_dataset(str(folder), val_fraction=0.2).num_classes == 10
