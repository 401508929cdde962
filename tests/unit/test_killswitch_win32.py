"""The Windows parts (foreground window, cursor polling, RegisterHotKey) against recorded
fakes of user32/kernel32, plus the layouts of the structures they fill."""

from __future__ import annotations

import ctypes
import sys
import time
from typing import Any

import pytest

from deskpilot._errors import PlatformError
from deskpilot.safety import KillSwitch, Win32WatchBackend, Win32WindowReader, WindowInfo, _win32


def _target(ref: Any) -> Any:
    """The object a ctypes.byref() points at (what the real DLL would write into)."""
    return ref._obj


class FakeUser32:
    """Answers like user32 for one foreground window and records every call."""

    def __init__(self, hwnd: int = 0x1A2B, title: str = "Untitled - Notepad", cls: str = "Notepad",
                 pid: int = 4242) -> None:
        self.hwnd, self.title, self.cls, self.pid = hwnd, title, cls, pid
        self.calls: list[tuple[str, tuple[Any, ...]]] = []
        self.cursor = (500, 400)
        self.messages: list[tuple[int, int]] = []  # (message, wParam) waiting in the queue
        self.registered: dict[int, tuple[int, int]] = {}
        self.refuse_hotkeys = False
        self.metrics = {_win32.SM_XVIRTUALSCREEN: -1920, _win32.SM_YVIRTUALSCREEN: 0,
                        _win32.SM_CXVIRTUALSCREEN: 3840, _win32.SM_CYVIRTUALSCREEN: 1080}

    def _rec(self, name: str, *args: Any) -> None:
        self.calls.append((name, args))

    @staticmethod
    def _copy(text: str, buf: Any, size: int) -> int:
        units = text.encode("utf-16-le")
        n = min(len(units) // 2, size - 1)
        ctypes.memmove(buf, units, 2 * n)
        buf[n] = 0
        return n

    def GetForegroundWindow(self) -> int:
        self._rec("GetForegroundWindow")
        return self.hwnd

    def GetWindowTextLengthW(self, hwnd: int) -> int:
        self._rec("GetWindowTextLengthW", hwnd)
        return len(self.title.encode("utf-16-le")) // 2

    def GetWindowTextW(self, hwnd: int, buf: Any, size: int) -> int:
        self._rec("GetWindowTextW", hwnd, size)
        return self._copy(self.title, buf, size)

    def GetClassNameW(self, hwnd: int, buf: Any, size: int) -> int:
        self._rec("GetClassNameW", hwnd, size)
        return self._copy(self.cls, buf, size)

    def GetWindowThreadProcessId(self, hwnd: int, pid_ref: Any) -> int:
        self._rec("GetWindowThreadProcessId", hwnd)
        _target(pid_ref).value = self.pid
        return 77

    def GetCursorPos(self, point_ref: Any) -> int:
        point = _target(point_ref)
        point.x, point.y = self.cursor
        return 1

    def GetSystemMetrics(self, index: int) -> int:
        return self.metrics[index]

    def RegisterHotKey(self, hwnd: Any, hotkey_id: int, mods: int, vk: int) -> int:
        self._rec("RegisterHotKey", hwnd, hotkey_id, mods, vk)
        if self.refuse_hotkeys:
            return 0
        self.registered[hotkey_id] = (mods, vk)
        return 1

    def UnregisterHotKey(self, hwnd: Any, hotkey_id: int) -> int:
        self._rec("UnregisterHotKey", hwnd, hotkey_id)
        return int(self.registered.pop(hotkey_id, None) is not None)

    def PeekMessageW(self, msg_ref: Any, hwnd: Any, lo: int, hi: int, remove: int) -> int:
        assert remove == _win32.PM_REMOVE
        if not self.messages:
            return 0
        msg = _target(msg_ref)
        msg.message, msg.wParam = self.messages.pop(0)
        return 1

    def MsgWaitForMultipleObjects(self, count: int, handles: Any, wait_all: int, ms: int, mask: int) -> int:
        self._rec("MsgWaitForMultipleObjects", count, ms, mask)
        time.sleep(ms / 1000)
        return _win32.WAIT_TIMEOUT


class FakeKernel32:
    def GetCurrentThreadId(self) -> int:
        return 9001


# ------------------------------------------------------------------- layouts


def test_structures_have_their_windows_layout() -> None:
    assert ctypes.sizeof(_win32.POINT) == 8
    if ctypes.sizeof(ctypes.c_void_p) == 8:
        assert ctypes.sizeof(_win32.MSG) == 48
        assert _win32.MSG.message.offset == 8 and _win32.MSG.wParam.offset == 16
        assert _win32.MSG.lParam.offset == 24 and _win32.MSG.time.offset == 32 and _win32.MSG.pt.offset == 36


def test_prototype_table_is_sorted_and_names_known_dlls() -> None:
    names = list(_win32.CFUNCTIONS)
    assert names == sorted(names)
    assert {dll for dll, _, _ in _win32.CFUNCTIONS.values()} == {"user32", "kernel32"}


@pytest.mark.skipif(sys.platform == "win32", reason="off Windows only")
def test_the_dlls_are_refused_off_windows() -> None:
    with pytest.raises(PlatformError, match="only on Windows"):
        _win32.user32()


def test_utf16_helpers_round_trip_astral_characters() -> None:
    buf = _win32.utf16_buffer(8)
    units = "a😀b".encode("utf-16-le")
    ctypes.memmove(buf, units, len(units))
    assert _win32.utf16_text(buf, 4) == "a😀b"
    assert _win32.utf16_text(buf, 100) .startswith("a😀b")


# ------------------------------------------------------------------- foreground window


def test_foreground_window_reader() -> None:
    user32 = FakeUser32(title="Résumé.docx - Word 😀", cls="OpusApp")
    info = Win32WindowReader(user32).active()
    assert info == WindowInfo("Résumé.docx - Word 😀", "OpusApp", "", 4242, 0x1A2B)
    names = [name for name, _ in user32.calls]
    assert names == ["GetForegroundWindow", "GetWindowTextLengthW", "GetWindowTextW", "GetClassNameW",
                     "GetWindowThreadProcessId"]
    # the title buffer holds the text and its terminator
    assert user32.calls[2][1] == (0x1A2B, len("Résumé.docx - Word 😀".encode("utf-16-le")) // 2 + 1)


def test_no_foreground_window() -> None:
    user32 = FakeUser32(hwnd=0)
    assert Win32WindowReader(user32).active() is None
    assert [name for name, _ in user32.calls] == ["GetForegroundWindow"]


def test_untitled_window() -> None:
    info = Win32WindowReader(FakeUser32(title="", cls="Progman")).active()
    assert info is not None and info.title == "" and info.wm_class == "Progman"


# ------------------------------------------------------------------- watch backend


def test_hotkey_registration_and_delivery() -> None:
    user32 = FakeUser32()
    backend = Win32WatchBackend(user32, FakeKernel32())
    backend.arm_hotkey("ctrl+alt+q")
    backend.arm_hotkey("pause")
    assert user32.registered == {
        0xB000: (_win32.MOD_CONTROL | _win32.MOD_ALT | _win32.MOD_NOREPEAT, ord("Q")),
        0xB001: (_win32.MOD_NOREPEAT, 0x13),
    }
    assert backend.wait(0) is False
    user32.messages = [(0x0200, 0), (_win32.WM_HOTKEY, 0xB001)]
    assert backend.wait(0.01) is True
    user32.messages = [(_win32.WM_HOTKEY, 0x1234)]  # someone else's hotkey id
    assert backend.wait(0) is False
    backend.close()
    assert user32.registered == {}


def test_hotkey_refused() -> None:
    user32 = FakeUser32()
    user32.refuse_hotkeys = True
    with pytest.raises(PlatformError, match="cannot register hotkey"):
        Win32WatchBackend(user32, FakeKernel32()).arm_hotkey("ctrl+alt+q")


def test_bounds_pointer_and_wait() -> None:
    user32 = FakeUser32()
    backend = Win32WatchBackend(user32, FakeKernel32())
    assert backend.bounds().as_tuple() == (-1920, 0, 3840, 1080)
    assert backend.pointer() == (500, 400)
    assert backend.thread_id == 9001
    backend.wait(0.02)
    assert ("MsgWaitForMultipleObjects", (0, 20, _win32.QS_ALLINPUT)) in user32.calls


def test_kill_switch_over_the_win32_backend() -> None:
    user32 = FakeUser32()
    with KillSwitch(backend=lambda: Win32WatchBackend(user32, FakeKernel32()), poll_interval=0.005) as switch:
        assert "top-left (-1920,0)" in switch.status["corner"]
        user32.cursor = (1919, 1079)  # the virtual desktop's bottom-right corner
        deadline = time.monotonic() + 2
        while not switch.tripped and time.monotonic() < deadline:
            time.sleep(0.005)
    assert switch.trip_info is not None and switch.trip_info.source == "corner"
    assert user32.registered == {}  # unregistered when the watcher ended
