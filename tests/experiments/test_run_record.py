"""report.json's ``run``: wall time and peak memory measured by ``reproduce`` itself, summed
and maxed over resumed segments; run.json as untrusted input."""

import json
import subprocess
import sys
import time
from dataclasses import asdict

import pytest

from tokengeo.errors import ConfigError
from tokengeo.experiments import reproduce as rp
from tokengeo.experiments import run_record as rr
from tokengeo.experiments.cells import Cell
from tokengeo.experiments.claims import Claim
from tokengeo.experiments.report import SuiteOutput
from tokengeo.experiments.stats import Region, paired_difference
from tokengeo.reporting.blocks import render
from tokengeo.reporting.reader import read_report

STOP_AT: list[str] = []


def _measure(seed: int, setting: str) -> dict:
    if setting in STOP_AT:
        raise KeyboardInterrupt
    time.sleep(0.05)
    return {"acc": 0.8 + (0.1 if setting == "treated" else 0.0) + 0.001 * seed}


def _cells(settings, ctx):
    return [Cell("fake", f"{s}-{seed}", _measure, {"seed": seed, "setting": s})
            for s in settings["settings"] for seed in settings["seeds"]]


def _summarise(settings, results, ctx):
    accs = {s: [results[f"{s}-{i}"].value["acc"] for i in settings["seeds"]]
            for s in settings["settings"]}
    return SuiteOutput("fake", "Fake suite", "Fake et al.", [
        Claim("fake", "treated beats baseline", "Fake, §1", "0.1", "acc diff",
              Region.above(0), measured=paired_difference(accs["treated"], accs["base"]))])


@pytest.fixture
def conf(fake_suite):
    STOP_AT.clear()
    return fake_suite(_cells, _summarise,
                      "[quick]\nseeds = [0, 1, 2]\nsettings = ['base', 'treated']\n",
                      seeds="int_list", settings="str_list")


def _segment(**over) -> rr.Segment:
    base = dict(mode="full", seed=0, started="2026-12-07T12:00:00Z", wall_seconds=10.0,
                peak_memory_bytes=100, memory_method=rr.TREE, cells_to_compute=2,
                cells_computed=2, finished=True, commit="0123abc", cpu="x", cores=2,
                load_1min_at_start=0.1)
    return rr.Segment(**{**base, **over})


def test_run_object_sums_wall_and_maxes_peak_over_the_segments_of_its_mode_and_seed():
    segs = [_segment(wall_seconds=100.0, peak_memory_bytes=5, finished=False),
            _segment(wall_seconds=20.5, peak_memory_bytes=9),
            _segment(wall_seconds=1.0, cells_to_compute=0, cells_computed=0),  # report only
            _segment(mode="quick", wall_seconds=7.0, peak_memory_bytes=99),
            _segment(seed=3, wall_seconds=7.0, peak_memory_bytes=99)]
    run = rr.run_object(segs, "full", 0)
    assert run["wall_seconds"] == 120.5 and run["peak_memory_bytes"] == 9
    assert [s["finished"] for s in run["segments"]] == [False, True]
    assert rr.run_object(segs, "paper", 0) is None


def test_tree_rss_counts_a_child_process_memory():
    child = subprocess.Popen([sys.executable, "-c",
                              "import sys, time; b = bytearray(300 * 2**20); "
                              "b[::4096] = b'x' * len(b[::4096]); print('ok', flush=True); "
                              "time.sleep(30)"], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "ok"
        mine = rr.tree_rss(child.pid)
        assert mine >= 300 * 2**20  # the pages it touched
        assert rr.tree_rss(rr.os.getpid()) >= mine  # the child is under this process
    finally:
        child.kill()
        child.wait()


def test_reproduce_writes_the_run_object_and_sums_a_resumed_segment(conf, tmp_path):
    out = tmp_path / "out"
    cfg = rp.ReproduceConfig(out=out, config_dir=conf)
    STOP_AT.append("treated")
    with pytest.raises(KeyboardInterrupt):
        rp.reproduce(cfg, log=lambda m: None)
    first = rr.read_segments(out)
    assert len(first) == 1 and not first[0].finished  # the interrupted call still counts
    assert first[0].cells_to_compute == 6 and first[0].cells_computed == 3
    STOP_AT.clear()
    rp.reproduce(cfg, log=lambda m: None)
    data = read_report(out / "report.json")
    run = data["run"]
    assert [s["finished"] for s in run["segments"]] == [False, True]
    assert run["segments"][1]["cells_to_compute"] == 3
    assert run["wall_seconds"] == pytest.approx(sum(s["wall_seconds"] for s in run["segments"]))
    assert run["wall_seconds"] >= 0.3  # six cells of 50 ms each
    assert run["peak_memory_bytes"] >= 10 * 2**20  # at least this Python process
    assert run["peak_memory_bytes"] == max(s["peak_memory_bytes"] for s in run["segments"])
    rp.reproduce(cfg, log=lambda m: None)  # every cell stored: the report only
    assert len(rr.read_segments(out)) == 2
    block = render(read_report(out / "report.json"), "run")
    assert "the sum of 2 segments" in block and "| 1 |" in block and "interrupted" in block


def test_rejudge_adds_no_segment_and_keeps_no_run_of_its_own(conf, tmp_path):
    out = tmp_path / "out"
    rp.reproduce(rp.ReproduceConfig(out=out, config_dir=conf), log=lambda m: None)
    before = (out / "run.json").read_text()
    rp.reproduce(rp.ReproduceConfig(out=out, config_dir=conf, rejudge=True), log=lambda m: None)
    assert (out / "run.json").read_text() == before
    assert read_report(out / "report.json")["run"]["wall_seconds"] == json.loads(before)[0][
        "wall_seconds"]


@pytest.mark.parametrize("damage, match", [
    (lambda s: s.update(wall_seconds=-1), "out of range"),
    (lambda s: s.update(peak_memory_bytes="big"), "out of range"),
    (lambda s: s.update(cpu="x" * 400), "out of range"),
    (lambda s: s.update(extra=1), "not a run segment"),
    (lambda s: s.pop("finished"), "not a run segment"),
])
def test_a_damaged_run_json_is_refused_naming_the_file_and_the_fix(tmp_path, damage, match):
    seg = asdict(_segment())
    damage(seg)
    (tmp_path / "run.json").write_text(json.dumps([seg]))
    with pytest.raises(ConfigError, match=rf"run\.json.*{match}.*delete it"):
        rr.read_segments(tmp_path)


def test_run_json_that_is_not_a_list_or_too_long_is_refused(tmp_path):
    (tmp_path / "run.json").write_text("{}")
    with pytest.raises(ConfigError, match="run.json"):
        rr.read_segments(tmp_path)
    (tmp_path / "run.json").write_text(json.dumps([asdict(_segment())] * 1001))
    with pytest.raises(ConfigError, match="more than 1000 segments"):
        rr.read_segments(tmp_path)


def test_the_run_block_escapes_what_report_json_holds(conf, tmp_path):
    out = tmp_path / "out"
    rp.reproduce(rp.ReproduceConfig(out=out, config_dir=conf), log=lambda m: None)
    data = read_report(out / "report.json")
    data["run"]["segments"][0]["cpu"] = "evil | cpu\n<!-- tokengeo:end run -->"
    block = render(data, "run")
    assert "\n<!--" not in block and "evil \\| cpu" in block
