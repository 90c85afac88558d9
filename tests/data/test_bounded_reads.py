"""Bounded reads: a few bytes on disk never turn into gigabytes.

The numpy-only unpickler checks every shape against what the data can hold before it
allocates; gzip'd idx files and pickles are decompressed no further than the data set's
size. Each refusal is one line naming the file. Memory is measured with ``tracemalloc``
(numpy and the pickle module report their allocations to it).
"""

from __future__ import annotations

import gzip
import pickle
import struct
import time
import tracemalloc
import zlib

import numpy as np
import pytest

from tokengeo.data import images
from tokengeo.data.bounded import CorruptDataError, read_bounded
from tokengeo.data.safe_pickle import UnsafePickleError, load_array
from tokengeo.errors import DataNotFoundError, TokengeoError

try:
    from numpy._core.multiarray import _reconstruct
except ImportError:  # numpy 1.x
    from numpy.core.multiarray import _reconstruct

MB = 1 << 20


def _array_pickle(shape, dtype="u1", data=b"", first_shape=(0,), n=1) -> bytes:
    """A pickle of ``n`` arrays as numpy writes them, ``_reconstruct(ndarray, first_shape,
    b'b')`` then the state ``(1, shape, dtype, False, data)``, with any shape and data."""

    class Fake:
        def __reduce__(self):
            return (_reconstruct, (np.ndarray, first_shape, b"b"),
                    (1, shape, np.dtype(dtype), False, data))

    return pickle.dumps(Fake() if n == 1 else [Fake() for _ in range(n)], protocol=4)


def _bounded(fn, *args, **kwargs):
    """(exception raised by ``fn``, seconds, peak traced bytes)."""
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        fn(*args, **kwargs)
    except TokengeoError as exc:
        caught = exc
    else:
        caught = None
    seconds = time.perf_counter() - t0
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return caught, seconds, peak


