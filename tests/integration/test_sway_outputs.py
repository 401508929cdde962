"""The wlroots backends on a headless sway with two outputs: monitors, capture and clicks
on the second output, clicks on the documented pixel at scales 1.25 and 2.0, the cursor,
what a SIGKILLed agent leaves pressed, and what stops a run on wlroots."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from _sway import GtkApp, expected_pattern, session_env, start_sway

from deskpilot.capture import Capturer
from deskpilot.geometry import Rect
from deskpilot.input import InputController
from deskpilot.testing import ModelServer, Reply, ScriptedPolicy
from deskpilot.testing._sway import SwaySession

pytestmark = [pytest.mark.sway, pytest.mark.wayland]


@pytest.fixture(scope="module")
def sway() -> Iterator[SwaySession]:
    """HEADLESS-1 at (0, 0) and HEADLESS-2 at (1920, 0), 1920x1080 each."""
    with start_sway(size=(1920, 1080), outputs=2, timeout=60.0) as session:
        yield session


@pytest.fixture
def env(sway: SwaySession, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    with session_env(monkeypatch, sway) as found:
        sway.swaymsg("focus", "output", "HEADLESS-1")
        yield found


def test_the_second_output_is_captured_and_clicked(sway: SwaySession, env: dict[str, str]) -> None:
    sway.swaymsg("focus", "output", "HEADLESS-2")
    with GtkApp(sway, "pattern") as app, InputController("wlroots") as hands:
        app.pointer_in(hands, 1920 + 100, 200)
        hands.move(100, 100)  # on the other output: headless sway draws its cursor into frames
        hands.sync()
        with Capturer("wlroots", monitor=2, cursor=False) as cap:
            monitors = cap._backend.monitors()
            assert [(m.name, m.rect, m.primary) for m in monitors] == [
                ("HEADLESS-1", Rect(0, 0, 1920, 1080), True), ("HEADLESS-2", Rect(1920, 0, 1920, 1080), False)]
            assert np.abs(cap.grab().rgb.astype(np.int16) - expected_pattern(1920, 1080)).max() == 0
            # A rectangle across both outputs is assembled from both.
            across = cap._backend.grab_bgra(Rect(1800, 0, 240, 64))
            assert across.shape == (64, 240, 4)
            assert (across[:, 120:, 2::-1] == expected_pattern(120, 64)).all()
        assert hands.desktop == Rect(0, 0, 3840, 1080)
        for x, y in ((1920, 0), (1920 + 100, 200), (3839, 1079)):
            mark = app.mark()
            hands.click(x, y)
            click = app.wait_for(lambda r: r["type"] == "click", since=mark)
            assert (int(click["x"]), int(click["y"])) == (x - 1920, y)


@pytest.mark.parametrize("scale", [1.25, 2.0])
def test_clicks_land_on_the_documented_pixel_at_scale(sway: SwaySession, env: dict[str, str], scale: float) -> None:
    sway.set_scale(scale, "HEADLESS-1")
    try:
        with GtkApp(sway, "pattern") as app, InputController("wlroots") as hands:
            assert (app.ready["width"], app.ready["height"]) == (round(1920 / scale), round(1080 / scale))
            with Capturer("wlroots", cursor=False) as cap:
                # Screenshot pixels stay physical: 1920x1080 whatever the scale.
                assert cap.monitor.rect == Rect(0, 0, 1920, 1080) and cap.grab().size == (1920, 1080)
            app.pointer_in(hands, 1000, 700)
            for x, y in ((0, 0), (1000, 700), (1919, 1079), (333, 777)):
                mark = app.mark()
                hands.click(x, y)
                click = app.wait_for(lambda r: r["type"] == "click", since=mark, timeout=5.0)
                # The app reports logical coordinates: times the scale, the physical pixel.
                assert (int(click["x"] * scale), int(click["y"] * scale)) == (x, y)
    finally:
        sway.set_scale(1.0, "HEADLESS-1")


def test_headless_sway_draws_its_cursor_into_every_frame(sway: SwaySession, env: dict[str, str]) -> None:
    """With no hardware cursor plane (headless, and any software-cursor output) the cursor is
    part of the output's pixels: ``overlay_cursor`` cannot leave it out, so frames show the
    real cursor whether ``cursor`` is on or off, and nothing is composited on top."""
    with GtkApp(sway, "pattern"), InputController("wlroots") as hands:
        hands.move(600, 400)
        hands.sync()
        expected = expected_pattern(1920, 1080)
        for cursor in (True, False):
            with Capturer("wlroots", cursor=cursor) as cap:
                differ = np.argwhere((cap.grab().rgb != expected).any(axis=2))
                assert cap._backend.cursor() is None  # nothing left to composite
            assert differ.size, "no cursor drawn"
            (top, left), (bottom, right) = differ.min(axis=0), differ.max(axis=0)
            # Only the cursor image, at the pointer (its hotspot is near its top-left).
            assert 390 <= top <= 400 and 590 <= left <= 600 and bottom < 440 and right < 640


_HOLDER = """
import sys, time
from deskpilot.input import InputController
hands = InputController("wlroots")
hands.click(500, 500)
if sys.argv[1] == "key":
    from deskpilot.input._keys import resolve_key
    hands.backend.key(resolve_key("shift"), True)
    hands.backend.key(resolve_key("k"), True)
