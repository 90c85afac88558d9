"""One run per folder: the --out lock (two processes, a killed holder, refused runs)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tokengeo.cli import main
from tokengeo.errors import ConfigError
from tokengeo.io import atomic_dir
from tokengeo.outmarker import write_marker
from tokengeo.runlock import LOCK_NAME, RunLock
from tokengeo.train.config import TrainConfig

SRC = Path(__file__).resolve().parents[1] / "src"
TINY = ["--model", "vit-tiny", "--data", "digits", "--batch-size", "32",
        "--set", "model_overrides.d_model=32", "--set", "model_overrides.n_layers=1",
        "--set", "warmup=1", "--set", "eval_batches=1", "--quiet"]
FLOW = ["--preset", "s2-ou", "--T", "0.1", "--dt", "0.01", "--record-every", "1", "--n-paths", "2",
        "--scaling-heads", "none", "--no-figures", "--quiet"]

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(autouse=True)
def _quiet(monkeypatch):
    monkeypatch.setenv("CI", "1")


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def one_line(capsys, command: str) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith(f"tokengeo {command}: error: ")
    return err[0]


@pytest.fixture
def holder(tmp_path):
    """Another process holding the lock on tmp_path/out, as a running `tokengeo train`."""
    out = tmp_path / "out"
    out.mkdir()
    cfg = TrainConfig(model="vit-tiny", data="digits", model_overrides={"d_model": 32},
                      out=str(out))
    (out / "config.json").write_text(json.dumps(cfg.to_dict()))  # a run to --resume
    script = textwrap.dedent(f"""
        import sys, time
        from tokengeo.runlock import lock_run_folder
        lock_run_folder({str(out)!r}, "tokengeo train")
        print("locked", flush=True)
        time.sleep(120)
    """)
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    proc = subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout.readline().strip() == "locked"
        yield out, proc
    finally:
        proc.kill()
        proc.wait(timeout=30)


@pytest.mark.parametrize("command, args", [
    ("train", [*TINY, "--steps", "1"]),
    ("train", ["--resume"]),
    ("flow", FLOW),
    ("reproduce", ["--only", "flows"]),
])
def test_second_run_exits_2_naming_the_holder(holder, capsys, command, args):
    out, proc = holder
    before = snapshot(out)
    assert main([command, *args, "--out", str(out)]) == 2
    line = one_line(capsys, command)
    assert f"is in use by pid {proc.pid} on " in line and "(tokengeo train, started" in line
    assert snapshot(out) == before  # the refused run wrote nothing, not even its lock


def test_similarity_into_a_locked_folder_is_refused(holder, capsys, tmp_path):
    out, proc = holder
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("a b c.\n")
    write_marker(out, "similarity")  # a previous similarity output, which --overwrite may replace
    before = snapshot(out)
    assert main(["similarity", "--corpus", str(corpus), "--out", str(out), "--overwrite"]) == 2
    assert f"in use by pid {proc.pid}" in one_line(capsys, "similarity")
    assert snapshot(out) == before


def test_lock_of_a_killed_process_does_not_block(holder, capsys):
    out, proc = holder
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert (out / LOCK_NAME).exists()  # left behind, but the kernel dropped the flock
    (out / "config.json").unlink()  # flow refuses a folder with content; a lock file is none
    assert main(["flow", *FLOW, "--out", str(out)]) == 0
    assert (out / "flow.json").is_file()
    assert main(["train", *TINY, "--steps", "1", "--out", str(out / "run")]) == 0
    assert not (out / LOCK_NAME).exists()  # released and removed on exit


def test_lock_in_one_process_refuses_a_second_and_cleans_up(tmp_path):
    out = tmp_path / "a" / "b"
    with RunLock(out, "tokengeo flow"):
        assert (out / LOCK_NAME).is_file()
        with pytest.raises(ConfigError, match=rf"in use by pid {os.getpid()} .*tokengeo flow"):
            RunLock(out, "tokengeo train").acquire()
    assert not (tmp_path / "a").exists()  # the folders the lock made, empty, are gone again


def test_release_never_removes_a_lock_file_it_does_not_hold(tmp_path):
    first = RunLock(tmp_path, "tokengeo flow").acquire()
    (tmp_path / LOCK_NAME).unlink()  # e.g. a user deleted it; another run then locks anew
    second = RunLock(tmp_path, "tokengeo train").acquire()
    first.release()
    assert (tmp_path / LOCK_NAME).is_file()  # the second run's lock file is left alone
    with pytest.raises(ConfigError, match=r"in use by .*tokengeo train"):
        RunLock(tmp_path, "tokengeo similarity").acquire()
    second.release()
    assert not (tmp_path / LOCK_NAME).exists()


def test_lock_holds_across_an_atomic_folder_replacement(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "old.txt").write_text("old")
    lock = RunLock(out, "tokengeo similarity").acquire()
    with atomic_dir(out) as tmp:
        lock.carry_into(tmp)
        (tmp / "new.txt").write_text("new")
    assert sorted(p.name for p in out.iterdir()) == [LOCK_NAME, "new.txt"]
    with pytest.raises(ConfigError, match="in use by"):
        RunLock(out, "tokengeo similarity").acquire()
    lock.release()
    assert [p.name for p in out.iterdir()] == ["new.txt"]


KILLED_BUILDER = """
import os, sys
from pathlib import Path
from tokengeo.io import atomic_dir
from tokengeo.runlock import RunLock

