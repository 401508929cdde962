"""The SendInput backend's count of held keys and buttons for the Windows input watchdog
(the block the watchdog reads after a kill), against the recorded user32 fakes."""

from __future__ import annotations

import sys
from typing import Any

from test_win32_sendinput import make_backend, make_desktop

from deskpilot._win32 import _constants as c
from deskpilot.input._keys import resolve_key
from deskpilot.input._win_watchdog import BLOCK_SIZE, HeldInput, hold_win_watchdog, release_held


def counted(desktop: Any) -> tuple[Any, HeldInput, list[Any]]:
    """A backend over the fakes with a held-input block, and what the block said at
    each SendInput call."""
    backend = make_backend(desktop)
    held = HeldInput(bytearray(BLOCK_SIZE))
    backend._held = held
    seen: list[Any] = []
    send = desktop.user32.impls["SendInput"]

    def watching(*args: Any) -> Any:
        seen.append(held.held())
        return send(*args)

    desktop.user32.impls["SendInput"] = watching
    return backend, held, seen


def test_a_press_is_counted_before_it_is_sent_and_a_release_after() -> None:
    desktop = make_desktop()
    backend, held, seen = counted(desktop)
    shift, right = resolve_key("shift"), resolve_key("right")
    backend.key(shift, True)
    backend.key(right, True)  # an extended key: released as one
    backend.button("left", True)
    keys, buttons = held.held()
    assert sorted(keys) == sorted([(shift.vk, False), (right.vk, True)]) and buttons == ["left"]
    backend.key(shift, False)
    backend.button("left", False)
    backend.key(right, False)
    assert held.held() == ([], [])
    # at each SendInput: the press already counted, the release not yet uncounted
    assert [s[1] for s in seen] == [[], [], ["left"], ["left"], ["left"], []]
    assert (shift.vk, False) in seen[0][0] and (shift.vk, False) in seen[3][0]


def test_counts_nest_and_never_go_below_zero() -> None:
    held = HeldInput(bytearray(BLOCK_SIZE))
    held.key(0x10, False, True)
    held.key(0x10, False, True)
    held.key(0x10, False, False)
    assert held.held() == ([(0x10, False)], [])
    held.key(0x10, False, False)
    held.key(0x10, False, False)  # a release of what is not held (mouse_up's way out)
    held.button("right", False)
    assert held.held() == ([], [])


def test_swapped_buttons_are_counted_as_the_button_asked_for() -> None:
    desktop = make_desktop()
    desktop.user32.impls["GetSystemMetrics"] = (
        lambda index, metric=desktop.user32.impls["GetSystemMetrics"]: 1 if index == c.SM_SWAPBUTTON else metric(index)
    )
    backend, held, _ = counted(desktop)
    backend.button("left", True)
    assert held.held() == ([], ["left"])  # released later with button("left"), swapped again


def test_fakes_and_other_systems_start_no_watchdog() -> None:
    assert make_backend(make_desktop())._watchdog is None  # a fake user32: not the desktop's input
    if sys.platform != "win32":
        assert hold_win_watchdog() is None


def test_the_watchdog_sends_the_ups_of_exactly_what_was_held() -> None:
    desktop = make_desktop()
    backend = make_backend(desktop)
    held = HeldInput(bytearray(BLOCK_SIZE))
    right = resolve_key("right")
    held.key(0x10, False, True)
    held.key(right.vk, True, True)
    held.button("middle", True)
    held.key(0x11, False, True)
    held.key(0x11, False, False)  # pressed and let go: not released again
    assert release_held(held, backend) == ([(0x10, False), (right.vk, True)], ["middle"])
    events = [e for batch in desktop.inputs for e in batch]
    keyups = [(e.vk, bool(e.flags & c.KEYEVENTF_EXTENDEDKEY)) for e in events if e.type == c.INPUT_KEYBOARD]
    assert keyups == [(0x10, False), (right.vk, True)]
    assert all(e.flags & c.KEYEVENTF_KEYUP for e in events if e.type == c.INPUT_KEYBOARD)
    assert [e.flags for e in events if e.type == c.INPUT_MOUSE] == [c.MOUSEEVENTF_MIDDLEUP]