else:
    hands.move(300, 300)
    hands.mouse_down("left")
hands.sync()
print("held", flush=True)
time.sleep(60)
"""


def _kill_holding(what: str) -> float:
    """Start a process holding ``what``, SIGKILL it; when it was killed (monotonic)."""
    child = subprocess.Popen([sys.executable, "-c", _HOLDER, what], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "held"
        time.sleep(0.2)
    finally:
        killed = time.monotonic()
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=10)
    return killed


def test_what_a_sigkilled_agent_leaves_pressed(sway: SwaySession, env: dict[str, str]) -> None:
    # Keys: the compositor releases a dead virtual keyboard's keys (no key repeat after the
    # kill, shift not stuck for the next client), but the focus may need a click.
    with GtkApp(sway, "text") as app:
        _kill_holding("key")
        assert app.text("K") == "K"
        time.sleep(1.0)  # past sway's 600 ms repeat delay: a key still down would repeat
        assert app.text("K", timeout=0.2) == "K"
        with InputController("wlroots") as hands:
            # After the kill the window may have lost the keyboard focus (measured: 2 of 4
            # times the next client's keys went nowhere): a click gives it back.
            hands.click(600, 600)
            hands.type_text("ab")
            assert app.text("Kab") == "Kab"
    # Buttons: sway 1.7 does not release a dead virtual pointer's button; the holder's
    # watchdog (deskpilot._wayland._watchdog) does, through its own virtual pointer, and
    # sends nothing else.
    with GtkApp(sway, "pattern") as app:
        killed = _kill_holding("button")
        # The watchdog is a process of its own that wakes on the holder's death: on a loaded
        # machine that takes seconds (2 s was exceeded once in 12 loaded module runs); the
        # latency is printed, not asserted (the tests assert no timings).
        app.wait_for(lambda r: r["type"] == "release" and int(r["x"]) == 300, timeout=10.0)
        released = time.monotonic() - killed
        print(f"\n[watchdog] the app saw the release {released * 1000:.0f} ms after SIGKILL")
        time.sleep(0.5)  # anything else the watchdog sent would be here by now
        # The holder's first click (500, 500) went down and up; its press at (300, 300) is
        # released by the watchdog where the pointer is, and that is all.
        assert [(r["type"], int(r["x"])) for r in app.since(0) if r["type"] not in ("ready", "enter")] == [
            ("click", 500), ("release", 500), ("click", 300), ("release", 300)]
        mark = app.mark()
        with InputController("wlroots") as hands:
            hands.click(400, 400)
            hands.sync()
            app.wait_for(lambda r: r["type"] == "release", since=mark)
        assert [(r["type"], int(r["x"]), int(r["y"])) for r in app.since(mark) if r["type"] in ("click", "release")] \
            == [("click", 400, 400), ("release", 400, 400)]


def test_sigint_stops_a_run_on_sway_and_releases_what_it_held(sway: SwaySession, env: dict[str, str],
                                                              tmp_path: Path) -> None:
    """On wlroots the fail-safe corner and the global hotkey cannot be watched (they are X11
    and Win32 sources); SIGINT, the budgets and the programmatic stop work."""
    with GtkApp(sway, "text") as app:
        script = [Reply(tool_calls=[("click_element", {"label": "text", "box": [500, 500]})]),
                  Reply(tool_calls=[("hold_key", {"key": "shift", "seconds": 5})]), "Done."]
        with ModelServer(ScriptedPolicy(script)) as server:
            cmd = [sys.executable, "-m", "deskpilot", "run", "--endpoint", server.endpoint, "--toolset", "extended",
                   "--capture", "wlroots", "--input", "wlroots", "--runs-dir", str(tmp_path / "runs"),
                   "--image-size", "960x540", "--quiet", "--json", "hold shift"]
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
            deadline = time.monotonic() + 60
            while len(server.requests) < 2 and time.monotonic() < deadline and proc.poll() is None:
                time.sleep(0.05)
            time.sleep(0.5)  # into the hold
            try:
                proc.send_signal(signal.SIGINT)
                # A SIGINT that did not stop the hold would end the run "answered", exit 0.
                out, err = proc.communicate(timeout=30)
            finally:
                if proc.poll() is None:
                    proc.kill()
        assert proc.returncode == 130, out + err
        summary = json.loads(out)
        assert summary["outcome"] == "interrupted"
        with InputController("wlroots") as hands:
            hands.type_text("a")  # shift was released: lower case
            assert app.text("a") == "a"


def test_an_output_that_comes_is_followed(sway: SwaySession, env: dict[str, str]) -> None:
    """Last in the module: it leaves a third output behind. (An output disabled with swaymsg
    keeps its wl_output global on sway 1.7, so it stays listed: not tested here.)"""
    with Capturer("wlroots", cursor=False) as cap, InputController("wlroots") as hands:
        assert len(cap._backend.monitors()) == 2 and hands.desktop == Rect(0, 0, 3840, 1080)
        sway.swaymsg("create_output")
        sway.swaymsg("output", "HEADLESS-3", "resolution", "1280x720", "position", "3840", "0")
        deadline = time.monotonic() + 10
        while cap._backend.monitors()[-1].rect.width != 1280 and time.monotonic() < deadline:
            time.sleep(0.05)
        third = cap._backend.monitors()[2]
        assert (third.name, third.rect) == ("HEADLESS-3", Rect(3840, 0, 1280, 720))
        with Capturer("wlroots", monitor=3, cursor=False) as on_third:
            assert on_third.grab().size == (1280, 720)
        hands.move(4000, 100)  # the input backend binds the new output on its next call
        assert hands.desktop == Rect(0, 0, 5120, 1080)


def test_doctor_says_what_stops_a_run_on_wlroots(sway: SwaySession, env: dict[str, str]) -> None:
    """Without an X display, with the wlroots backends: the lines pass, and the kill switch
    line warns that neither the corner nor the hotkey is watched (and says what stops a run)."""
    run_env = {k: v for k, v in os.environ.items() if k != "DISPLAY"}
    run_env.update(env)
    proc = subprocess.run([sys.executable, "-m", "deskpilot", "doctor", "--no-model",
                           "--set", "screen.capture_backend=wlroots", "--set", "screen.input_backend=wlroots"],
                          env=run_env, capture_output=True, text=True, timeout=120, check=False)
    out = " ".join(proc.stdout.split())  # rich wraps long lines
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for name in ("display", "screen", "capture", "input"):
        assert f"PASS {name}" in out, out
    assert "WARN kill switch wlroots: the fail-safe corner and the stop hotkey are not watched" in out, out
    assert "Ctrl+C or SIGTERM" in out and "watchdog" in out, out


def test_entry_points_use_wlroots_with_auto_and_refuse_x11_capture(sway: SwaySession, env: dict[str, str],
                                                                    tmp_path: Path) -> None:
    """``doctor`` with ``auto`` names the wlroots backends; ``mcp`` and ``panel`` asked to
    capture through X11 (mss) on this Wayland-only session refuse before they start, saying
    why, instead of dying later in mss (they used to check ``auto`` whatever was chosen)."""
    run_env = {k: v for k, v in os.environ.items() if k != "DISPLAY"}
    run_env.update(env)
    proc = subprocess.run([sys.executable, "-m", "deskpilot", "doctor", "--no-model"], env=run_env,
                          capture_output=True, text=True, timeout=120, check=False)
    out = " ".join(proc.stdout.split())  # rich wraps long lines
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "through the wlroots backend (wlr-screencopy)" in out, out
    assert "PASS capture wlroots backend" in out and "PASS input wlroots backend" in out, out
    for command in (["mcp"], ["panel", "--endpoint", "http://127.0.0.1:9/v1", "--no-linger", "a task"]):
        proc = subprocess.run([sys.executable, "-m", "deskpilot", *command, "--runs-dir", str(tmp_path / "runs"),
                               "--set", "screen.capture_backend=mss"], env=run_env, stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=120, check=False, cwd=tmp_path)
        said = " ".join((proc.stdout + proc.stderr).split())
        assert proc.returncode != 0, said
        assert "Wayland session" in said and "Traceback" not in said, said
    assert not (tmp_path / "runs").exists()  # refused before a run directory
