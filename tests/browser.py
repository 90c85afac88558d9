"""Test helper: render an HTML file in headless Chromium (Debian's ``chromium``).

Used by ``test_report_render.py`` only (imported as ``browser``: pytest puts ``tests/`` on
``sys.path``); tokengeo itself never drives a browser.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from tokengeo.errors import MissingDependencyError

# The machine has no network: keep Chromium from reaching for one.
CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--hide-scrollbars",
]


def chromium_path() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        raise MissingDependencyError(
            "chromium is not installed; install it with: sudo apt-get install -y chromium")
    return path


def screenshot(html: Path, png: Path, *, width: int = 1200, height: int = 1600,
               timeout: float = 90.0) -> Path:
    """Load ``html`` from disk in a fresh profile and write a PNG screenshot."""
    with tempfile.TemporaryDirectory() as profile:
        cmd = [chromium_path(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}",
               f"--window-size={width},{height}", f"--screenshot={png}",
               Path(html).resolve().as_uri()]
        subprocess.run(cmd, check=True, capture_output=True, timeout=timeout)
    return png


def dump_dom(html: Path, *, timeout: float = 90.0) -> str:
    """The DOM after Chromium parsed and laid out ``html``."""
    with tempfile.TemporaryDirectory() as profile:
        cmd = [chromium_path(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--dump-dom",
               Path(html).resolve().as_uri()]
        done = subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=timeout)
    return done.stdout
