"""Never delete what tokengeo did not write: `similarity --overwrite` and its output marker."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tokengeo.cli import main
from tokengeo.errors import ConfigError
from tokengeo.outmarker import MARKER, check_output, marker_command
from tokengeo.runlock import LOCK_NAME, RunLock


class FakeResult:
    """Stands in for HeadSimilarityResult: the overwrite logic is what is tested here."""

    n_samples = 1

    def save(self, out: Path) -> None:
        (out / "similarity.json").write_text("{}")

    def table(self) -> str:
        return "table"


@pytest.fixture
def corpus(tmp_path) -> Path:
    path = tmp_path / "corpus.txt"
    path.write_text("One sentence. Another one.\n")
    return path


@pytest.fixture
def fake_analysis(monkeypatch):
    import tokengeo.probes.similarity.run as run

    monkeypatch.setattr(run, "run_similarity", lambda cfg, progress=True, device="cpu": FakeResult())


def similarity(corpus: Path, out: Path, *extra: str) -> int:
    return main(["similarity", "--corpus", str(corpus), "--out", str(out), "--no-figures",
                 *extra])


def one_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("tokengeo similarity: error: ")
    return err[0]


def tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.mark.parametrize("marker", [None, "{broken", '{"command": "flow"}', "[]"])
def test_overwrite_refuses_a_folder_without_its_marker(tmp_path, capsys, corpus, fake_analysis,
                                                       marker):
    out = tmp_path / "thesis"
    (out / "chapters").mkdir(parents=True)
    (out / "chapters" / "one.tex").write_text("years of work")
    if marker is not None:
        (out / MARKER).write_text(marker)
    before = tree(out)
    assert similarity(corpus, out, "--overwrite") == 2
    line = one_line(capsys)
    assert "--overwrite will not delete it" in line and str(out) in line
    assert tree(out) == before  # every file survives, nothing added (no lock left)


def test_overwrite_replaces_its_own_previous_output(tmp_path, capsys, corpus, fake_analysis):
    out = tmp_path / "sim"
    assert similarity(corpus, out) == 0
    assert marker_command(out) == "similarity"
    assert json.loads((out / MARKER).read_text())["command"] == "similarity"
    assert similarity(corpus, out) == 2  # without --overwrite: refused
    assert "pass --overwrite" in one_line(capsys)
    assert similarity(corpus, out, "--overwrite") == 0
    names = sorted(p.name for p in out.iterdir())
    assert names == sorted([MARKER, "config.json", "similarity.json"])
    assert LOCK_NAME not in names


def test_overwrite_keeps_a_users_file_inside_a_previous_output(tmp_path, capsys, corpus,
                                                              fake_analysis):
    out = tmp_path / "sim"
    assert similarity(corpus, out) == 0
    (out / "my-notes.txt").write_text("mine, not tokengeo's")
    before = tree(out)
    assert similarity(corpus, out, "--overwrite") == 2
    line = one_line(capsys)
    assert "'my-notes.txt'" in line and "did not write" in line
    assert tree(out) == before


def test_lock_stays_held_after_the_output_folder_is_swapped(tmp_path, corpus, fake_analysis,
                                                            monkeypatch):
    import tokengeo.commands.similarity as command

    out, write, seen = tmp_path / "sim", command._write, []

    def write_then_probe(out_dir, *args, **kwargs):
        write(out_dir, *args, **kwargs)  # --out is now the new folder, run not yet finished
        with pytest.raises(ConfigError, match="is in use by pid"):
            RunLock(out_dir, "tokengeo similarity").acquire()
        seen.append(True)

    monkeypatch.setattr(command, "_write", write_then_probe)
    assert similarity(corpus, out) == 0 and seen == [True]
    assert not (out / LOCK_NAME).exists()


def test_out_that_is_a_file_is_never_replaced(tmp_path, capsys, corpus, fake_analysis):
    out = tmp_path / "notes.txt"
    out.write_text("keep me")
    assert similarity(corpus, out, "--overwrite") == 2
    assert "is a file, not a folder" in one_line(capsys)
    assert out.read_text() == "keep me"
    with pytest.raises(ConfigError, match="is a file, not a folder"):  # also from Python
        check_output(out, "similarity", overwrite=True)
    check_output(tmp_path / "new", "similarity", overwrite=False)  # a new folder: fine
