"""Helpers of the sway tier (tests/integration/test_sway_*.py): the compositor fixture's
start, the native GTK app and the expected picture of its pattern mode."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from deskpilot._errors import PlatformError
from deskpilot.testing._sway import SwaySession, sway_session

APP = Path(__file__).parent / "apps" / "wayland_gtk_app.py"
SYSTEM_PYTHON = "/usr/bin/python3"
BLOCK = 16  # as in apps/wayland_gtk_app.py

Record = dict[str, Any]


@contextlib.contextmanager
def start_sway(**kwargs: Any) -> Iterator[SwaySession]:
    """sway_session for a module: skipped only where sway is not installed; an installed
    sway that does not come up fails."""
    if shutil.which("sway") is None:
        pytest.skip("sway is not installed (./dev setup installs it)")
    with contextlib.ExitStack() as stack:
        try:
            session = stack.enter_context(sway_session(**kwargs))
        except PlatformError as exc:
            pytest.fail(str(exc))
        yield session


@contextlib.contextmanager
def session_env(monkeypatch: pytest.MonkeyPatch, session: SwaySession) -> Iterator[dict[str, str]]:
    """The test process as a client of this session (no X display: Wayland only)."""
    env = session.env()
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("DISPLAY", raising=False)
    yield env


def expected_pattern(width: int, height: int) -> npt.NDArray[np.uint8]:
    """The RGB picture apps/wayland_gtk_app.py shows in pattern mode (its block_color)."""
    ys, xs = np.mgrid[0:height, 0:width]
    bx, by = xs // BLOCK, ys // BLOCK
    return np.stack([(bx * 37 + 11) % 256, (by * 59 + 23) % 256, ((bx + by) * 13 + 101) % 256], -1).astype(np.uint8)


class GtkApp:
    """apps/wayland_gtk_app.py as a native Wayland client of a sway session."""

    def __init__(self, session: SwaySession, mode: str, *, timeout: float = 30.0) -> None:
        if not Path(SYSTEM_PYTHON).exists():
            pytest.fail(f"{SYSTEM_PYTHON} with python3-gi is needed (./dev setup installs it)")
        env = {k: v for k, v in os.environ.items() if k != "DISPLAY"}
        env.update(session.env())
        env.pop("DISPLAY", None)
        env["GDK_BACKEND"] = "wayland"
        self.session = session
        self.proc = subprocess.Popen([SYSTEM_PYTHON, str(APP), mode], env=env, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, text=True)
        self.records: list[Record] = []
        self._queue: queue.Queue[Record] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        try:
            self.ready = self.wait_for(lambda r: r["type"] == "ready", timeout)
        except BaseException:
            self.close()
            raise

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.strip():
                self._queue.put(json.loads(line))

    def _pump(self) -> None:
        while True:
            try:
                self.records.append(self._queue.get_nowait())
            except queue.Empty:
                return

    def mark(self) -> int:
        self._pump()
        return len(self.records)

    def since(self, mark: int) -> list[Record]:
        self._pump()
        return self.records[mark:]

    def wait_for(self, predicate: Callable[[Record], bool], timeout: float = 5.0, since: int = 0) -> Record:
        deadline = time.monotonic() + timeout
        while True:
            self._pump()
            for record in self.records[since:]:
                if predicate(record):
                    return record
            if time.monotonic() > deadline:
                raise AssertionError(f"no matching record within {timeout} s; got {self.records[since:]}")
            if self.proc.poll() is not None and self._queue.empty():
                raise AssertionError(f"the app exited with {self.proc.returncode}; got {self.records[since:]}")
            time.sleep(0.01)

    def pointer_in(self, hands: Any, x: int, y: int, timeout: float = 10.0) -> None:
        """Return once the compositor routes the pointer to this window (pattern mode): move
        it to (x, y), a physical point on the window, until the app reports the pointer
        entered. sway puts a new window under the pointer only when it applies the window's
        placement, a transaction that waits for the app's next commit (longer on a loaded
        machine than the app's ``ready`` lead): a click sent before lands on no window.

        The app reports its first pointer motion after ``ready`` once, whenever it came: sway
        may route one before this call, when the pointer already rests where the window opens (``focus
        output`` warps it to the output's centre, and a scale change clamps it into the
        output). Any motion routed to the window means its placement is applied."""
        deadline = time.monotonic() + timeout
        while True:
            for dx in (1, 0):  # a real motion, whether or not the pointer was at (x, y) already
                hands.move(x + dx, y)
            hands.sync()
            try:
                self.wait_for(lambda r: r["type"] == "enter", timeout=0.1)
                return
            except AssertionError:
                if time.monotonic() > deadline:
                    raise AssertionError(f"the pointer at ({x}, {y}) never entered the app's window within "
                                         f"{timeout:g} s; got {self.since(0)}; sway's windows: "
                                         f"{self._windows()}; on screen: {self._on_screen()}; the app "
                                         f"{'runs' if self.proc.poll() is None else 'exited'}") from None

    def _on_screen(self) -> str:
        """What the first output shows (for a failure's message): how much of it is the app's
        pattern, and where the rest is (headless sway draws its cursor into the frame)."""
        try:
            from deskpilot.capture import Capturer

            with Capturer("wlroots", monitor=1, cursor=False) as cap:
                rgb = cap.grab().rgb
            width, height = self.ready["width"], self.ready["height"]
            scale = rgb.shape[1] / width
            ys, xs = np.mgrid[0 : rgb.shape[0], 0 : rgb.shape[1]]
            expected = expected_pattern(width + BLOCK, height + BLOCK)[(ys / scale).astype(int), (xs / scale).astype(int)]
            differ = np.argwhere((np.abs(rgb.astype(np.int16) - expected) > 8).any(axis=2))
            if not differ.size:
                return "the app's pattern, no cursor"
            (top, left), (bottom, right) = differ.min(axis=0), differ.max(axis=0)
            # At a scale other than 1 block edges are resampled: a shown app differs there too.
            return (f"{len(differ)} of {rgb.shape[0] * rgb.shape[1]} pixels not the app's pattern, within "
                    f"x {left}..{right}, y {top}..{bottom}")
        except Exception as exc:  # a diagnostic: never hide the failure it explains
            return f"(no screenshot: {exc})"

    def _windows(self) -> list[tuple[Any, ...]]:
        """Where sway has its outputs and windows (for a failure's message)."""
        found: list[tuple[Any, ...]] = []

        def walk(node: Record) -> None:
            if node.get("type") in ("output", "con", "floating_con") and node.get("name") != "__i3":
                rect = node.get("rect", {})
                found.append((node.get("type"), node.get("name"), node.get("scale"), node.get("fullscreen_mode"),
                              node.get("focused"), rect.get("x"), rect.get("y"), rect.get("width"), rect.get("height")))
            for child in node.get("nodes", []) + node.get("floating_nodes", []):
                walk(child)

        with contextlib.suppress(Exception):
            walk(json.loads(self.session.swaymsg("-t", "get_tree")))
        return found

    def text(self, expected: str, timeout: float = 5.0) -> str:
        """Wait until the text view holds ``expected``; the last text seen either way."""
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            self._pump()
            texts = [r["text"] for r in self.records if r["type"] == "text"]
            last = texts[-1] if texts else ""
            if last == expected:
                break
            time.sleep(0.02)
        return last

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)

    def __enter__(self) -> GtkApp:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

