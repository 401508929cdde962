"""What the Mutter tier's modules share: a headless mutter per module (``mutter_desktop``),
this process pointed at its session bus and PipeWire, and the native GTK app
(tests/integration/apps/mutter_gtk_app.py) that shows a known picture and reports what
reaches it. Skips only when mutter, PipeWire or GTK cannot start here."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from deskpilot._errors import PlatformError
from deskpilot.testing._mutter import MutterDesktop, mutter_desktop

APPS = Path(__file__).parent / "apps"
SYSTEM_PYTHON = "/usr/bin/python3"
BLOCK = 32
#: The variables this process takes from the session (the capture and input backends read
#: the bus address; libpipewire reads XDG_RUNTIME_DIR when it connects).
SESSION_VARS = ("XDG_RUNTIME_DIR", "DBUS_SESSION_BUS_ADDRESS", "WAYLAND_DISPLAY", "DISPLAY", "XAUTHORITY",
                "XDG_SESSION_TYPE")


def block_colors(width: int, height: int, origin: tuple[int, int] = (0, 0)) -> npt.NDArray[np.uint8]:
    """The app's picture (HxWx3 RGB): the same formula as mutter_gtk_app.block_color."""
    ys, xs = np.mgrid[origin[1] : origin[1] + height, origin[0] : origin[0] + width]
    i, j = xs // BLOCK, ys // BLOCK
    rgb = np.stack([(i * 37 + j * 11) % 256, (j * 53 + 7) % 256, (i * j * 5 + 101) % 256], axis=-1)
    return rgb.astype(np.uint8)


@contextlib.contextmanager
def started_desktop(monitors: tuple[tuple[int, int], ...] = ((1920, 1080),), *,
                    fractional_scaling: bool = False) -> Iterator[MutterDesktop]:
    """A mutter session, with this process's environment pointed at it meanwhile."""
    with contextlib.ExitStack() as stack:
        try:
            desktop = stack.enter_context(mutter_desktop(monitors, fractional_scaling=fractional_scaling))
        except PlatformError as exc:
            if "not installed" in str(exc):
                pytest.skip(f"{exc} (./dev setup installs them)")
            raise
        env = desktop.env()
        saved = {k: os.environ.get(k) for k in SESSION_VARS}
        os.environ.update({k: env[k] for k in SESSION_VARS if k in env})
        try:
            yield desktop
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


class GtkApp:
    """The native GTK app on the session; its JSON lines arrive on a queue."""

    def __init__(self, desktop: MutterDesktop, monitor: int = 0) -> None:
        env = {**os.environ, **desktop.env(), "GDK_BACKEND": "wayland"}
        self.proc = subprocess.Popen([SYSTEM_PYTHON, str(APPS / "mutter_gtk_app.py"), "--monitor", str(monitor)],
                                     env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True)
        self.events: queue.Queue[dict[str, Any]] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.ready = self.wait("ready", timeout=30)

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with contextlib.suppress(ValueError):
                self.events.put(json.loads(line))

    def wait(self, kind: str, timeout: float = 5.0, **match: Any) -> dict[str, Any]:
        """The next event of ``kind`` (and with ``match``'s values); fails after ``timeout``."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no {kind} event {match or ''} from the GTK app within {timeout} s")
            try:
                event = self.events.get(timeout=left)
            except queue.Empty:
                continue
            if event["type"] == kind and all(event.get(k) == v for k, v in match.items()):
                return event

    def wait_in_place(self, hands: Any, origin: tuple[int, int] = (0, 0), scale: float = 1.0,
                      timeout: float = 10.0) -> None:
        """Wait until the window is where it stays: mutter shows a new window zooming in,
        and input meanwhile lands through that transform. Moves the pointer over a spot until
        the app reports it at the logical point it is."""
        deadline = time.monotonic() + timeout
        spot = (origin[0] + 301, origin[1] + 333)
        while time.monotonic() < deadline:
            for dx in (1, 0):
                hands.move(spot[0] + dx, spot[1])
            time.sleep(0.05)
            motions = [e for e in self.drain() if e["type"] == "motion"]
            if motions and abs(motions[-1]["x"] - 301 / scale) < 0.6 and abs(motions[-1]["y"] - 333 / scale) < 0.6:
                return
        raise AssertionError("the GTK window did not settle where it stays")

    def drain(self) -> list[dict[str, Any]]:
        out = []
        while True:
            try:
                out.append(self.events.get_nowait())
            except queue.Empty:
                return out

    def command(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def focus_entry(self) -> None:
        """The entry, emptied, with the focus; waits for its empty text."""
        self.drain()
        self.command("focus")
        time.sleep(0.15)
        self.drain()

    def typed(self, expected: str, timeout: float = 5.0) -> str:
        """Wait for the entry's text to become ``expected``; return the last text seen."""
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            try:
                event = self.events.get(timeout=0.1)
            except queue.Empty:
                continue
            if event["type"] == "text":
                last = event["text"]
                if last == expected:
                    # Nothing more may follow (a doubled paste would).
                    time.sleep(0.2)
                    more = [e["text"] for e in self.drain() if e["type"] == "text"]
                    return more[-1] if more else last
        return last

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

