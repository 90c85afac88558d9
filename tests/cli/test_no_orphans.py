"""No process outlives its driver: a `reproduce --jobs 2` driver stopped by SIGINT, SIGTERM
or SIGKILL leaves no worker and no resource tracker behind (checked through /proc by session).

The driver runs in its own session (``start_new_session``); every process it starts, the
spawned workers and multiprocessing's resource tracker, inherits that session id, so once the
driver is gone "no descendant alive" is "no process of that session alive".
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc"),
]

SUITE = '''
import os, time
from pathlib import Path
from tokengeo.experiments.cells import Cell
from tokengeo.experiments.settings import Setting
from tokengeo.experiments.suite import Suite

def _sleep(i, flags):
    Path(flags, f"started-{i}-{os.getpid()}").touch()
    time.sleep(300)  # far longer than the test: only a signal ends it
    return {"i": i}

def cells(settings, ctx):
    return [Cell("sleepy", f"c{i}", _sleep, {"i": i, "flags": settings["flags"]})
            for i in range(4)]

def summarise(settings, results, ctx):
    raise AssertionError("never reached")

SUITE = Suite("sleepy", "Sleepy suite", "none", {"flags": Setting("str")}, cells, summarise)
'''

DRIVER = '''
import sys
from tokengeo.experiments import reproduce as rp
rp.SUITES = {"sleepy": "sleepy_suite"}
from tokengeo.cli import main
sys.exit(main(["reproduce", "--only", "sleepy", "--config-dir", sys.argv[1],
               "--out", sys.argv[2], "--jobs", "2"]))
'''


def session_members(sid: int) -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path("/proc", entry, "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()  # after "pid (comm) "
        if fields[0] != "Z" and int(fields[3]) == sid:  # state, ppid, pgrp, session
            pids.append(int(entry))
    return pids


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL],
                         ids=["SIGINT", "SIGTERM", "SIGKILL"])
def test_workers_and_tracker_die_with_the_driver(tmp_path, sig):
    src = Path(__file__).resolve().parents[2] / "src"
    (tmp_path / "sleepy_suite.py").write_text(textwrap.dedent(SUITE))
    conf, flags = tmp_path / "conf", tmp_path / "flags"
    conf.mkdir()
    flags.mkdir()
    (conf / "sleepy.toml").write_text(f"[quick]\nflags = '{flags}'\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(src), str(tmp_path)])}
    driver = subprocess.Popen(
        [sys.executable, "-c", DRIVER, str(conf), str(tmp_path / "out")],
        env=env, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 120
        while len(list(flags.iterdir())) < 2:  # both workers are inside a cell
            assert driver.poll() is None, driver.communicate()
            assert time.monotonic() < deadline, "workers never started"
            time.sleep(0.2)
        assert len(session_members(driver.pid)) >= 4  # driver, 2 workers, tracker
        driver.send_signal(sig)
        code = driver.wait(timeout=30)
        stop = time.monotonic() + 10
        while session_members(driver.pid) and time.monotonic() < stop:
            time.sleep(0.1)
        assert session_members(driver.pid) == []
        err = driver.stderr.read().decode()
        if sig == signal.SIGKILL:
            assert code == -signal.SIGKILL
        else:
            assert code == (130 if sig == signal.SIGINT else 143), err
            ours = [ln for ln in err.splitlines() if ln.startswith("tokengeo")]
            assert ours == ["tokengeo reproduce: " +
                            ("interrupted" if sig == signal.SIGINT else "terminated")], err
            assert "Traceback" not in err and "InvalidStateError" not in err, err
            # the stopped call's time still counts toward the run's wall time
            from tokengeo.experiments.run_record import read_segments

            (seg,) = read_segments(tmp_path / "out")
            assert not seg.finished and seg.cells_to_compute == 4 and seg.cells_computed == 0
            assert seg.wall_seconds > 0
    finally:
        for pid in session_members(driver.pid):
            os.kill(pid, signal.SIGKILL)
        driver.wait(timeout=30)
