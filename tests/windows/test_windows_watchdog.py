"""The input watchdog on the Win32 implementation: a process holding Shift and the left
button through deskpilot's SendInput input is ended with TerminateProcess, and its
watchdog releases them, and nothing it did not hold.

What is observed: the left button with GetAsyncKeyState, and the keys as the focused
window sees them (WM_KEYDOWN / WM_KEYUP in a raw Win32 window of this process): Wine 8
does not show keys another process sent in this process's GetAsyncKeyState (buttons it
does), a Windows application sees them as messages either way."""

from __future__ import annotations

import ctypes
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from typing import Any

import pytest

pytestmark = [
    pytest.mark.windows,
    pytest.mark.skipif(sys.platform != "win32", reason="needs the Win32 implementation"),
]

if sys.platform == "win32":
    from win_target_app import WM_KEYDOWN, WM_KEYUP, RawKeyTarget

VK_LBUTTON, VK_SHIFT, VK_CONTROL = 0x01, 0x10, 0x11

HOLDER = textwrap.dedent(
    """
    import sys, time
    from deskpilot.input import InputController
    hands = InputController("sendinput")
    held = hands.hold("shift")  # kept referenced: a collected hold lets go
    held.__enter__()
    hands.mouse_down("left")
    deadline = time.monotonic() + 60
    while not hands.backend._held.watched and time.monotonic() < deadline:
        time.sleep(0.01)  # the watchdog's interpreter is starting
    print("HELD" if hands.backend._held.watched else "NO WATCHDOG", flush=True)
    time.sleep(120)
    """
)


def button_down() -> bool:
    user32 = ctypes.WinDLL("user32")
    user32.GetAsyncKeyState.argtypes, user32.GetAsyncKeyState.restype = [ctypes.c_int], ctypes.c_short
    return bool(user32.GetAsyncKeyState(VK_LBUTTON) & 0x8000)


@pytest.fixture
def raw_target(dpi_awareness: Any) -> Iterator[Any]:
    target = RawKeyTarget()
    try:
        yield target
    finally:
        target.close()


def keys(target: Any, msg: int) -> list[int]:
    return [m.wparam for m in target.of(msg)]


def test_a_terminated_process_releases_what_it_held_and_nothing_else(raw_target: Any, sendinput: Any) -> None:
    from deskpilot.input._keys import resolve_key

    x, y = raw_target.center()
    sendinput.move(x, y)
    sendinput.button("left", True)
    sendinput.button("left", False)
    assert raw_target.pump_until(raw_target.has_focus), "the raw Win32 window did not get the focus"
    control = resolve_key("ctrl")
    sendinput.key(control, True)  # the user's Control: the process never pressed it
    proc = subprocess.Popen([sys.executable, "-c", HOLDER], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "HELD", proc.communicate()
        assert raw_target.pump_until(lambda: VK_SHIFT in keys(raw_target, WM_KEYDOWN) and button_down())
        raw_target.messages.clear()
        raw_target.pump_until(lambda: False, 0.3)
        assert raw_target.messages == [] and button_down()  # still held while the process lives
        killed = time.monotonic()
        proc.kill()  # TerminateProcess: no clean-up runs in the process
        released = raw_target.pump_until(lambda: VK_SHIFT in keys(raw_target, WM_KEYUP) and not button_down())
        took = time.monotonic() - killed
        if not released:
            _, err = proc.communicate(timeout=30)
            pytest.fail(f"after TerminateProcess: {raw_target.messages}, button down {button_down()}; stderr: {err}")
        print(f"[watchdog] Shift and the left button released {took * 1000:.0f} ms after TerminateProcess")
        raw_target.pump_until(lambda: False, 0.3)
        assert VK_CONTROL not in keys(raw_target, WM_KEYUP), "the watchdog let go of the user's Control"
    finally:
        sendinput.key(control, False)
        if proc.poll() is None:
            proc.kill()
        proc.communicate()
