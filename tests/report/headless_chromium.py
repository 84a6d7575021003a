"""A minimal headless Chromium driver for tests and benchmarks, standard library only.

Speaks the DevTools protocol over `--remote-debugging-pipe` (JSON messages ending in
NUL on file descriptors 3 and 4), so it needs neither a websocket client nor a free
port. Enough for: open a page, wait for its load event, evaluate JavaScript, type
text, take a screenshot, collect console errors.
"""

from __future__ import annotations

import base64
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars", "--mute-audio", "--remote-debugging-pipe")


class BrowserError(RuntimeError):
    pass


class Browser:
    """One Chromium process; `page()` opens a tab. Use as a context manager."""

    def __init__(self, binary: Path = CHROMIUM, timeout: float = 60.0):
        self.timeout = timeout
        self.profile = tempfile.mkdtemp(prefix="report-chromium-")
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()
        # bash puts the pipe ends on fds 3 and 4, where Chromium expects them
        self.proc = subprocess.Popen(
            ["bash", "-c", f'exec "$@" 3<&{to_browser_r} 4>&{from_browser_w}', "chromium",
             str(binary), *FLAGS, f"--user-data-dir={self.profile}", "about:blank"],
            pass_fds=(to_browser_r, from_browser_w), stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict] = []

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _read_message(self, deadline: float) -> dict:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BrowserError("timed out waiting for Chromium")
            ready, _, _ = select.select([self._from_browser], [], [], left)
            if ready:
                chunk = os.read(self._from_browser, 1 << 20)
                if not chunk:
                    raise BrowserError(f"Chromium exited (code {self.proc.poll()})")
                self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def send(self, method: str, params: dict | None = None, session: str | None = None,
             timeout: float | None = None) -> dict:
        self._next_id += 1
        request = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            request["sessionId"] = session
        os.write(self._to_browser, json.dumps(request).encode() + b"\0")
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            message = self._read_message(deadline)
            if message.get("id") == self._next_id:
                if "error" in message:
                    raise BrowserError(f"{method}: {message['error']}")
                return message.get("result", {})
            if "method" in message:
                self.events.append(message)

    def wait_event(self, method: str, session: str | None = None,
                   timeout: float | None = None) -> dict:
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            for i, event in enumerate(self.events):
                if event["method"] == method and event.get("sessionId") == session:
                    return self.events.pop(i)
            message = self._read_message(deadline)
            if "method" in message:
                self.events.append(message)

    def page(self, width: int = 1280, height: int = 900) -> Page:
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget",
                            {"targetId": target, "flatten": True})["sessionId"]
        return Page(self, session, width, height)

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.send("Browser.close", timeout=5)
            except (BrowserError, OSError):
                pass
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for fd in (self._to_browser, self._from_browser):
            try:
                os.close(fd)
            except OSError:
                pass
        shutil.rmtree(self.profile, ignore_errors=True)


class Page:
    def __init__(self, browser: Browser, session: str, width: int, height: int):
        self.browser, self.session = browser, session
        for domain in ("Page", "Runtime", "Log"):
            self.send(f"{domain}.enable")
        self.send("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})

    def send(self, method: str, params: dict | None = None) -> dict:
        return self.browser.send(method, params, session=self.session)

    def goto(self, url: str) -> None:
        """Navigates and returns after the page's load event."""
        self.browser.events = [e for e in self.browser.events
                               if e.get("sessionId") != self.session]
        result = self.send("Page.navigate", {"url": url})
        if result.get("errorText"):
            raise BrowserError(f"navigation to {url} failed: {result['errorText']}")
        self.browser.wait_event("Page.loadEventFired", self.session)

    def evaluate(self, expression: str):
        result = self.send("Runtime.evaluate", {"expression": expression,
                                                "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression!r} threw: {result['exceptionDetails']}")
        return result["result"].get("value")

    def insert_text(self, text: str) -> None:
        """Types into the focused element, as a keyboard or IME would."""
        self.send("Input.insertText", {"text": text})

    def screenshot(self, path: Path) -> None:
        data = self.send("Page.captureScreenshot", {"format": "png"})["data"]
        Path(path).write_bytes(base64.b64decode(data))

    def console_errors(self) -> list[str]:
        """Console and browser log errors so far (a blocked script or style shows here)."""
        messages = []
        for event in self.browser.events:
            if event.get("sessionId") != self.session:
                continue
            if event["method"] == "Log.entryAdded" and event["params"]["entry"]["level"] == "error":
                messages.append(event["params"]["entry"]["text"])
            if event["method"] == "Runtime.exceptionThrown":
                messages.append(str(event["params"]["exceptionDetails"].get("text")))
            if (event["method"] == "Runtime.consoleAPICalled"
                    and event["params"]["type"] == "error"):
                messages.append(str(event["params"]["args"]))
        return messages
