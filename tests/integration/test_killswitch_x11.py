"""Kill switch and active-window reader on a real X server (Xvfb), driven through XTest."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator

import pytest

from deskpilot._x11 import XDisplay as Connection
from deskpilot.safety import KillSwitch, X11WatchBackend, X11WindowReader

pytestmark = pytest.mark.x11

POLL = 0.02


def xdotool(*args: str) -> None:
    subprocess.run(["xdotool", *args], check=True, timeout=10)


def wait_until(predicate: object, timeout: float = 3.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return True
        time.sleep(0.005)
    return False


@pytest.fixture
def centred(xvfb: str) -> Iterator[str]:
    xdotool("mousemove", "960", "540")
    yield xvfb
    xdotool("mousemove", "960", "540")


@pytest.mark.parametrize(("x", "y", "name"), [(0, 0, "top-left"), (1919, 1079, "bottom-right")])
def test_moving_the_pointer_into_a_corner_trips_within_the_poll_interval(centred: str, x: int, y: int, name: str) -> None:
    with KillSwitch(poll_interval=POLL, hotkeys=()) as switch:
        assert switch.status["corner"].startswith("armed")
        time.sleep(3 * POLL)
        assert not switch.tripped
        polls = switch.polls
        xdotool("mousemove", str(x), str(y))
        assert wait_until(lambda: switch.tripped)
    assert switch.trip_info is not None and switch.trip_info.source == "corner"
    assert name in switch.trip_info.reason
    # tripped on the first polls after the move (counted in polls, not in seconds)
    assert switch.polls - polls <= 3 + int(0.1 / POLL)


def test_a_corner_left_again_at_once_still_trips(centred: str) -> None:
    # Into the corner and out again within one poll interval (one xdotool run: about a
    # millisecond apart): a sampled pointer is almost never seen there, every motion is.
    with KillSwitch(poll_interval=1.0, hotkeys=()) as switch:
        assert switch.status["corner"].endswith("every motion")
        xdotool("mousemove", "1919", "1079", "mousemove", "700", "700")
        assert wait_until(lambda: switch.tripped)
    assert switch.trip_info is not None and switch.trip_info.source == "corner"
    assert switch.trip_info.detail == {"x": 1919, "y": 1079}


def test_the_motion_recorder_sees_every_position_in_order(centred: str) -> None:
    from deskpilot._x11._motion import MotionRecorder

    recorder = MotionRecorder()
    try:
        xdotool("mousemove", "10", "20", "mousemove", "30", "40", "mousemove", "50", "60")
        seen: list[tuple[int, int]] = []
        assert wait_until(lambda: (seen.extend(recorder.drain()), (50, 60) in seen)[1])
        assert [p for p in seen if p in ((10, 20), (30, 40), (50, 60))] == [(10, 20), (30, 40), (50, 60)]
    finally:
        recorder.close()
    assert recorder.data is None and recorder.control.closed
    recorder.close()  # idempotent


def test_the_agents_own_move_into_a_corner_does_not_trip(centred: str) -> None:
    with KillSwitch(poll_interval=POLL, hotkeys=()) as switch:
        switch.note_pointer(0, 0)
        xdotool("mousemove", "0", "0")
        time.sleep(6 * POLL)
        assert not switch.tripped
        xdotool("mousemove", "500", "500")
        time.sleep(4 * POLL)
        xdotool("mousemove", "0", "0")
        assert wait_until(lambda: switch.tripped)


@pytest.mark.parametrize("lock", [None, "Num_Lock", "Caps_Lock"])
def test_the_global_hotkey_trips_with_and_without_lock_modifiers(centred: str, lock: str | None) -> None:
    with KillSwitch(poll_interval=POLL, corner=False) as switch:
        assert switch.status["hotkey"] == "armed: ctrl+alt+q"
        if lock:
            xdotool("key", lock)  # lock on: the grab must still match
        try:
            xdotool("key", "ctrl+alt+q")
            assert wait_until(lambda: switch.tripped)
        finally:
            if lock:
                xdotool("key", lock)  # lock off again for the other tests
    assert switch.trip_info is not None and switch.trip_info.source == "hotkey"


@pytest.mark.parametrize("held", ["shift+ctrl", "shift", "win", "ctrl+alt"])
def test_the_hotkey_trips_while_the_agent_holds_modifiers(centred: str, held: str) -> None:
    from deskpilot.input import InputController

    with KillSwitch(poll_interval=POLL, corner=False) as switch, InputController("xtest") as hands:
        assert switch.status["hotkey"] == "armed: ctrl+alt+q"
        with hands.hold(held):
            hands.sync()
            xdotool("key", "ctrl+alt+q")  # the user's press, on top of the agent's held keys
            assert wait_until(lambda: switch.tripped)
    assert switch.trip_info is not None and switch.trip_info.source == "hotkey"


def test_other_keys_do_not_trip_and_the_grab_is_released_on_stop(centred: str) -> None:
    with KillSwitch(poll_interval=POLL, corner=False, hotkeys=("ctrl+alt+q",)) as first:
        xdotool("key", "ctrl+alt+w", "q", "alt+q", "shift+q", "ctrl+shift+q")
        time.sleep(5 * POLL)
        assert not first.tripped
        # a second watcher cannot grab the same combo while the first holds it
        with KillSwitch(poll_interval=POLL, corner=False, hotkeys=("ctrl+alt+q", "pause")) as second:
            assert "unavailable" in second.status["hotkey"] and "already grabbed" in second.status["hotkey"]
            assert "armed: pause" in second.status["hotkey"]
    with KillSwitch(poll_interval=POLL, corner=False) as third:
        assert third.status["hotkey"] == "armed: ctrl+alt+q"
        xdotool("key", "ctrl+alt+q")
        assert wait_until(lambda: third.tripped)


def test_watcher_connections_are_closed(centred: str) -> None:
    backend = X11WatchBackend()
    backend.arm_hotkey("pause")
    assert backend.grabs
    backend.close()
    assert backend.conn.ptr == 0 and backend.grabs == []
    backend.close()  # idempotent


TK_APP = textwrap.dedent(
    """
    import sys, tkinter as tk
    root = tk.Tk(className="Deskpilotsafety")
    root.title(sys.argv[1])
    root.geometry("320x200+200+150")
    entry = tk.Entry(root)
    entry.pack()
    def ready():
        root.focus_force()
        entry.focus_set()
        root.update()
        print(root.wm_frame(), flush=True)
    root.after(100, ready)
    root.after(20000, root.destroy)
    root.mainloop()
    """
)


@pytest.fixture
def tk_window(xvfb: str) -> Iterator[tuple[str, int]]:
    title = "Safety test — ünïcode ✓"
    proc = subprocess.Popen([sys.executable, "-c", TK_APP, title], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip(), "the Tk app did not start"
        found = subprocess.run(["xdotool", "search", "--class", "Deskpilotsafety"],
                               capture_output=True, text=True, timeout=10, check=True)
        yield title, int(found.stdout.split()[0])
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_active_window_without_a_window_manager_follows_the_focus(tk_window: tuple[str, int]) -> None:
    title, wrapper = tk_window
    reader = X11WindowReader()
    try:
        assert wait_until(lambda: reader.active() is not None)
        info = reader.active()
        assert info is not None
        assert info.title == title
        assert info.wm_class == "Deskpilotsafety" and info.instance == "deskpilotsafety"
        assert info.handle == wrapper
    finally:
        reader.close()


def test_active_window_from_net_active_window(tk_window: tuple[str, int]) -> None:
    title, wrapper = tk_window
    subprocess.run(
        ["xprop", "-root", "-f", "_NET_ACTIVE_WINDOW", "32c", "-set", "_NET_ACTIVE_WINDOW", str(wrapper)],
        check=True, timeout=10,
    )
    try:
        with Connection() as conn:
            assert conn.property_ints(conn.root, "_NET_ACTIVE_WINDOW") == [wrapper]
        reader = X11WindowReader()
        info = reader.active()
        reader.close()
        assert info is not None and info.title == title and info.handle == wrapper
    finally:
        subprocess.run(["xprop", "-root", "-remove", "_NET_ACTIVE_WINDOW"], check=True, timeout=10)


def test_a_stale_net_active_window_falls_back_to_the_focus(tk_window: tuple[str, int]) -> None:
    title, _ = tk_window
    subprocess.run(
        ["xprop", "-root", "-f", "_NET_ACTIVE_WINDOW", "32c", "-set", "_NET_ACTIVE_WINDOW", str(0x7FFFFFF)],
        check=True, timeout=10,
    )
    try:
        reader = X11WindowReader()
        info = reader.active()  # BadWindow on the stale id must not kill the process
        reader.close()
        assert info is not None and info.title == title
    finally:
        subprocess.run(["xprop", "-root", "-remove", "_NET_ACTIVE_WINDOW"], check=True, timeout=10)


def test_no_focused_window(xvfb: str) -> None:
    xdotool("mousemove", "960", "540")
    reader = X11WindowReader()
    try:
        # with no client focused, X reports PointerRoot or None: nothing to act upon
        info = reader.active()
        assert info is None or info.wm_class  # only a real top-level window counts
    finally:
        reader.close()
