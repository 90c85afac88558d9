import gzip
import pickle

import numpy as np
import pytest
import torch

from tokengeo.data import images, load_dataset, sources
from tokengeo.data.safe_pickle import UnsafePickleError, load_array
from tokengeo.errors import DataNotFoundError


@pytest.fixture(scope="module", autouse=True)
def _private_cache(tmp_path_factory):
    """Tokenizer and encoding caches go to a temporary folder, not the user's cache."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TOKENGEO_CACHE", str(tmp_path_factory.mktemp("cache")))
        yield


def _require(source):
    if not source.available():
        pytest.skip(f"{source.name} is not installed here; install it with: {source.install}")


@pytest.fixture(scope="module")
def fashion():
    _require(sources.FASHION_MNIST)
    return images.load_fashion_mnist()


@pytest.fixture(scope="module")
def animal():
    _require(sources.ANIMAL_MNIST)
    return images.load_animal_mnist()


def test_fashion_mnist_shapes_counts_and_balance(fashion):
    assert fashion.kind == "image-classification"
    assert (len(fashion.train), len(fashion.val), len(fashion.test)) == (54000, 6000, 10000)
    assert fashion.image_shape == (1, 28, 28) and fashion.num_classes == 10
    assert fashion.class_names[0] == "T-shirt/top" and fashion.class_names[9] == "Ankle boot"
    for split in (fashion.train, fashion.val, fashion.test):
        assert split.images.dtype == torch.uint8 and split.labels.dtype == torch.int64
        assert split.images.shape[1:] == (1, 28, 28)
    train_val = torch.cat([fashion.train.labels, fashion.val.labels])
    assert torch.bincount(train_val).tolist() == [6000] * 10
    assert torch.bincount(fashion.test.labels).tolist() == [1000] * 10
    assert torch.bincount(fashion.val.labels).tolist() == [600] * 10  # stratified val
    assert fashion.train.images.max() == 255 and fashion.train.images.min() == 0


def test_fashion_mnist_normalize_gives_unit_statistics(fashion):
    x = fashion.normalize(fashion.train.images[:20000])  # (B, 1, 28, 28) float32
    assert x.dtype == torch.float32
    assert abs(x.mean().item()) < 0.02 and abs(x.std().item() - 1) < 0.02


def test_fashion_mnist_val_depends_on_seed_only(fashion):
    other = images.load_fashion_mnist(seed=1)
    assert torch.equal(other.test.images, fashion.test.images)  # the official test set
    assert not torch.equal(other.val.images, fashion.val.images)
    assert torch.bincount(other.val.labels).tolist() == [600] * 10


def test_animal_mnist_counts(animal):
    n = len(animal.train) + len(animal.val) + len(animal.test)
    assert n == 10000 and animal.image_shape == (1, 28, 28) and animal.num_classes == 10
    labels = torch.cat([animal.train.labels, animal.val.labels, animal.test.labels])
    assert torch.bincount(labels).tolist() == [1000] * 10
    assert torch.bincount(animal.test.labels).tolist() == [200] * 10
    assert animal.train.images.dtype == torch.uint8 and animal.train.images.float().std() > 10


def test_digits_counts_and_rescaling():
    d = load_dataset("digits")
    assert d.image_shape == (1, 8, 8) and d.class_names == [str(i) for i in range(10)]
    assert len(d.train) + len(d.val) + len(d.test) == 1797
    assert d.train.images.dtype == torch.uint8 and d.train.images.max() == 255  # 16 -> 255
    assert (len(d.val), len(d.test)) == (179, 359)
    again = load_dataset("digits", seed=0)
    assert torch.equal(again.test.images, d.test.images)  # same seed, same split
    assert not torch.equal(load_dataset("digits", seed=1).test.labels, d.test.labels)


def test_missing_fashion_mnist_names_apt_command(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKENGEO_FASHION_MNIST_DIR", str(tmp_path))
    with pytest.raises(DataNotFoundError, match="apt-get install -y dataset-fashion-mnist"):
        load_dataset("fashion-mnist")
    with pytest.raises(DataNotFoundError, match="zalandoresearch"):
        images.load_fashion_mnist(root=str(tmp_path))


def test_missing_animal_mnist_names_pip_command(tmp_path):
    with pytest.raises(DataNotFoundError, match="pip install --no-deps animal-mnist"):
        images.load_animal_mnist(root=str(tmp_path))


def test_read_idx_roundtrip_and_truncation(tmp_path):
    data = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4)
    header = bytes([0, 0, 8, 3]) + np.array([2, 3, 4], dtype=">u4").tobytes()
    path = tmp_path / "x-idx3-ubyte.gz"
    path.write_bytes(gzip.compress(header + data.tobytes()))
    assert np.array_equal(images.read_idx(path), data)
    path.write_bytes(gzip.compress(header + data.tobytes()[:-1]))
    with pytest.raises(DataNotFoundError, match="truncated"):
        images.read_idx(path)


class _Evil:
    def __reduce__(self):
        import os

        return (os.system, ("touch pwned",))


def test_restricted_unpickler_loads_arrays_and_refuses_code(tmp_path, monkeypatch):
    arr = np.arange(12, dtype=np.uint8).reshape(3, 4)
    assert np.array_equal(load_array(pickle.dumps(arr)), arr)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UnsafePickleError, match="system"):
        load_array(pickle.dumps(_Evil()))
    assert not (tmp_path / "pwned").exists()
    with pytest.raises(UnsafePickleError):
        load_array(pickle.dumps({"a": 1}))  # not an array
