"""The SmolLM2 model cache is checked, not trusted: a damaged or partial cache folder is
detected and rebuilt (never half-used, never ENOTEMPTY), and everything in it follows the
umask. Runs on a tiny random Llama through the injectable converter of test_pretrained."""

from __future__ import annotations

import json
import os
import stat

import pytest

pytest.importorskip("transformers", reason="needs the 'hf' extra")
pytest.importorskip("tokenizers", reason="needs the 'data' extra")
from test_pretrained import Converter  # noqa: E402

from tokengeo.models.hf import pretrained  # noqa: E402

RECORD = {"file": "x.gguf", "size": 1, "mtime_ns": 1}


def _build(tmp_path):
    convert = Converter()
    folder = pretrained.ensure_cached(tmp_path, RECORD, convert)
    assert convert.calls == 1 and pretrained.cache_problem(folder, RECORD) is None
    return folder


def _truncate(p):
    p.write_bytes(p.read_bytes()[:-7])


def _header_garbage(p):
    p.write_bytes(b"\xff" * 64)


DAMAGE = {
    "no source record": lambda f: (f / pretrained.SOURCE_FILE).unlink(),
    "source record not JSON": lambda f: (f / pretrained.SOURCE_FILE).write_text("{"),
    "source record a list": lambda f: (f / pretrained.SOURCE_FILE).write_text("[]"),
    "source record of another file": lambda f: (f / pretrained.SOURCE_FILE).write_text(
        json.dumps({**RECORD, "size": 2})),
    "config.json a list": lambda f: (f / "config.json").write_text("[1, 2]"),
    "config.json missing": lambda f: (f / "config.json").unlink(),
    "weights missing": lambda f: (f / "model.safetensors").unlink(),
    "weights truncated": lambda f: _truncate(f / "model.safetensors"),
    "weights header garbage": lambda f: _header_garbage(f / "model.safetensors"),
    "tokenizer missing": lambda f: (f / "tokenizer.json").unlink(),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_cache_is_detected_and_rebuilt(tmp_path, capsys, damage):
    folder = _build(tmp_path)
    DAMAGE[damage](folder)
    assert pretrained.cache_problem(folder, RECORD) is not None
    convert = Converter()
    again = pretrained.ensure_cached(tmp_path, RECORD, convert)
    assert again == folder and convert.calls == 1  # rebuilt, in place
    assert pretrained.cache_problem(folder, RECORD) is None
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "rebuilding it" in err[0] and str(folder) in err[0]
    assert [p.name for p in tmp_path.iterdir()] == [folder.name]  # nothing left aside


def test_a_whole_cache_is_used_without_converting(tmp_path):
    folder = _build(tmp_path)
    convert = Converter()
    assert pretrained.ensure_cached(tmp_path, RECORD, convert) == folder
    assert convert.calls == 0


def test_the_cache_follows_the_umask(tmp_path):
    old = os.umask(0o022)
    try:
        folder = _build(tmp_path)
    finally:
        os.umask(old)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o755
    for p in folder.iterdir():
        assert stat.S_IMODE(p.stat().st_mode) == 0o644, p.name


def test_a_cache_folder_that_is_a_file_is_replaced(tmp_path):
    key = pretrained.source_key(RECORD)
    (tmp_path / key).write_text("not a folder")
    convert = Converter()
    folder = pretrained.ensure_cached(tmp_path, RECORD, convert)
    assert convert.calls == 1 and pretrained.cache_problem(folder, RECORD) is None
