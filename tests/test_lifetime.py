"""tokengeo.lifetime: a helper process started with ``preexec_fn=die_with_parent`` dies when
the process that started it is killed (no orphan keeps running)."""

import os
import signal
import subprocess
import sys
import time

import pytest

PARENT = """
import subprocess, sys, time
from tokengeo.lifetime import die_with_parent
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                         preexec_fn=die_with_parent)
print(child.pid, flush=True)
time.sleep(60)
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"  # a zombie has exited
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux-only")
def test_a_helper_process_dies_with_its_parent():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE,
                              text=True, env=env)
    try:
        child = int(parent.stdout.readline())
        assert _alive(child)
        parent.send_signal(signal.SIGKILL)
        parent.wait(10)
        deadline = time.monotonic() + 10
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(child)
    finally:
        parent.kill()


def test_die_with_parent_says_whether_it_was_set():
    """In a child of its own (it would otherwise bind the test runner to its parent)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run([sys.executable, "-c", "from tokengeo.lifetime import die_with_parent;"
                          " print(die_with_parent())"], capture_output=True, text=True,
                         env=env, check=True).stdout.strip()
    assert out == str(sys.platform.startswith("linux"))