out = Path(sys.argv[1])
lock = RunLock(out, "tokengeo similarity").acquire()
with atomic_dir(out) as tmp:  # building the output beside --out, as similarity does
    lock.carry_into(tmp)
    (tmp / "half.json").write_text("{")
    os.kill(os.getpid(), 9)  # killed outright: no cleanup runs
"""


def test_a_killed_builds_leftover_is_removed_and_a_users_hard_link_still_refused(
        tmp_path, capsys):
    out = tmp_path / "sim"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1] / "src")}
    done = subprocess.run([sys.executable, "-c", KILLED_BUILDER, str(out)], env=env,
                          timeout=120, check=False)
    assert done.returncode == -signal.SIGKILL
    (left,) = [p for p in tmp_path.iterdir() if p.name.startswith(".tmp-sim-")]
    assert os.stat(out / LOCK_NAME).st_nlink == 2  # the dead build's link to the lock
    keep = tmp_path / ".tmp-old-sim-0123abcd"  # an output being swapped out: never touched
    keep.mkdir()
    os.link(out / LOCK_NAME, keep / LOCK_NAME)
    lock = RunLock(out, "tokengeo similarity")
    with pytest.raises(ConfigError, match="hard link to another file"):
        lock.acquire()  # the other link is not a dead build's: refused as before
    assert not left.exists()  # the dead build was removed all the same
    assert "removed .tmp-sim-" in capsys.readouterr().err
    (keep / LOCK_NAME).unlink()
    RunLock(out, "tokengeo similarity").acquire().release()  # now the lock is free
    assert keep.exists() and sorted(p.name for p in tmp_path.iterdir()) == [
        ".tmp-old-sim-0123abcd", "sim"]


@pytest.mark.parametrize("command, args", [
    ("flow", FLOW), ("reproduce", ["--only", "flows"]), ("train", [*TINY, "--steps", "1"]),
])
def test_out_that_is_a_file_or_under_one_exits_2(tmp_path, capsys, command, args):
    file = tmp_path / "file"
    file.write_text("keep")
    assert main([command, *args, "--out", str(file)]) == 2
    assert "is a file" in one_line(capsys, command)
    assert main([command, *args, "--out", str(file / "run")]) == 2
    line = one_line(capsys, command)
    assert "cannot create --out" in line or f"{file} is a file, not a folder" in line
    assert file.read_text() == "keep"


def test_run_refused_after_locking_leaves_no_folder(tmp_path, capsys):
    out = tmp_path / "new" / "run"
    assert main(["train", *TINY, "--data", str(tmp_path / "missing.txt"), "--out", str(out)]) == 2
    assert "no such file" in one_line(capsys, "train")
    assert not (tmp_path / "new").exists()
