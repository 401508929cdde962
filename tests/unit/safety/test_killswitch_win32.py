"""The Windows parts (foreground window, cursor polling, RegisterHotKey) against recorded
fakes of user32/kernel32 behind the checked prototypes of :mod:`deskpilot._win32` (the
layout of MSG is checked with the other structures in test_win32_structs.py)."""

from __future__ import annotations

import ctypes
import logging
import sys
import time
from typing import Any

import pytest
from win32_fakes import FakeDLL, target

from deskpilot._errors import InputError, PlatformError
from deskpilot._win32 import PROTOTYPES, Check, Library
from deskpilot._win32 import _constants as c
from deskpilot._win32._structs import MSLLHOOKSTRUCT
from deskpilot._win32._types import utf16_buffer, utf16_text
from deskpilot.safety import KillSwitch, Win32WatchBackend, Win32WindowReader, WindowInfo

#: What the safety layer calls in user32 and kernel32.
USER32_CALLS = (
    "CallNextHookEx", "GetClassNameW", "GetCursorPos", "GetForegroundWindow", "GetSystemMetrics",
    "GetWindowTextLengthW", "GetWindowTextW", "GetWindowThreadProcessId", "MsgWaitForMultipleObjects",
    "PeekMessageW", "RegisterHotKey", "SetWindowsHookExW", "UnhookWindowsHookEx", "UnregisterHotKey",
)
HOOK = 0x5151


class FakeUser32:
    """Answers like user32 for one foreground window and records every call."""

    def __init__(self, hwnd: int = 0x1A2B, title: str = "Untitled - Notepad", cls: str = "Notepad",
                 pid: int = 4242) -> None:
        self.hwnd, self.title, self.cls, self.pid = hwnd, title, cls, pid
        self.calls: list[tuple[str, tuple[Any, ...]]] = []
        self.cursor: tuple[int, int] | None = (500, 400)
        self.messages: list[tuple[int, int]] = []  # (message, wParam) waiting in the queue
        self.registered: dict[int, tuple[int, int]] = {}
        self.refuse_hotkeys = False
        self.window_closed = False  # the window closes once GetForegroundWindow returned it
        self.wait_fails = False
        self.hooks: dict[int, tuple[int, Any]] = {}  # handle -> (hook type, procedure)
        self.refuse_hook = False
        self.moves: list[tuple[int, int]] = []  # mouse moves the next PeekMessageW hands to the hooks
        self.passed_on = 0
        self.metrics = {c.SM_XVIRTUALSCREEN: -1920, c.SM_YVIRTUALSCREEN: 0,
                        c.SM_CXVIRTUALSCREEN: 3840, c.SM_CYVIRTUALSCREEN: 1080}
        self.dll = FakeDLL("user32", [], {name: getattr(self, name) for name in USER32_CALLS})

    def library(self) -> Library:
        """user32 as the product sees it: the fake behind the real prototype table."""
        return Library("user32", PROTOTYPES["user32"], dll=self.dll, last_error=self.dll.get_last_error)

    def _rec(self, name: str, *args: Any) -> None:
        self.calls.append((name, args))

    def _fail(self, code: int) -> int:
        self.dll.last_error = code
        return 0

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
        return 0 if self.window_closed else len(self.title.encode("utf-16-le")) // 2

    def GetWindowTextW(self, hwnd: int, buf: Any, size: int) -> int:
        self._rec("GetWindowTextW", hwnd, size)
        return self._copy(self.title, buf, size)

    def GetClassNameW(self, hwnd: int, buf: Any, size: int) -> int:
        self._rec("GetClassNameW", hwnd, size)
        if self.window_closed:
            return self._fail(1400)  # ERROR_INVALID_WINDOW_HANDLE
        return self._copy(self.cls, buf, size)

    def GetWindowThreadProcessId(self, hwnd: int, pid_ref: Any) -> int:
        self._rec("GetWindowThreadProcessId", hwnd)
        target(pid_ref).value = self.pid
        return 77

    def GetCursorPos(self, point_ref: Any) -> int:
        if self.cursor is None:
            return self._fail(c.ERROR_ACCESS_DENIED)  # no interactive desktop
        point = target(point_ref)
        point.x, point.y = self.cursor
        return 1

    def GetSystemMetrics(self, index: int) -> int:
        return self.metrics[index]

    def RegisterHotKey(self, hwnd: Any, hotkey_id: int, mods: int, vk: int) -> int:
        self._rec("RegisterHotKey", hwnd, hotkey_id, mods, vk)
        if self.refuse_hotkeys:
            return self._fail(c.ERROR_HOTKEY_ALREADY_REGISTERED)
        self.registered[hotkey_id] = (mods, vk)
        return 1

    def UnregisterHotKey(self, hwnd: Any, hotkey_id: int) -> int:
        self._rec("UnregisterHotKey", hwnd, hotkey_id)
        if self.registered.pop(hotkey_id, None) is None:
            return self._fail(1419)  # ERROR_HOTKEY_NOT_REGISTERED
        return 1

    def SetWindowsHookExW(self, kind: int, proc: Any, module: Any, thread: int) -> int:
        self._rec("SetWindowsHookExW", kind, module, thread)
        if self.refuse_hook:
            return self._fail(c.ERROR_ACCESS_DENIED)
        self.hooks[HOOK] = (kind, proc)
        return HOOK

    def UnhookWindowsHookEx(self, hook: int) -> int:
        self._rec("UnhookWindowsHookEx", hook)
        return 1 if self.hooks.pop(hook, None) is not None else self._fail(1404)  # ERROR_INVALID_HOOK_HANDLE

    def CallNextHookEx(self, hook: Any, code: int, wparam: int, lparam: int) -> int:
        self.passed_on += 1
        return 0

    def PeekMessageW(self, msg_ref: Any, hwnd: Any, lo: int, hi: int, remove: int) -> int:
        assert remove == c.PM_REMOVE
        # As Windows does: the low-level hooks of this thread run inside its message retrieval.
        moves, self.moves = self.moves, []
        for x, y in moves:
            for kind, proc in list(self.hooks.values()):
                if kind == c.WH_MOUSE_LL:
                    info = MSLLHOOKSTRUCT()
                    info.pt.x, info.pt.y = x, y
                    proc(c.HC_ACTION, c.WM_MOUSEMOVE, ctypes.addressof(info))
        if not self.messages:
            return 0
        msg = target(msg_ref)
        msg.message, msg.wParam = self.messages.pop(0)
        return 1

    def MsgWaitForMultipleObjects(self, count: int, handles: Any, wait_all: int, ms: int, mask: int) -> int:
        self._rec("MsgWaitForMultipleObjects", count, ms, mask)
        if self.wait_fails:
            self._fail(6)  # ERROR_INVALID_HANDLE
            return c.WAIT_FAILED
        time.sleep(ms / 1000)
        return c.WAIT_TIMEOUT


