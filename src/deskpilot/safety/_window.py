"""The foreground window: its title and class, for the policy's window rules.

- X11: ``_NET_ACTIVE_WINDOW`` on the root window (set by every EWMH window manager),
  then ``_NET_WM_NAME`` (UTF-8) or ``WM_NAME`` and ``WM_CLASS`` (instance, class) of that
  window. Without a window manager (bare Xvfb, kiosk sessions) the input focus is used
  instead, walking up the window tree to the top-level window that carries ``WM_CLASS``.
- Windows: ``GetForegroundWindow`` then ``GetWindowTextW``/``GetClassNameW`` and the
  owning process id.

Readers return ``None`` when no window is active (an empty desktop, focus on the root),
and raise :class:`~deskpilot._errors.PlatformError` only when the display itself cannot
be reached.
"""

from __future__ import annotations

import os
import sys
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from deskpilot._errors import PlatformError

if TYPE_CHECKING:
    from deskpilot._win32 import Library
    from deskpilot._x11 import XDisplay

__all__ = [
    "Win32WindowReader",
    "WindowInfo",
    "WindowReader",
    "X11WindowReader",
    "open_window_reader",
]


@dataclass(frozen=True, slots=True)
class WindowInfo:
    """What the policy knows about a window."""

    title: str
    wm_class: str  # X11: the class part of WM_CLASS ("Tk", "firefox"); Windows: the class name
    instance: str = ""  # X11: the instance part of WM_CLASS; "" on Windows
    pid: int | None = None
    handle: int = 0  # X window id or HWND

    def describe(self) -> str:
        cls = self.wm_class or "?"
        return f"{self.title!r} (class {cls!r})"

    def as_dict(self) -> dict[str, Any]:
        return {
            "title": self.title,
            "class": self.wm_class,
            "instance": self.instance,
            "pid": self.pid,
            "handle": self.handle,
        }


class WindowReader(Protocol):
    """Anything that tells which window is in front."""

    def active(self) -> WindowInfo | None: ...

    def close(self) -> None: ...


class X11WindowReader:
    """Active-window reader over its own X connection (opened on first use)."""

    #: The longest parent chain walked from the focus window to its top level.
    MAX_DEPTH = 16

    def __init__(self, display: str | None = None) -> None:
        self._display = display
        self._conn: XDisplay | None = None
        self._lock = threading.Lock()

    def _connection(self) -> XDisplay:
        if self._conn is None:
            from deskpilot._x11 import XDisplay

            self._conn = XDisplay(PlatformError, self._display)
        return self._conn

    def _describe(self, conn: XDisplay, window: int) -> WindowInfo | None:
        wm_class = conn.read_property(window, "WM_CLASS")
        title = conn.property_text(window, "_NET_WM_NAME")
        if title is None:
            title = conn.property_text(window, "WM_NAME")
        if wm_class is None and title is None:
            return None
        instance, cls = "", ""
        if wm_class is not None:
            parts = wm_class[1].split(b"\0")
            instance = parts[0].decode("utf-8", "replace") if parts else ""
            cls = parts[1].decode("utf-8", "replace") if len(parts) > 1 else ""
        pids = conn.property_ints(window, "_NET_WM_PID")
        return WindowInfo(title or "", cls, instance, pids[0] if pids else None, window)

    def active(self) -> WindowInfo | None:
        with self._lock:
            conn = self._connection()
            ids = conn.property_ints(conn.root, "_NET_ACTIVE_WINDOW")
            if ids and ids[0]:
                info = self._describe(conn, ids[0])
                conn.take_errors()  # a window that died meanwhile: BadWindow, not fatal
                if info is not None:
                    return info
            window = conn.focus()
            for _ in range(self.MAX_DEPTH):
                if window <= 1 or window == conn.root:  # None, PointerRoot, the root
                    return None
                info = self._describe(conn, window)
                if info is not None and info.wm_class:
                    conn.take_errors()
                    return info
                window = conn.parent(window)
            conn.take_errors()
            return None

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None


class Win32WindowReader:
    """Foreground-window reader over user32 (a Library over a recorded fake in tests)."""

    def __init__(self, user32: Library | None = None) -> None:
        # Imported here, not at the top: Linux runs never read a Win32 window.
        from deskpilot._win32 import foreground_window, system_library

        self._foreground_window, self._system_library = foreground_window, system_library
        self._user32 = user32

    def active(self) -> WindowInfo | None:
        if self._user32 is None:
            self._user32 = self._system_library("user32")
        window = self._foreground_window(self._user32)
        if window is None:
            return None
        return WindowInfo(
            title=window.title, wm_class=window.class_name, pid=window.pid, handle=window.handle
        )

    def close(self) -> None:
        """Nothing to release: user32 stays loaded."""


def open_window_reader(backend: str = "auto") -> WindowReader | None:
    """The reader for this desktop (``"auto"``, ``"x11"``, ``"win32"``), or None when there
    is no desktop to read (no DISPLAY on Linux)."""
    if backend == "auto":
        if sys.platform == "win32":
            backend = "win32"
        elif os.environ.get("DISPLAY"):
            backend = "x11"
        else:
            return None
    if backend == "win32":
        return Win32WindowReader()
    if backend == "x11":
        return X11WindowReader()
    raise PlatformError(f"unknown window backend {backend!r} (auto, x11, win32)", backend=backend)
