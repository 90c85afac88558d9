"""Caches and reports that trust nothing on disk.

A reproduce cell file that is unreadable, not UTF-8, not JSON or of the wrong structure is
recomputed with one log line saying why; a moved or copied output folder still finds its
cells; the report embeds only PNGs inside the output folder's own ``figures/``.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tokengeo.experiments import reproduce as rp
from tokengeo.experiments.cells import (
    CELL_FORMAT,
    Cell,
    CellStore,
    arguments_hash,
)
from tokengeo.experiments.claims import Claim
from tokengeo.experiments.report import OUTSIDE, SuiteOutput, write_report
from tokengeo.experiments.stats import Region, mean_interval

CALLS: list[int] = []
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32  # a PNG signature is all the report checks


def _measure(seed: int, figure_dir: str) -> dict:
    CALLS.append(seed)
    fig = Path(figure_dir) / f"seed{seed}.png"
    fig.parent.mkdir(parents=True, exist_ok=True)
    fig.write_bytes(PNG)
    return {"stats": {"acc": 0.5 + 0.01 * seed}, "figures": [str(fig)]}


def _cells(settings, ctx):
    return [Cell("fake", f"s{seed}", _measure, {"seed": seed, "figure_dir": str(ctx.figure_dir)},
                 fields=("stats.acc",)) for seed in settings["seeds"]]


def _summarise(settings, results, ctx):
    accs = [results[f"s{i}"].value["stats"]["acc"] for i in settings["seeds"]]
    claim = Claim("fake", "acc is positive", "Fake, §1", "> 0", "acc", Region.above(0),
                  measured=mean_interval(accs))
    figures = [Path(f) for r in results.values() for f in r.value["figures"]]
    return SuiteOutput("fake", "Fake suite", "Fake et al.", [claim], figures=figures)


@pytest.fixture
def conf(fake_suite):
    CALLS.clear()
    return fake_suite(_cells, _summarise, "[quick]\nseeds = [0, 1]\n", seeds="int_list")


def _reproduce(out: Path, conf: Path) -> tuple[list[int], list[str], str]:
    """Run the fake suite into ``out``: (cells computed, log lines, report.html)."""
    CALLS.clear()
    logs: list[str] = []
    path, _ = rp.reproduce(rp.ReproduceConfig(out=out, config_dir=conf), log=logs.append)
    return list(CALLS), logs, path.read_text()


def _cell_file(out: Path, seed: int) -> Path:
    (path,) = (out / "cells" / "fake").glob(f"s{seed}-*.json")
    return path


def _envelope(value, cell="fake/s0", fmt=CELL_FORMAT) -> bytes:
    return json.dumps({"format": fmt, "cell": cell, "value": value}).encode()


CORRUPTIONS = {  # kind -> (bytes written over cell s0, words of the log line)
    "invalid UTF-8": (b"\xff\xfe{\"format\"", "not UTF-8"),
    "not JSON": (b"{\"format\": \"tokengeo-cell/1\", \"cell\"", "not valid JSON"),
    "empty file": (b"", "not valid JSON"),
    "empty object": (b"{}", "not a tokengeo cell"),
    "empty list": (b"[]", "not a tokengeo cell"),
    "null": (b"null", "not a tokengeo cell"),
    "a number": (b"1", "not a tokengeo cell"),
    "a bare value (old format)": (b'{"stats": {"acc": 1.0}, "figures": []}', "not a tokengeo cell"),
    "another format": (_envelope({"stats": {"acc": 1.0}}, fmt="tokengeo-cell/0"),
                       "not a tokengeo cell"),
    "another cell's result": (_envelope({"stats": {"acc": 1.0}}, cell="fake/s1"),
                              "belongs to cell 'fake/s1'"),
    "value not an object": (_envelope([1, 2]), "holds no result object"),
    "value without the field read": (_envelope({"stats": {}}), "lacks the field 'stats.acc'"),
    "value empty": (_envelope({}), "lacks the field 'stats.acc'"),
    "figures not a list": (_envelope({"stats": {"acc": 1.0}, "figures": "a.png"}),
                           "'figures' entry that is not a list"),
    "figures not paths": (_envelope({"stats": {"acc": 1.0}, "figures": [1]}),
                          "'figures' entry that is not a list"),
}


@pytest.mark.parametrize("kind", list(CORRUPTIONS))
def test_a_corrupt_cell_is_recomputed_with_a_log_line(conf, tmp_path, kind):
    data, why = CORRUPTIONS[kind]
    out = tmp_path / "out"
    assert _reproduce(out, conf)[0] == [0, 1]
    _cell_file(out, 0).write_bytes(data)
    calls, logs, html = _reproduce(out, conf)
    assert calls == [0]  # only the corrupt cell, and no crash
    (line,) = [m for m in logs if "recomputing" in m]
    assert why in line and "s0" in line and "\n" not in line
    assert json.loads(_cell_file(out, 0).read_text())["format"] == CELL_FORMAT  # rewritten
    assert "reproduced" in html
    assert _reproduce(out, conf)[0] == []  # and then read from disk again


def test_an_unreadable_cell_is_recomputed(conf, tmp_path, monkeypatch):
    out = tmp_path / "out"
    _reproduce(out, conf)
    bad = _cell_file(out, 0)
    import os

    real = os.open

    def refusing_open(path, *args, **kwargs):
        if Path(path) == bad:
            raise PermissionError(13, "Permission denied")
        return real(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", refusing_open)
    calls, logs, _ = _reproduce(out, conf)
    assert calls == [0]
    assert any("(Permission denied)" in m and "recomputing" in m for m in logs)


def test_a_symlink_loop_in_a_cells_place_is_recomputed(conf, tmp_path):
    out = tmp_path / "out"
    _reproduce(out, conf)
    bad = _cell_file(out, 0)
    bad.unlink()
    os.symlink(bad.name, bad)  # reading it raises OSError (too many levels of links)
    calls, logs, _ = _reproduce(out, conf)
    assert calls == [0] and any("cannot be read" in m for m in logs)
    assert _reproduce(out, conf)[0] == []


def test_a_folder_in_a_cells_place_is_recomputed_and_left_alone(conf, tmp_path):
    out = tmp_path / "out"
    _reproduce(out, conf)
    bad = _cell_file(out, 0)
    bad.unlink()
    bad.mkdir()
    (bad / "keep.txt").write_text("not tokengeo's")
    calls, logs, html = _reproduce(out, conf)
    assert calls == [0] and "reproduced" in html
    assert any("is a folder" in m for m in logs)
    assert (bad / "keep.txt").read_text() == "not tokengeo's"


def test_a_cell_whose_figures_failed_is_recomputed_with_a_reason(conf, tmp_path):
    out = tmp_path / "out"
    _reproduce(out, conf)
    _cell_file(out, 0).write_bytes(_envelope({"stats": {"acc": 1.0}, "figures": [],
                                              "figure_error": "no matplotlib"}))
    calls, logs, _ = _reproduce(out, conf)
    assert calls == [0] and any("failed to draw" in m for m in logs)


@pytest.mark.parametrize("how", ["move", "copy"])
def test_a_moved_or_copied_output_folder_finds_its_cells_and_figures(conf, tmp_path, how):
    first = tmp_path / "first"
    _reproduce(first, conf)
    stored = json.loads(_cell_file(first, 0).read_text())["value"]["figures"]
    assert stored == ["$OUT/figures/fake/seed0.png"]  # no absolute path on disk
    second = tmp_path / "elsewhere" / "second"
    second.parent.mkdir()
    (shutil.move if how == "move" else shutil.copytree)(first, second)
    calls, _, html = _reproduce(second, conf)
    assert calls == []  # every cell read from disk
    assert html.count("data:image/png;base64,") == 2  # figures found in the new place
    assert OUTSIDE not in html


def test_a_relative_out_finds_the_cells_of_the_absolute_one(conf, tmp_path, monkeypatch):
    _reproduce(tmp_path / "out", conf)
    monkeypatch.chdir(tmp_path)
    assert _reproduce(Path("out"), conf)[0] == []


def test_cache_keys_hold_paths_relative_to_the_output_folder(tmp_path):
    def cell(path: Path) -> Cell:
        return Cell("s", "k", _measure, {"seed": 0, "figure_dir": str(path),
                                         "nested": [{"run_dir": str(path / "runs" / "a")}]})

    a, b = tmp_path / "a", tmp_path / "b"
    assert arguments_hash(cell(a / "figures"), a) == arguments_hash(cell(b / "figures"), b)
    assert CellStore(a).path(cell(a / "f")).name == CellStore(b).path(cell(b / "f")).name
    # a path outside the output folder is part of the key as it is
    assert arguments_hash(cell(tmp_path / "x"), a) != arguments_hash(cell(tmp_path / "y"), a)
    # a sibling whose name starts like the output folder is outside it
    assert arguments_hash(cell(tmp_path / "ab"), a) != arguments_hash(cell(tmp_path / "bb"), b)


def test_a_tampered_figure_path_in_a_cell_is_not_embedded(conf, tmp_path):
    out = tmp_path / "out"
    _reproduce(out, conf)
    secret = tmp_path / "secret.png"
    secret.write_bytes(PNG + b"SECRET")
    for fig in ["/etc/hostname", "$OUT/../secret.png", str(secret)]:
        _cell_file(out, 0).write_bytes(_envelope({"stats": {"acc": 1.0}, "figures": [fig]}))
        calls, _, html = _reproduce(out, conf)
        assert calls == []  # a well-formed cell: its numbers are used, its figure is not
        assert html.count("data:image/png;base64,") == 1  # only seed 1's own figure
        assert OUTSIDE in html
        md = (out / "report.md").read_text()
        assert "secret.png)" not in md and "hostname)" not in md


def _report(out: Path, figures: list[Path]) -> tuple[str, str]:
    suite = SuiteOutput("demo", "Demo", "paper", [], figures=figures)
    html = write_report(out, [suite], "t", []).read_text()
    return html, (out / "report.md").read_text()


def test_report_embeds_only_pngs_inside_its_figures_folder(tmp_path):
    out = tmp_path / "out"
    figs = out / "figures" / "demo"
    figs.mkdir(parents=True)
    (figs / "ok.png").write_bytes(PNG)
    (tmp_path / "x.png").write_bytes(PNG + b"OUTSIDE")
    (out / "top.png").write_bytes(PNG)  # in the output folder, but not under figures/
    (figs / "fake.png").write_text("not a png")
    os.symlink("/etc/hostname", figs / "link.png")
    os.symlink(tmp_path / "x.png", figs / "link2.png")
    cases = {
        "ok": (figs / "ok.png", None),
        "hostname": (Path("/etc/hostname"), OUTSIDE),
        "x": (figs / ".." / ".." / ".." / "x.png", OUTSIDE),
        "top": (out / "top.png", OUTSIDE),
        "link": (figs / "link.png", OUTSIDE),
        "link2": (figs / "link2.png", OUTSIDE),
        "fake": (figs / "fake.png", "not a PNG file: not embedded"),
        "gone": (figs / "gone.png", "not found"),
    }
    for name, (fig, problem) in cases.items():
        html, md = _report(out, [fig])
        if problem is None:
            assert "data:image/png;base64," in html and f"]({'figures/demo/ok.png'})" in md
        else:
            assert "base64," not in html, name
            shown = Path(os.path.relpath(fig, out)).as_posix()  # report.json's path
            assert f"{shown} {problem}" in html and f"{shown} {problem}" in md, name
            assert "](" not in md, name
