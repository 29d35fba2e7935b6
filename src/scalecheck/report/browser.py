"""Headless Chromium driven through its DevTools protocol over a pipe
(``--remote-debugging-pipe``: JSON messages ending in a NUL byte on file descriptors 3 and 4),
so nothing beyond the standard library and Debian's ``chromium`` is needed. Used by the
report's browser test and by bench/report_render.py to open a report as a reader would."""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path


class BrowserError(Exception):
    pass


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


class Browser:
    """One headless Chromium with one page. Every wait has a deadline (``timeout`` seconds)
    and ends in BrowserError when it passes, never in a hang."""

    def __init__(self, timeout: float = 60.0, width: int = 1280, height: int = 900):
        executable = find_chromium()
        if executable is None:
            raise BrowserError("chromium not found (scripts/setup.d/65-browser.sh installs it)")
        self.timeout = timeout
        self._profile = tempfile.TemporaryDirectory(prefix="scalecheck-chromium-")
        to_browser_read, self._to_browser = os.pipe()
        self._from_browser, from_browser_write = os.pipe()
        command = [
            executable,
            "--headless",
            "--remote-debugging-pipe",
            "--no-sandbox",  # tests run as root in containers, where the sandbox cannot start
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--hide-scrollbars",
            f"--window-size={width},{height}",
            f"--user-data-dir={self._profile.name}",
            "about:blank",
        ]
        # The child's fds 3 and 4 are the pipe ends it reads commands from and writes to.
        self._process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=(3, 4),
            preexec_fn=lambda: _move_fds(to_browser_read, from_browser_write),
        )
        os.close(to_browser_read)
        os.close(from_browser_write)
        self._buffer = b""
        self._next_id = 0
        self._events: list[dict] = []
        self._session = None
        try:
            self._session = self._attach_to_page()
            self.call("Page.enable")
            self.call("Runtime.enable")
        except BaseException:
            self.close()
            raise

    def _attach_to_page(self) -> str:
        targets = self.call("Target.getTargets")["targetInfos"]
        page = next((t for t in targets if t["type"] == "page"), None)
        if page is None:
            page = {"targetId": self.call("Target.createTarget", url="about:blank")["targetId"]}
        return self.call("Target.attachToTarget", targetId=page["targetId"], flatten=True)[
            "sessionId"
        ]

    # -- protocol --
    def call(self, method: str, **params) -> dict:
        self._next_id += 1
        message: dict = {"id": self._next_id, "method": method, "params": params}
        if self._session is not None and not method.startswith("Target."):
            message["sessionId"] = self._session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            reply = self._read(deadline, f"the answer to {method}")
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error'].get('message')}")
                return reply.get("result", {})
            if "method" in reply:
                self._events.append(reply)

    def wait_event(self, method: str) -> dict:
        deadline = time.monotonic() + self.timeout
        while True:
            for index, event in enumerate(self._events):
                if event["method"] == method:
                    return self._events.pop(index)
            reply = self._read(deadline, f"the event {method}")
            if "method" in reply:
                self._events.append(reply)

    def _read(self, deadline: float, what: str) -> dict:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BrowserError(f"chromium gave no {what} within {self.timeout:.0f} s")
            ready, _, _ = select.select([self._from_browser], [], [], left)
            if ready:
                chunk = os.read(self._from_browser, 1 << 16)
                if not chunk:
                    raise BrowserError(f"chromium exited before {what}")
                self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    # -- what a reader does --
    def open(self, url: str) -> float:
        """Loads ``url``; returns the seconds from the request to the page's load event."""
        self._events.clear()
        started = time.monotonic()
        self.call("Page.navigate", url=url)
        self.wait_event("Page.loadEventFired")
        return time.monotonic() - started

    def evaluate(self, expression: str):
        """The value of a JavaScript expression; a promise is awaited."""
        result = self.call(
            "Runtime.evaluate", expression=expression, awaitPromise=True, returnByValue=True
        )
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            text = details.get("exception", {}).get("description") or details.get("text")
            raise BrowserError(f"JavaScript error: {text}")
        return result["result"].get("value")

    def wait_for(self, condition: str, what: str):
        """Waits until the JavaScript expression ``condition`` is truthy (checked on every
        animation frame, in the page) and returns its value."""
        deadline_ms = int(self.timeout * 1000)
        expression = (
            "new Promise(function (resolve, reject) {"
            "  var until = Date.now() + " + str(deadline_ms) + ";"
            "  (function check() {"
            "    var value = (" + condition + ");"
            "    if (value) resolve(value);"
            "    else if (Date.now() > until) reject(new Error('timed out waiting for "
            + what.replace("'", "")
            + "'));"
            "    else requestAnimationFrame(check);"
            "  })();"
            "})"
        )
        return self.evaluate(expression)

    def hover(self, selector: str):
        """Moves the mouse to the middle of the first element matching ``selector``."""
        x, y = self._middle(selector)
        self.call("Input.dispatchMouseEvent", type="mouseMoved", x=x, y=y)

    def click(self, selector: str):
        """A left click in the middle of the first element matching ``selector``."""
        x, y = self._middle(selector)
        self.call("Input.dispatchMouseEvent", type="mouseMoved", x=x, y=y)
        for kind in ("mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)

    def _middle(self, selector: str) -> tuple[float, float]:
        """The element's middle in the viewport, after scrolling it into view."""
        box = self.evaluate(
            f"(function () {{ var e = document.querySelector({json.dumps(selector)});"
            " if (!e) return null; e.scrollIntoView({block: 'center'});"
            " var r = e.getBoundingClientRect();"
            " return {x: r.left + r.width / 2, y: r.top + r.height / 2}; })()"
        )
        if box is None:
            raise BrowserError(f"no element matches {selector}")
        return box["x"], box["y"]

    def screenshot(self, path: Path):
        data = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
        Path(path).write_bytes(base64.b64decode(data["data"]))

    def close(self):
        try:
            os.close(self._to_browser)  # chromium exits when its command pipe closes
            self._process.wait(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        finally:
            os.close(self._from_browser)
            self._profile.cleanup()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _move_fds(read_end: int, write_end: int):
    """In the child: the command pipe's read end becomes fd 3, the reply pipe's write end fd 4
    (through copies above both, as either end may itself be fd 3 or 4)."""
    high_read = fcntl.fcntl(read_end, fcntl.F_DUPFD, 10)
    high_write = fcntl.fcntl(write_end, fcntl.F_DUPFD, 10)
    os.dup2(high_read, 3)
    os.dup2(high_write, 4)