class FakeKernel32:
    def __init__(self) -> None:
        self.dll = FakeDLL("kernel32", [], {"GetCurrentThreadId": lambda: 9001, "GetModuleHandleW": lambda name: 0x400000})

    def library(self) -> Library:
        return Library("kernel32", PROTOTYPES["kernel32"], dll=self.dll, last_error=self.dll.get_last_error)


def backend(user32: FakeUser32) -> Win32WatchBackend:
    return Win32WatchBackend(user32.library(), FakeKernel32().library())


# ------------------------------------------------------------------- declarations


def test_every_call_of_the_safety_layer_is_declared_once_and_checked() -> None:
    user32 = PROTOTYPES["user32"]
    assert set(USER32_CALLS) <= set(user32)
    assert "GetCurrentThreadId" in PROTOTYPES["kernel32"]
    for name in ("GetClassNameW", "GetWindowThreadProcessId", "RegisterHotKey", "UnregisterHotKey"):
        assert user32[name].check is Check.NONZERO and user32[name].error is PlatformError, name
    assert user32["MsgWaitForMultipleObjects"].check is Check.WAIT
    assert user32["GetCursorPos"].check is Check.NONZERO


@pytest.mark.skipif(sys.platform == "win32", reason="off Windows only")
def test_the_dlls_are_refused_off_windows() -> None:
    with pytest.raises(PlatformError, match="only on Windows"):
        Win32WindowReader().active()


def test_utf16_helpers_round_trip_astral_characters() -> None:
    buf = utf16_buffer(8)
    units = "a😀b".encode("utf-16-le")
    ctypes.memmove(buf, units, len(units))
    assert utf16_text(buf, 4) == "a😀b"
    assert utf16_text(buf, 100) .startswith("a😀b")


# ------------------------------------------------------------------- foreground window