def _zeros_gz(prefix: bytes, n_zeros: int) -> bytes:
    """gzip of ``prefix`` + ``n_zeros`` zero bytes, compressed in 1 MB chunks."""
    c = zlib.compressobj(9, zlib.DEFLATED, 31)  # wbits 31: gzip container
    chunk = bytes(MB)
    parts = [c.compress(prefix)]
    parts += [c.compress(chunk) for _ in range(n_zeros // MB)]
    return b"".join(parts) + c.flush()


def _one_line(exc: BaseException) -> str:
    text = str(exc)
    assert "\n" not in text
    return text


BOMBS = {  # name -> (pickle bytes, words of the refusal)
    "_reconstruct shape of 1.57 GB": (_array_pickle((2,), data=b"ab",
                                                    first_shape=(1_570_000_000,)), "larger"),
    "state shape of 8.8 GB (int64)": (_array_pickle((1_100_000_000,), "i8"), "larger"),
    "state shape of 1.6 GB, 16 data bytes": (_array_pickle((40000, 40000), data=bytes(16)),
                                             "larger"),
    "an item of 100 MB (void dtype)": (_array_pickle((1,), "V100000000"), "larger"),
    "BINBYTES8 declaring 9 GB": (b"\x80\x04\x8e" + struct.pack("<Q", 9 << 30) + b"x" * 9 + b".",
                                 "not a complete pickle"),
    "BINUNICODE8 declaring 9 GB": (b"\x80\x04\x8d" + struct.pack("<Q", 9 << 30) + b"x" + b".",
                                   "not a complete pickle"),
    "BYTEARRAY8 declaring 9 GB": (b"\x80\x05\x96" + struct.pack("<Q", 9 << 30) + b"x" + b".",
                                  "not a complete pickle"),
}


@pytest.mark.parametrize("name", list(BOMBS))
def test_pickle_bombs_are_refused_fast_without_allocating(name):
    data, words = BOMBS[name]
    assert len(data) < 200
    exc, seconds, peak = _bounded(load_array, data, what="bomb.gz")
    assert isinstance(exc, UnsafePickleError), exc
    assert words in _one_line(exc) and "bomb.gz" in str(exc)
    assert seconds < 1.0 and peak < 4 * MB, (seconds, peak)


def test_many_arrays_sharing_one_data_string_are_capped_in_total():
    data = _array_pickle((MB,), data=bytes(MB), n=50)  # 1 MB on disk, 50 MB if built
    assert len(data) < 2 * MB
    exc, _, peak = _bounded(load_array, data)
    assert isinstance(exc, UnsafePickleError) and "larger" in str(exc)
    assert peak < 8 * MB


@pytest.mark.parametrize("state, words", [
    ((1, (2, 3), np.dtype("u1"), False, bytes(5)), "needs 6 data bytes, got 5"),
    ((1, (2, 3), np.dtype("u1"), False, "abcdef"), "needs 6 data bytes, got str"),
    ((1, (2, 3), np.dtype("O"), False, bytes(6)), "not a numeric numpy dtype"),
    ((1, (2, -3), np.dtype("u1"), False, bytes(6)), "not a tuple of sizes"),
    ((1, (2.0, 3), np.dtype("u1"), False, bytes(6)), "not a tuple of sizes"),
    ((1, [2, 3], np.dtype("u1"), False, bytes(6)), "not a tuple of sizes"),
    ((1, (2, 3), np.dtype("u1")), "not (version, shape, dtype, order, data)"),
])
def test_malformed_array_states_are_refused(state, words):
    class Fake:
        def __reduce__(self):
            return (_reconstruct, (np.ndarray, (0,), b"b"), state)

    with pytest.raises(UnsafePickleError, match="refusing to load") as info:
        load_array(pickle.dumps(Fake(), protocol=4), what="x.pkl")
    assert words in _one_line(info.value)


@pytest.mark.parametrize("data", [b"", b"\x80\x04garbage", pickle.dumps(np.arange(6))[:-3]])
def test_truncated_or_garbage_pickles_are_refused(data):
    with pytest.raises(UnsafePickleError, match="not a complete pickle"):
        load_array(data)


@pytest.mark.parametrize("array", [
    np.arange(24, dtype=np.uint8).reshape(2, 3, 4),
    np.asfortranarray(np.arange(12, dtype=np.int64).reshape(3, 4)),
    np.arange(5, dtype=">f8"),
    np.zeros((0, 7), dtype=np.float32),
    np.array(3.5),
])
def test_plain_arrays_still_load_exactly(array):
    for protocol in (3, 4):
        data = pickle.dumps(array, protocol=protocol)
        out, ref = load_array(data), pickle.loads(data)  # the same as numpy's own unpickling
        assert out.dtype == ref.dtype and out.shape == array.shape
        assert np.array_equal(out, array) and out.flags.writeable


def test_the_callers_limit_caps_a_legitimate_array():
    data = pickle.dumps(np.zeros(1000, np.uint8), protocol=4)
    assert load_array(data, max_bytes=1000).shape == (1000,)
    with pytest.raises(UnsafePickleError, match="what the data set can hold"):
        load_array(data, max_bytes=999)


IDX_HEADER = bytes([0, 0, 8, 3]) + np.array([10, 28, 28], dtype=">u4").tobytes()


def test_an_idx_gzip_bomb_is_refused_after_the_expected_size(tmp_path):
    path = tmp_path / "train-images-idx3-ubyte.gz"
    path.write_bytes(_zeros_gz(IDX_HEADER + bytes(10 * 28 * 28), 100 * MB))
    assert path.stat().st_size < MB  # 100 MB of zeros after the header
    exc, seconds, peak = _bounded(images.read_idx, path)
    assert isinstance(exc, CorruptDataError) and str(path) in _one_line(exc)
    assert "holds more data than its header's shape (10, 28, 28)" in str(exc)
    assert seconds < 1.0 and peak < 2 * MB, (seconds, peak)


def test_an_idx_header_declaring_more_than_the_data_set_is_refused_before_reading(tmp_path):
    path = tmp_path / "x-idx3-ubyte.gz"
    header = bytes([0, 0, 8, 3]) + np.array([4_000_000_000, 4_000_000, 28], ">u4").tobytes()
    path.write_bytes(_zeros_gz(header, 10 * MB))
    exc, seconds, peak = _bounded(images.read_idx, path, max_bytes=60000 * 28 * 28)
    assert isinstance(exc, CorruptDataError) and "more than the 47,040,000 bytes" in str(exc)
    assert seconds < 0.5 and peak < MB
    small = tmp_path / "y-idx3-ubyte"
    small.write_bytes(IDX_HEADER + bytes(10 * 28 * 28))
    assert images.read_idx(small, max_bytes=7840).shape == (10, 28, 28)
    with pytest.raises(CorruptDataError, match="more than the 7,839 bytes"):
        images.read_idx(small, max_bytes=7839)


@pytest.mark.parametrize("raw, words", [
    (b"", "not a uint8 idx file"),
    (IDX_HEADER[:6], "truncated: 2 of 12 bytes of the header"),
    (IDX_HEADER + bytes(100), "truncated: 100 of 7840 bytes of shape (10, 28, 28)"),
    (bytes([0, 0, 9, 1, 0, 0, 0, 1, 0]), "not a uint8 idx file"),
])
def test_bad_idx_files_end_in_one_line(tmp_path, raw, words):
    for name, data in (("plain-idx", raw), ("zipped-idx.gz", gzip.compress(raw))):
        path = tmp_path / name
        path.write_bytes(data)
        with pytest.raises(DataNotFoundError) as info:
            images.read_idx(path)
        assert words in _one_line(info.value) and str(path) in str(info.value)


@pytest.mark.parametrize("data, words", [
    (b"not gzip at all", "not a readable gzip file"),
    (gzip.compress(bytes(1000))[:-8], "not a readable gzip file"),  # no CRC trailer
    (gzip.compress(bytes(1000))[:-4] + b"\x00\x00\x00\x00", "not a readable gzip file"),
])
def test_broken_gzip_is_one_line(tmp_path, data, words):
    path = tmp_path / "x.gz"
    path.write_bytes(data)
    with pytest.raises(CorruptDataError) as info:
        read_bounded(path, 10_000)
    assert words in _one_line(info.value)


def _animal_folder(tmp_path, data: bytes, labels: bytes):
    folder = tmp_path / "animal"
    folder.mkdir(exist_ok=True)
    (folder / "animal_data_version_3.gz").write_bytes(data)
    (folder / "animal_label_version_3.gz").write_bytes(labels)
    return folder


def test_animal_mnist_gzip_bomb_is_refused_after_the_data_sets_size(tmp_path):
    pixels = np.random.default_rng(0).integers(0, 256, (100, 28, 28), dtype=np.uint8)
    labels = gzip.compress(pickle.dumps(np.arange(100, dtype=np.int64) % 10, protocol=4))
    ok = _animal_folder(tmp_path, gzip.compress(pickle.dumps(pixels, protocol=4)), labels)
    assert images.load_animal_mnist(root=str(ok)).num_classes == 10  # the caps fit real data
    bomb = _zeros_gz(pickle.dumps(pixels, protocol=4), 100 * MB)
    folder = _animal_folder(tmp_path, bomb, labels)
    exc, seconds, peak = _bounded(images.load_animal_mnist, root=str(folder))
    assert isinstance(exc, CorruptDataError), exc
    assert "animal_data_version_3.gz holds more than the 7,844,096 bytes" in _one_line(exc)
    assert seconds < 1.0 and peak < 24 * MB, (seconds, peak)


def test_animal_mnist_array_bomb_is_refused(tmp_path):
    labels = gzip.compress(pickle.dumps(np.zeros(20, np.int64), protocol=4))
    data = gzip.compress(_array_pickle((10000, 28, 28), data=bytes(100)))
    folder = _animal_folder(tmp_path, data, labels)
    with pytest.raises(UnsafePickleError) as info:
        images.load_animal_mnist(root=str(folder))
    assert "animal_data_version_3.gz" in _one_line(info.value)
    assert "an array of shape (10000, 28, 28) (7,840,000 bytes) is larger" in str(info.value)
