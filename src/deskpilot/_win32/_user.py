"""The USER calls of the kill switch and the foreground-window reader, as plain values.

:mod:`deskpilot.safety` decides what a window or a pointer position means; the buffers,
structures and out-parameters those answers arrive in stay here. Each function takes the
``user32`` :class:`~deskpilot._win32._library.Library` to call (the shared one by
default; tests pass one over a recorded fake), so every call goes through the checked
prototypes of :mod:`deskpilot._win32._prototypes`.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from deskpilot._win32._constants import (
    HC_ACTION,
    PM_REMOVE,
    SM_CXVIRTUALSCREEN,
    SM_CYVIRTUALSCREEN,
    SM_XVIRTUALSCREEN,
    SM_YVIRTUALSCREEN,
    WH_MOUSE_LL,
    WM_MOUSEMOVE,
)
from deskpilot._win32._library import Library
from deskpilot._win32._prototypes import HOOKPROC
from deskpilot._win32._structs import MSG, MSLLHOOKSTRUCT, POINT
from deskpilot._win32._types import DWORD, utf16_buffer, utf16_text

__all__ = [
    "ForegroundWindow",
    "MouseHook",
    "cursor_position",
    "drain_messages",
    "foreground_window",
    "virtual_screen",
]

#: GetClassNameW's documented maximum class-name length is 256, plus the terminator.
CLASS_CHARS = 257


@dataclass(frozen=True, slots=True)
class ForegroundWindow:
    """The window in front: its handle, title, class name and owning process."""

    handle: int
    title: str
    class_name: str
    pid: int | None


def foreground_window(user32: Library) -> ForegroundWindow | None:
    """The foreground window, or None when no window is in front.

    Raises :class:`~deskpilot._errors.PlatformError` when the window closes while it is
    read (GetClassNameW / GetWindowThreadProcessId fail for a stale handle)."""
    hwnd = user32.GetForegroundWindow()
    if not hwnd:
        return None
    length = int(user32.GetWindowTextLengthW(hwnd))
    title = utf16_buffer(length + 1)
    copied = int(user32.GetWindowTextW(hwnd, title, length + 1)) if length > 0 else 0
    class_name = utf16_buffer(CLASS_CHARS)
    class_len = int(user32.GetClassNameW(hwnd, class_name, CLASS_CHARS))
    pid = DWORD()
    user32.GetWindowThreadProcessId(hwnd, pid)
    return ForegroundWindow(
        handle=int(hwnd),
        title=utf16_text(title, copied),
        class_name=utf16_text(class_name, class_len),
        pid=int(pid.value) or None,
    )


def cursor_position(user32: Library) -> tuple[int, int]:
    """The pointer in virtual-desktop pixels (raises without an interactive desktop:
    a locked workstation, a service session)."""
    point = POINT()
    user32.GetCursorPos(point)
    return int(point.x), int(point.y)


def virtual_screen(user32: Library) -> tuple[int, int, int, int]:
    """``(left, top, width, height)`` of the virtual desktop (all monitors)."""
    metric = user32.GetSystemMetrics
    return (
        int(metric(SM_XVIRTUALSCREEN)),
        int(metric(SM_YVIRTUALSCREEN)),
        int(metric(SM_CXVIRTUALSCREEN)),
        int(metric(SM_CYVIRTUALSCREEN)),
    )


def drain_messages(user32: Library) -> Iterator[tuple[int, int]]:
    """Remove and yield ``(message, wParam)`` of every message in this thread's queue."""
    msg = MSG()
    while user32.PeekMessageW(msg, None, 0, 0, PM_REMOVE):
        yield int(msg.message), int(msg.wParam)


class MouseHook:
    """A low-level mouse hook (WH_MOUSE_LL): ``on_move(x, y)`` for every pointer move the
    session processes (the user's and SendInput's alike), with the position it moved to
    in per-monitor-aware screen pixels.

    Windows calls the hook on the thread that installed it, while that thread retrieves
    messages (MsgWaitForMultipleObjects wakes for it, PeekMessageW runs it), and waits
    for it on every mouse event of the session, removing a hook that keeps it waiting
    past LowLevelHooksTimeout: ``on_move`` must be quick and must not raise (what it
    raises is dropped). Raises :class:`~deskpilot._errors.PlatformError` when the hook
    cannot be installed.
    """

    def __init__(self, user32: Library, kernel32: Library, on_move: Callable[[int, int], None]) -> None:
        self.user32 = user32
        self._on_move = on_move
        # Kept referenced while installed: ctypes frees the thunk with the Python object.
        self._proc = HOOKPROC(self._called)
        module = kernel32.GetModuleHandleW(None)
        self.handle: int | None = int(user32.SetWindowsHookExW(WH_MOUSE_LL, self._proc, module, 0))

    def _called(self, code: int, wparam: int, lparam: int) -> int:
        try:
            if code == HC_ACTION and wparam == WM_MOUSEMOVE and lparam:
                info = ctypes.cast(lparam, ctypes.POINTER(MSLLHOOKSTRUCT)).contents
                self._on_move(int(info.pt.x), int(info.pt.y))
        except Exception:  # a bad event is dropped, never raised into user32
            pass
        try:
            return int(self.user32.CallNextHookEx(None, code, wparam, lparam) or 0)
        except Exception:
            return 0

    def close(self) -> None:
        """Remove the hook (idempotent); PlatformError when Windows removed it already."""
        handle, self.handle = self.handle, None
        if handle is not None:
            self.user32.UnhookWindowsHookEx(handle)
