"""tokengeo.io: the one atomic writer."""

from __future__ import annotations

import json
import os
import stat

import pytest

from tokengeo import io


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_json_round_trip(tmp_path):
    obj = {"a": [1, 2.5, "x"], "b": {"c": None, "d": True}}
    io.write_json(tmp_path / "x.json", obj)
    assert json.loads((tmp_path / "x.json").read_text()) == obj
    assert (tmp_path / "x.json").read_text().endswith("\n")


def test_bytes_and_text_replace_the_old_file(tmp_path):
    p = tmp_path / "f"
    io.write_bytes(p, b"old")
    io.write_text(p, "néw")
    assert p.read_bytes() == "néw".encode()
    assert os.listdir(tmp_path) == ["f"]


def test_file_mode_is_that_of_a_plain_open(tmp_path, umask_022):
    with open(tmp_path / "plain", "w") as f:
        f.write("x")
    io.write_text(tmp_path / "atomic", "x")
    assert _mode(tmp_path / "atomic") == _mode(tmp_path / "plain") == 0o644


def test_folder_mode_is_that_of_mkdir(tmp_path, umask_022):
    with io.atomic_dir(tmp_path / "d") as d:
        (d / "a").write_text("1")
    assert _mode(tmp_path / "d") == 0o755


def test_a_failed_write_leaves_no_temporary_and_keeps_the_old_file(tmp_path):
    p = tmp_path / "x.json"
    io.write_json(p, {"v": 1})
    with pytest.raises(ValueError):
        io.write_json(p, {"v": float("nan")})  # not JSON
    with pytest.raises(RuntimeError), io.atomic_path(p) as tmp:
        tmp.write_text('{"v": 2')  # half written
        raise RuntimeError("crash midway")
    assert os.listdir(tmp_path) == ["x.json"]
    assert json.loads(p.read_text()) == {"v": 1}


def test_a_failed_folder_write_leaves_nothing(tmp_path):
    with io.atomic_dir(tmp_path / "d") as d:
        (d / "a").write_text("old")
    with pytest.raises(RuntimeError), io.atomic_dir(tmp_path / "d") as d:
        (d / "a").write_text("new")
        raise RuntimeError("crash midway")
    assert os.listdir(tmp_path) == ["d"]
    assert (tmp_path / "d" / "a").read_text() == "old"


def test_atomic_dir_replaces_an_existing_folder(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "stale").write_text("1")
    with io.atomic_dir(tmp_path / "d") as d:
        (d / "fresh").write_text("2")
    assert os.listdir(tmp_path) == ["d"]
    assert os.listdir(tmp_path / "d") == ["fresh"]


def test_remove_temporaries(tmp_path):
    (tmp_path / ".tmp-x-0123abcd").write_text("torn")
    (tmp_path / ".tmp-old-d-89abcdef").mkdir()
    (tmp_path / "keep").write_text("1")
    (tmp_path / ".tmp-notes.txt").write_text("a user's file named like a temporary")
    io.remove_temporaries(tmp_path)
    assert sorted(os.listdir(tmp_path)) == [".tmp-notes.txt", "keep"]
