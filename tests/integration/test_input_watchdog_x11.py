"""The input watchdog on a real X server: a process holding button 1 and Shift through
deskpilot's input is killed with SIGKILL, and its watchdog lets go of them (and of
nothing else) without any other deskpilot process running."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator

import pytest

from deskpilot._x11 import XDisplay as Connection

pytestmark = pytest.mark.x11

XK_SHIFT_L, XK_CONTROL_L = 0xFFE1, 0xFFE3
BUTTON1 = 1 << 8

HOLDER = textwrap.dedent(
    """
    import sys, time
    from deskpilot.input import InputController
    hands = InputController("xtest")
    hands.move(700, 400)
    hands.mouse_down("left")
    if sys.argv[1] == "shift-held":
        held = hands.hold("shift")  # kept referenced: a collected hold lets go
        held.__enter__()
    else:
        hands.key("shift")  # pressed and released: no longer held
    hands.sync()
    print("HELD", flush=True)
    time.sleep(120)
    """
)


def state(keysym: int) -> tuple[bool, bool]:
    """(button 1 down, the key of ``keysym`` down) as the X server says now."""
    with Connection() as conn:
        code = conn.keycode(keysym)
        keymap = conn.keymap()
        buttons = conn.pointer_buttons()
    return bool(buttons & BUTTON1), bool(keymap[code // 8] & (1 << (code % 8)))


def watchdogs_of(pid: int) -> list[int]:
    """The running watchdog processes of ``pid`` (read from /proc: their command lines)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if b"deskpilot._x11._watchdog" in argv and str(pid).encode() in argv:
            found.append(int(entry))
    return found


@pytest.fixture
def holder(xvfb: str) -> Iterator[subprocess.Popen[str]]:
    procs: list[subprocess.Popen[str]] = []

    def start(how: str) -> subprocess.Popen[str]:
        proc = subprocess.Popen([sys.executable, "-c", HOLDER, how], stdout=subprocess.PIPE, text=True)
        procs.append(proc)
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "HELD"
        return proc

    yield start  # type: ignore[misc]
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()
    subprocess.run(["xdotool", "keyup", "shift", "ctrl", "mouseup", "1"], check=False, timeout=10)


def test_a_killed_process_releases_what_it_held_and_nothing_else(holder: object, capsys: pytest.CaptureFixture[str]) -> None:
    proc = holder("shift-held")  # type: ignore[operator]
    assert state(XK_SHIFT_L) == (True, True)
    deadline = time.monotonic() + 10
    while not watchdogs_of(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.01)
    (watchdog,) = watchdogs_of(proc.pid)
    # The user holds Control (on the same XTest device as the agent: the hardest case).
    subprocess.run(["xdotool", "keydown", "ctrl"], check=True, timeout=10)
    time.sleep(0.3)  # the watchdog's interpreter has started and connected
    killed = time.monotonic()
    os.kill(proc.pid, signal.SIGKILL)
    released = None
    while time.monotonic() < killed + 2.0:
        if state(XK_SHIFT_L) == (False, False):
            released = time.monotonic() - killed
            break
        time.sleep(0.002)
    assert released is not None, "button 1 / Shift still down 2 s after SIGKILL"
    with capsys.disabled():
        print(f"\n[watchdog] released button 1 and Shift {released * 1000:.0f} ms after SIGKILL")
    assert state(XK_CONTROL_L)[1], "the watchdog let go of a key the process never pressed"
    proc.wait(5)
    deadline = time.monotonic() + 5
    while watchdog in watchdogs_of(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert watchdog not in watchdogs_of(proc.pid), "the watchdog did not exit after acting"


def test_a_key_the_process_let_go_of_is_the_users_after(holder: object) -> None:
    proc = holder("shift-released")  # type: ignore[operator]
    assert state(XK_SHIFT_L) == (True, False)
    subprocess.run(["xdotool", "keydown", "shift"], check=True, timeout=10)  # the user's Shift
    time.sleep(0.3)
    os.kill(proc.pid, signal.SIGKILL)
    deadline = time.monotonic() + 2.0
    while state(XK_SHIFT_L)[0] and time.monotonic() < deadline:
        time.sleep(0.002)
    assert not state(XK_SHIFT_L)[0], "button 1 still down 2 s after SIGKILL"
    assert state(XK_SHIFT_L)[1], "the watchdog released a Shift the process had let go of"


def test_a_run_killed_with_sigkill_has_its_held_keys_released(xvfb: str, tmp_path: object) -> None:
    # The whole product: `deskpilot run` holds Shift for a model (the extended tool set's
    # hold_key, 5 s) and is killed meanwhile, as the OOM killer would.
    from deskpilot.testing import ModelServer, Reply, ScriptedPolicy

    policy = ScriptedPolicy([Reply(tool_calls=[("hold_key", {"key": "shift", "seconds": 5})])], on_exhausted="repeat")
    with ModelServer(policy) as server:
        proc = subprocess.Popen(
            [sys.executable, "-m", "deskpilot", "run", "--endpoint", server.endpoint, "--toolset", "extended",
             "--runs-dir", str(tmp_path), "--image-size", "480x270", "--quiet", "hold shift"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )
        try:
            deadline = time.monotonic() + 60
            while not state(XK_SHIFT_L)[1] and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.01)
            assert state(XK_SHIFT_L)[1], "the run never held Shift"
            killed = time.monotonic()
            os.kill(proc.pid, signal.SIGKILL)
            while state(XK_SHIFT_L)[1] and time.monotonic() < killed + 2.0:
                time.sleep(0.002)
            took = time.monotonic() - killed
        finally:
            if proc.poll() is None:
                proc.kill()
            _, err = proc.communicate(timeout=30)
    assert not state(XK_SHIFT_L)[1], f"Shift still down 2 s after the run's SIGKILL; stderr: {err}"
    print(f"\n[watchdog] the run's Shift released {took * 1000:.0f} ms after SIGKILL")
