"""A headless Chromium driven over the DevTools protocol, for the panel's tests and benchmarks.

Chromium talks CDP over a pipe (``--remote-debugging-pipe``: commands on fd 3, replies on
fd 4, NUL-separated JSON), so neither a websocket package nor a browser download is
needed: Debian's ``chromium`` package is enough. POSIX only (the pipe is wired with
``dup2`` in the child)::

    with Chromium() as browser:
        session = browser.open("http://127.0.0.1:8765/")
        browser.wait_for(session, "document.body.dataset.shown")
        pixels = browser.screenshot(session)
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import io
import itertools
import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import orjson

from deskpilot._errors import BrowserError

__all__ = ["BrowserError", "Chromium", "find_chromium"]


CANDIDATES = ("/usr/lib/chromium/chromium", "chromium", "chromium-browser", "google-chrome")


def find_chromium() -> str | None:
    """The Chromium (or Chrome) executable, or None. Debian's /usr/bin/chromium is a shell
    wrapper; the binary behind it is used directly so the debugging pipe reaches it."""
    for name in CANDIDATES:
        found = name if os.path.isabs(name) and os.access(name, os.X_OK) else shutil.which(name)
        if found:
            return found
    return None


class Chromium:
    """A headless Chromium and a minimal CDP client over its debugging pipe."""

    def __init__(
        self,
        *,
        width: int = 1400,
        height: int = 1000,
        timeout: float = 30.0,
        extra_args: Sequence[str] = (),
        headless: bool = True,
        url: str | None = "about:blank",
    ) -> None:
        """``extra_args``: more command-line switches (e.g. ``--host-resolver-rules=...``
        to give test servers on 127.0.0.1 names of other sites, or ``--app=URL``).
        ``headless=False``: a real X11 window on ``$DISPLAY`` (input tests need one);
        ``url``: the page opened at start (None: only what ``extra_args`` opens)."""
        executable = find_chromium()
        if executable is None:
            raise BrowserError("Chromium is not installed (apt-get install chromium)")
        self.timeout = timeout
        self.width, self.height = width, height
        self.profile = tempfile.mkdtemp(prefix="deskpilot-chromium-")
        cmd_r, self._cmd_w = os.pipe()
        self._res_r, res_w = os.pipe()

        def wire_pipes() -> None:  # in the child: Chromium expects the pipe on fds 3 and 4
            # Move both ends above 4 first: when os.pipe() handed out fd 3 or 4 itself,
            # dup2(3, 3) is a no-op that leaves close-on-exec set (Chromium then exits 13),
            # and dup2(cmd_r, 3) could overwrite res_w before it is moved.
            high_cmd = fcntl.fcntl(cmd_r, fcntl.F_DUPFD, 10)
            high_res = fcntl.fcntl(res_w, fcntl.F_DUPFD, 10)
            os.dup2(high_cmd, 3)  # dup2 makes the target inheritable
            os.dup2(high_res, 4)

        args = [
            executable,
            *(("--headless=new", "--hide-scrollbars") if headless else ("--ozone-platform=x11",)),
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--remote-debugging-pipe",
            f"--user-data-dir={self.profile}",
            "--no-first-run",
            "--no-default-browser-check",
            "--force-device-scale-factor=1",
            f"--window-size={width},{height}",
            *extra_args,
            *((url,) if url is not None else ()),
        ]
        self.proc = subprocess.Popen(
            args,
            preexec_fn=wire_pipes,
            close_fds=False,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(cmd_r)
        os.close(res_w)
        self._ids = itertools.count(1)
        self._replies: dict[int, dict[str, Any]] = {}
        self._cond = threading.Condition()
        self._reader = threading.Thread(target=self._read, name="cdp-reader", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        buffer = b""
        while True:
            try:
                chunk = os.read(self._res_r, 1 << 16)
            except OSError:
                chunk = b""
            if not chunk:
                with self._cond:
                    self._replies[-1] = {"error": {"message": "chromium closed the pipe"}}
                    self._cond.notify_all()
                return
            buffer += chunk
            *messages, buffer = buffer.split(b"\0")
            for raw in messages:
                message = orjson.loads(raw)
                if "id" in message:
                    with self._cond:
                        self._replies[message["id"]] = message
                        self._cond.notify_all()
                elif "method" in message:
                    self._event(message)

    def _event(self, message: dict[str, Any]) -> None:
        """A DevTools event (a message without an id); dropped here, kept by subclasses."""

    def call(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        session: str | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        ident = next(self._ids)
        message: dict[str, Any] = {"id": ident, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._cmd_w, orjson.dumps(message) + b"\0")
        deadline = time.monotonic() + (timeout or self.timeout)
        with self._cond:
            while ident not in self._replies and -1 not in self._replies:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise BrowserError(
                        f"CDP {method} got no reply within {timeout or self.timeout} s"
                    )
                self._cond.wait(left)
            reply = self._replies.pop(ident, None) or self._replies[-1]
        if "error" in reply:
            raise BrowserError(f"CDP {method}: {reply['error']}")
        return dict(reply.get("result") or {})

    def open(self, url: str) -> str:
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})[
            "sessionId"
        ]
        self.call("Page.enable", session=session)
        self.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": self.width, "height": self.height, "deviceScaleFactor": 1, "mobile": False},
            session=session,
        )
        self.call("Page.navigate", {"url": url}, session=session)
        return str(session)

    def evaluate(self, session: str, expression: str) -> Any:
        result = self.call(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
            session=session,
        )
        if "exceptionDetails" in result:
            raise BrowserError(f"page error: {result['exceptionDetails']}")
        return result.get("result", {}).get("value")

    def wait_for(self, session: str, expression: str, *, timeout: float = 20.0) -> Any:
        deadline = time.monotonic() + timeout
        last_error = ""
        while True:
            try:
                value = self.evaluate(session, expression)
            except BrowserError as exc:  # e.g. the document is still loading
                value, last_error = None, str(exc)
            if value:
                return value
            if time.monotonic() > deadline:
                raise BrowserError(f"page never satisfied: {expression} {last_error}")
            time.sleep(0.05)

    def screenshot(self, session: str) -> npt.NDArray[np.uint8]:
        data = self.call("Page.captureScreenshot", {"format": "png"}, session=session)["data"]
        from PIL import Image  # the test/bench extra; only screenshots need it

        with Image.open(io.BytesIO(base64.b64decode(data))) as im:
            return np.asarray(im.convert("RGB"), dtype=np.uint8)

    def close(self) -> None:
        with contextlib.suppress(BrowserError, OSError):
            self.call("Browser.close", timeout=5)
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        for fd in (self._cmd_w, self._res_r):
            with contextlib.suppress(OSError):
                os.close(fd)
        shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> Chromium:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