def test_foreground_window_reader() -> None:
    user32 = FakeUser32(title="Résumé.docx - Word 😀", cls="OpusApp")
    info = Win32WindowReader(user32.library()).active()
    assert info == WindowInfo("Résumé.docx - Word 😀", "OpusApp", "", 4242, 0x1A2B)
    names = [name for name, _ in user32.calls]
    assert names == ["GetForegroundWindow", "GetWindowTextLengthW", "GetWindowTextW", "GetClassNameW",
                     "GetWindowThreadProcessId"]
    # the title buffer holds the text and its terminator
    assert user32.calls[2][1] == (0x1A2B, len("Résumé.docx - Word 😀".encode("utf-16-le")) // 2 + 1)


def test_no_foreground_window() -> None:
    user32 = FakeUser32(hwnd=0)
    assert Win32WindowReader(user32.library()).active() is None
    assert [name for name, _ in user32.calls] == ["GetForegroundWindow"]


def test_untitled_window() -> None:
    info = Win32WindowReader(FakeUser32(title="", cls="Progman").library()).active()
    assert info is not None and info.title == "" and info.wm_class == "Progman"


def test_a_window_that_closes_while_it_is_read_is_an_error_naming_the_call() -> None:
    user32 = FakeUser32()
    user32.window_closed = True
    with pytest.raises(PlatformError, match="GetClassNameW failed") as caught:
        Win32WindowReader(user32.library()).active()
    assert caught.value.details["function"] == "GetClassNameW" and caught.value.details["last_error"] == 1400


# ------------------------------------------------------------------- watch backend


def test_hotkey_registration_and_delivery() -> None:
    user32 = FakeUser32()
    watch = backend(user32)
    watch.arm_hotkey("ctrl+alt+q")
    watch.arm_hotkey("pause")
    assert user32.registered == {
        0xB000: (c.MOD_CONTROL | c.MOD_ALT | c.MOD_NOREPEAT, ord("Q")),
        0xB001: (c.MOD_NOREPEAT, 0x13),
    }
    assert watch.wait(0) is False
    user32.messages = [(0x0200, 0), (c.WM_HOTKEY, 0xB001)]
    assert watch.wait(0.01) is True
    user32.messages = [(c.WM_HOTKEY, 0x1234)]  # someone else's hotkey id
    assert watch.wait(0) is False
    watch.close()
    assert user32.registered == {}


def test_hotkey_refused() -> None:
    user32 = FakeUser32()
    user32.refuse_hotkeys = True
    with pytest.raises(PlatformError, match=r"cannot register hotkey 'ctrl\+alt\+q': another application") as caught:
        backend(user32).arm_hotkey("ctrl+alt+q")
    assert caught.value.details["error"] == c.ERROR_HOTKEY_ALREADY_REGISTERED


def test_a_failed_unregister_is_logged_and_the_others_are_still_released(caplog: pytest.LogCaptureFixture) -> None:
    user32 = FakeUser32()
    watch = backend(user32)
    watch.arm_hotkey("ctrl+alt+q")
    watch.arm_hotkey("pause")
    del user32.registered[0xB000]  # gone behind our back
    with caplog.at_level(logging.WARNING, logger="deskpilot.safety"):
        watch.close()
    assert user32.registered == {} and watch.ids == []
    assert "UnregisterHotKey failed" in caplog.text


def test_bounds_pointer_and_wait() -> None:
    user32 = FakeUser32()
    watch = backend(user32)
    assert watch.bounds().as_tuple() == (-1920, 0, 3840, 1080)
    assert watch.pointer() == (500, 400)
    assert watch.thread_id == 9001
    watch.wait(0.02)
    assert ("MsgWaitForMultipleObjects", (0, 20, c.QS_ALLINPUT)) in user32.calls


def test_failed_calls_of_the_watcher_raise_with_the_function_and_error_code() -> None:
    user32 = FakeUser32()
    watch = backend(user32)
    user32.cursor = None
    with pytest.raises(InputError, match="GetCursorPos failed") as caught:
        watch.pointer()
    assert caught.value.details["last_error"] == c.ERROR_ACCESS_DENIED
    user32.wait_fails = True
    with pytest.raises(PlatformError, match="MsgWaitForMultipleObjects failed") as caught:
        watch.wait(0.01)
    assert caught.value.details["last_error"] == 6


def test_kill_switch_over_the_win32_backend() -> None:
    user32 = FakeUser32()
    with KillSwitch(backend=lambda: backend(user32), poll_interval=0.005) as switch:
        assert "top-left (-1920,0)" in switch.status["corner"]
        user32.cursor = (1919, 1079)  # the virtual desktop's bottom-right corner
        user32.moves = [(1919, 1079)]  # and the move there, as the mouse hook sees it
        deadline = time.monotonic() + 2
        while not switch.tripped and time.monotonic() < deadline:
            time.sleep(0.005)
    assert switch.trip_info is not None and switch.trip_info.source == "corner"
    assert user32.registered == {}  # unregistered when the watcher ended


def test_the_mouse_hook_sees_a_corner_touched_between_two_polls() -> None:
    user32 = FakeUser32()
    user32.metrics.update({c.SM_XVIRTUALSCREEN: 0, c.SM_CXVIRTUALSCREEN: 1920})
    with KillSwitch(poll_interval=0.01, hotkeys=(), backend=lambda: backend(user32)) as switch:
        assert switch.status["corner"].endswith("every motion"), switch.status
        (kind, _), = user32.hooks.values()
        assert kind == c.WH_MOUSE_LL
        user32.cursor = (700, 700)  # where a GetCursorPos sample would find it
        user32.moves = [(1919, 0), (700, 700)]  # into the top-right corner and out again
        deadline = time.monotonic() + 5
        while not switch.tripped and time.monotonic() < deadline:
            time.sleep(0.01)
    assert switch.trip_info is not None and switch.trip_info.detail == {"x": 1919, "y": 0}
    assert user32.passed_on == 2  # every event is passed on to the next hook
    assert user32.hooks == {} and ("UnhookWindowsHookEx", (HOOK,)) in user32.calls


def test_without_a_mouse_hook_the_pointer_is_sampled() -> None:
    user32 = FakeUser32()
    user32.refuse_hook = True
    watch = backend(user32)
    try:
        assert watch.motions() is None and watch.sampled is not None and "hook" in watch.sampled
    finally:
        watch.close()
