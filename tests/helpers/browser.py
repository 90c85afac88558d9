"""Test helper: render an HTML file in headless Chromium (Debian's ``chromium``).

Used by ``test_report_render.py`` and the explorer tests ``test_view*.py`` (imported as
``browser``: pytest puts ``tests/`` on ``sys.path``); tokengeo itself never drives a browser.
:class:`Page` drives one tab over the DevTools protocol for interactive checks.
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


class Page:
    """A headless Chromium tab driven over the DevTools protocol (``--remote-debugging-pipe``:
    no port, no extra package). Records console messages, uncaught exceptions and every
    request that leaves ``file:``/``data:``/``blob:``.

    ::

        with Page(html, width=1400, height=1000) as page:
            page.wait_for("window.TG && TG.ready")
            page.evaluate("1 + 1")          # -> 2 (promises are awaited)
            page.mouse_move(300, 200)
            png = page.screenshot()          # bytes
    """

    def __init__(self, html: Path, *, width: int = 1400, height: int = 1000,
                 timeout: float = 120.0) -> None:
        self.url = Path(html).resolve().as_uri()
        self.width, self.height, self.timeout = width, height, timeout
        self.console: list[str] = []
        self.errors: list[str] = []
        self.requests: list[str] = []
        self._id = 0
        self._buffer = b""

    # -- process and pipe --
    def __enter__(self) -> Page:
        import os

        self._profile = tempfile.TemporaryDirectory()
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()
        cmd = [chromium_path(), *CHROMIUM_FLAGS, f"--user-data-dir={self._profile.name}",
               "--remote-debugging-pipe", f"--window-size={self.width},{self.height}",
               "about:blank"]

        def fds():  # chromium reads commands on fd 3 and writes replies on fd 4
            r, w = os.dup(to_chrome_r), os.dup(from_chrome_w)  # off 3 and 4 first
            os.dup2(r, 3)  # dup2 makes them inheritable
            os.dup2(w, 4)

        self._proc = subprocess.Popen(cmd, preexec_fn=fds, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL, close_fds=False)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        targets = self._call("Target.getTargets")["targetInfos"]
        page = next(t for t in targets if t["type"] == "page")
        self._session = self._call("Target.attachToTarget", targetId=page["targetId"],
                                   flatten=True)["sessionId"]
        for domain in ("Runtime", "Page", "Network", "Log"):
            self.send(f"{domain}.enable")
        self.send("Emulation.setDeviceMetricsOverride", width=self.width, height=self.height,
                  deviceScaleFactor=1, mobile=False)
        self.send("Page.navigate", url=self.url)
        self.wait_for("document.readyState === 'complete'")
        return self

    def __exit__(self, *exc) -> None:
        import os

        try:
            self._call("Browser.close")
        except Exception:  # already gone
            pass
        try:
            self._proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        os.close(self._to_chrome)
        os.close(self._from_chrome)
        self._profile.cleanup()

    def _write(self, message: dict) -> None:
        import json
        import os

        os.write(self._to_chrome, json.dumps(message).encode() + b"\0")

    def _read(self) -> dict:
        import json
        import os
        import select

        while b"\0" not in self._buffer:
            ready, _, _ = select.select([self._from_chrome], [], [], self.timeout)
            if not ready:
                raise TimeoutError(f"chromium sent nothing for {self.timeout} s")
            chunk = os.read(self._from_chrome, 1 << 20)
            if not chunk:
                raise RuntimeError("chromium closed the DevTools pipe")
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(raw)

    def _call(self, method: str, session: str | None = None, **params) -> dict:
        self._id += 1
        message = {"id": self._id, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        self._write(message)
        while True:
            reply = self._read()
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self._event(reply)

    def _event(self, msg: dict) -> None:
        method, params = msg.get("method"), msg.get("params", {})
        if method == "Runtime.consoleAPICalled":
            text = " ".join(str(a.get("value", a.get("description", ""))) for a in params["args"])
            self.console.append(f"{params['type']}: {text}")
            if params["type"] in ("error", "assert"):
                self.errors.append(text)
        elif method == "Runtime.exceptionThrown":
            d = params["exceptionDetails"]
            self.errors.append(d.get("exception", {}).get("description", d.get("text", "")))
        elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
            self.errors.append(params["entry"]["text"])
        elif method == "Network.requestWillBeSent":
            url = params["request"]["url"]
            if not url.startswith(("file:", "data:", "blob:", "about:")):
                self.requests.append(url)

    # -- what tests use --
    def send(self, method: str, **params) -> dict:
        return self._call(method, self._session, **params)

    def evaluate(self, expression: str):
        """The value of a JavaScript expression (a promise is awaited)."""
        res = self.send("Runtime.evaluate", expression=expression, awaitPromise=True,
                        returnByValue=True)
        if "exceptionDetails" in res:
            d = res["exceptionDetails"]
            raise RuntimeError(d.get("exception", {}).get("description", d.get("text")))
        return res["result"].get("value")

    def wait_for(self, expression: str, timeout: float | None = None) -> None:
        import time

        end = time.monotonic() + (timeout or self.timeout)
        while not self.evaluate(f"!!({expression})"):
            if time.monotonic() > end:
                raise TimeoutError(f"{expression!r} stayed false")
            time.sleep(0.05)

    def mouse_move(self, x: float, y: float) -> None:
        self.send("Input.dispatchMouseEvent", type="mouseMoved", x=x, y=y)

    def key(self, key: str, code: str | None = None, key_code: int = 0) -> None:
        for kind in ("keyDown", "keyUp"):
            self.send("Input.dispatchKeyEvent", type=kind, key=key, code=code or key,
                      windowsVirtualKeyCode=key_code)

    def screenshot(self) -> bytes:
        import base64

        return base64.b64decode(self.send("Page.captureScreenshot", format="png")["data"])
