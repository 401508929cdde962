"""The kill switch and the window-title policy on the Win32 implementation: RegisterHotKey
and the fail-safe corner (GetCursorPos) driven by real SendInput, and the foreground window
read with GetForegroundWindow/GetWindowTextW/GetClassNameW against a real Windows window."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

import pytest

pytestmark = [
    pytest.mark.windows,
    pytest.mark.skipif(sys.platform != "win32", reason="needs the Win32 implementation"),
]

POLL = 0.02


def wait_until(predicate: Callable[[], bool], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()


def watch_backend() -> Any:
    """The real Win32 watch backend, built in the watcher thread as the switch does.

    Under Wine the thread's message queue is created first (PeekMessage, the idiom Microsoft
    gives for PostThreadMessage): Wine 8's wineserver stores ``current->queue`` in the hotkey
    without creating it (server/queue.c:2919, DECL_HANDLER(register_hotkey)) and dereferences
    it when the hotkey fires (server/queue.c:1495, queue_hotkey_message), so the server
    crashes. On Windows RegisterHotKey, a user32 call, gives the thread its queue itself, and
    the product calls it as documented. docs/wine-deviations.md.
    """
    import ctypes

    from wine import on_wine

    from deskpilot.safety._killswitch import Win32WatchBackend

    if on_wine():
        msg = ctypes.create_string_buffer(64)  # MSG is 48 bytes on Win64
        ctypes.WinDLL("user32").PeekMessageW(msg, None, 0, 0, 0)  # PM_NOREMOVE
    return Win32WatchBackend()


def test_hotkey_ctrl_alt_q_trips_the_switch(target: Any, sendinput: Any) -> None:
    from deskpilot.input._keys import resolve_key
    from deskpilot.safety import KillSwitch

    with KillSwitch(poll_interval=POLL, corner=False, backend=watch_backend) as switch:
        assert not switch.tripped
        keys = [resolve_key(k) for k in ("ctrl", "alt", "q")]
        for key in keys:
            sendinput.key(key, True)
        for key in reversed(keys):
            sendinput.key(key, False)
        target.pump(0.2)
        assert wait_until(lambda: switch.tripped), switch.status
    assert switch.trip_info is not None and switch.trip_info.source == "hotkey"


def test_pointer_in_a_corner_trips_the_switch(target: Any, sendinput: Any) -> None:
    from deskpilot.safety import KillSwitch

    x, y = target.center(target.pad)
    sendinput.move(x, y)
    sendinput.sync()
    with KillSwitch(poll_interval=POLL, hotkeys=()) as switch:
        time.sleep(5 * POLL)
        assert not switch.tripped
        sendinput.move(0, 0)
        sendinput.sync()
        assert wait_until(lambda: switch.tripped)
    assert switch.trip_info is not None and switch.trip_info.source == "corner"
    assert "top-left" in switch.trip_info.reason
    sendinput.move(x, y)


def test_a_corner_left_again_at_once_trips_the_switch(target: Any, sendinput: Any) -> None:
    # Into the corner and straight out again, without waiting in between: a GetCursorPos
    # sample almost never sees it, the low-level mouse hook sees both moves.
    from deskpilot.safety import KillSwitch

    x, y = target.center(target.pad)
    sendinput.move(x, y)
    sendinput.sync()
    with KillSwitch(poll_interval=1.0, hotkeys=(), backend=watch_backend) as switch:
        assert switch.status["corner"].endswith("every motion"), switch.status
        sendinput.move(0, 0)
        sendinput.move(x, y)
        sendinput.sync()
        assert wait_until(lambda: switch.tripped), switch.status
    assert switch.trip_info is not None and switch.trip_info.source == "corner"
    assert switch.trip_info.detail == {"x": 0, "y": 0}


def test_window_policy_reads_the_foreground_window(target: Any, sendinput: Any) -> None:
    from deskpilot.safety import Win32WindowReader

    x, y = target.center(target.pad)
    sendinput.move(x, y)
    sendinput.button("left", True)
    sendinput.button("left", False)
    target.pump(0.3)
    reader = Win32WindowReader()
    try:
        assert wait_until(lambda: (reader.active() or None) is not None)
        info = reader.active()
        assert info is not None
        assert info.title == "deskpilot windows target", info.describe()
        assert info.wm_class  # Tk's toplevel class name
    finally:
        reader.close()


def test_window_policy_denies_an_action_on_a_denied_window(target: Any, sendinput: Any) -> None:
    from deskpilot.safety import ActionRequest, Policy, Win32WindowReader

    x, y = target.center(target.pad)
    sendinput.move(x, y)
    sendinput.button("left", True)
    sendinput.button("left", False)
    target.pump(0.3)
    policy = Policy.from_config({"deny_windows": ["*windows target*"]})
    allow = Policy.from_config({"allow_windows": ["deskpilot windows target"]})
    reader = Win32WindowReader()
    try:
        window = reader.active()
    finally:
        reader.close()
    click = ActionRequest("click_element", pointer=True)
    denied = policy.check(click, window)
    assert not denied.allowed and denied.rule.startswith("window.deny"), denied.as_dict()
    assert allow.check(click, window).allowed
