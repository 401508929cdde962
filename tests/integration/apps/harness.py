"""Start the Tk target app (target_app.py) and read what it recorded.

Used by the ``target_app`` / ``start_target_app`` fixtures in
tests/integration/conftest.py; see target_app.py for the record format.
"""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

APP = Path(__file__).with_name("target_app.py")

Record = dict[str, Any]


class TargetApp:
    """A running target app: its ``ready`` record, its events, and commands to it."""

    def __init__(self, events_path: Path, *, geometry: str | None = None, seed: int = 1, timeout: float = 20.0) -> None:
        self.events_path = events_path
        self.events_path.write_text("")
        cmd = [sys.executable, str(APP), "--events", str(events_path), "--seed", str(seed)]
        if geometry:
            cmd += ["--geometry", geometry]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, text=True, env=dict(os.environ))
        self._offset = 0
        self._buffer = ""
        self.records: list[Record] = []
        try:
            self.ready = self.wait_for(lambda r: r["type"] == "ready", timeout=timeout, since=0)
        except BaseException:
            self.close()
            raise
        self.widgets: dict[str, tuple[int, int, int, int]] = {k: tuple(v) for k, v in self.ready["widgets"].items()}  # type: ignore[misc]
        self.seed = seed

    def center(self, name: str) -> tuple[int, int]:
        x, y, w, h = self.widgets[name]
        return (x + w // 2, y + h // 2)

    def _read(self) -> None:
        with open(self.events_path, encoding="utf-8") as f:
            f.seek(self._offset)
            chunk = f.read()
            self._offset = f.tell()
        self._buffer += chunk
        *lines, self._buffer = self._buffer.split("\n")
        self.records.extend(json.loads(line) for line in lines if line.strip())

    def mark(self) -> int:
        """An index into :attr:`records`: pass it as ``since`` to see only later records."""
        self._read()
        return len(self.records)

    def since(self, mark: int) -> list[Record]:
        self._read()
        return self.records[mark:]

    def wait_for(self, predicate: Callable[[Record], bool], *, timeout: float = 10.0, since: int | None = None) -> Record:
        start = self.mark() if since is None else since
        deadline = time.monotonic() + timeout
        while True:
            self._read()
            for record in self.records[start:]:
                if predicate(record):
                    return record
            if self.proc.poll() is not None:
                raise RuntimeError(f"target app exited with {self.proc.returncode}")
            if time.monotonic() > deadline:
                tail = self.records[start:][-10:]
                raise TimeoutError(f"no matching record within {timeout}s; last records: {tail}")
            time.sleep(0.01)

    def wait_quiet(self, quiet: float = 0.3, timeout: float = 10.0) -> None:
        """Wait until no new record arrived for ``quiet`` seconds."""
        deadline = time.monotonic() + timeout
        count, since = self.mark(), time.monotonic()
        while time.monotonic() < deadline:
            time.sleep(0.02)
            now = self.mark()
            if now != count:
                count, since = now, time.monotonic()
            elif time.monotonic() - since >= quiet:
                return
        raise TimeoutError("the target app kept recording events")

    def command(self, line: str, reply: str, timeout: float = 10.0) -> Record:
        start = self.mark()
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        return self.wait_for(lambda r: r["type"] == reply, timeout=timeout, since=start)

    def clear(self) -> None:
        self.command("clear", "cleared")

    def focus(self, name: str) -> None:
        self.command(f"focus {name}", "focused")

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write("quit\n")
                self.proc.stdin.close()
                self.proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait(timeout=5)
        elif self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()


def keys_and_buttons_down() -> tuple[list[int], int]:
    """Keycodes the X server reports pressed, and the pointer button mask."""
    x = ctypes.CDLL("libX11.so.6")
    x.XOpenDisplay.restype = ctypes.c_void_p
    x.XDefaultRootWindow.restype = ctypes.c_ulong
    display = ctypes.c_void_p(x.XOpenDisplay(None))
    try:
        keymap = (ctypes.c_char * 32)()
        x.XQueryKeymap(display, keymap)
        down = [i * 8 + b for i, byte in enumerate(keymap.raw) for b in range(8) if byte >> b & 1]
        root, child = ctypes.c_ulong(), ctypes.c_ulong()
        rx, ry, wx, wy = (ctypes.c_int() for _ in range(4))
        mask = ctypes.c_uint()
        x.XQueryPointer(display, ctypes.c_ulong(x.XDefaultRootWindow(display)), ctypes.byref(root), ctypes.byref(child),
                        ctypes.byref(rx), ctypes.byref(ry), ctypes.byref(wx), ctypes.byref(wy), ctypes.byref(mask))
        return down, mask.value & 0x1F00  # Button1..5 bits
    finally:
        x.XCloseDisplay(display)
