"""The wlroots backends on a real headless sway (run as nobody, pixman renderer): the wire
client against the compositor's registry, capture exactness on a native GTK window,
clicks on the documented pixel, scrolling, keys, modifiers, exact Unicode text (with
characters outside the layout and more than one keymap's worth of them), a Tk app through
Xwayland, and the agent end to end with ``--capture wlroots --input wlroots``."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from _sway import GtkApp, expected_pattern, session_env, start_sway
from apps.harness import TargetApp

from deskpilot._errors import CaptureError, InputError
from deskpilot._wayland._wire import WL_SHM, WL_SHM_POOL, Connection
from deskpilot._wayland._wlr import REQUIRED_GLOBALS, wlroots_available
from deskpilot.capture import Capturer
from deskpilot.input import InputController
from deskpilot.testing._sway import SwaySession

pytestmark = [pytest.mark.sway, pytest.mark.wayland]


@pytest.fixture(scope="module")
def sway() -> Iterator[SwaySession]:
    """One headless sway (1920x1080, Xwayland on) for the module."""
    with start_sway(size=(1920, 1080), timeout=60.0) as session:
        yield session


@pytest.fixture
def env(sway: SwaySession, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    with session_env(monkeypatch, sway) as found:
        yield found


@pytest.fixture
def hands(env: dict[str, str]) -> Iterator[InputController]:
    with InputController("wlroots") as controller:
        yield controller


def test_the_registry_offers_the_wlroots_globals(env: dict[str, str], tmp_path: Path) -> None:
    conn = Connection.connect(CaptureError, env)
    try:
        offered = {g.interface for g in conn.globals.values()}
        assert set(REQUIRED_GLOBALS) <= offered
        assert {"wl_output", "wl_shm", "wl_seat", "zxdg_output_manager_v1"} <= offered
        # A request the compositor rejects comes back as a deskpilot error naming the object.
        shm = conn.bind(conn.find_global("wl_shm")[0], WL_SHM)
        fd = os.memfd_create("empty")
        try:
            shm.request("create_pool", WL_SHM_POOL, fd, -1)
            with pytest.raises(CaptureError, match=r"wl_shm@\d+ \(code \d+\)"):
                conn.roundtrip()
        finally:
            os.close(fd)
    finally:
        conn.close()
    assert wlroots_available(env)
    assert not wlroots_available({"WAYLAND_DISPLAY": "no-such-socket", "XDG_RUNTIME_DIR": str(tmp_path)})
    assert not wlroots_available({})


def test_capture_is_exact_on_a_native_gtk_window(sway: SwaySession, hands: InputController) -> None:
    with GtkApp(sway, "pattern") as app:
        assert (app.ready["width"], app.ready["height"], app.ready["scale"]) == (1920, 1080, 1)
        app.pointer_in(hands, 1000, 700)  # sway shows the window (its placement applied)
        # Headless sway draws a software cursor into the output's pixels (see
        # test_sway_outputs.py): the pointer goes to the last pixel, its image off the output
        # but for a few pixels of the corner.
        hands.move(1919, 1079)
        hands.sync()
        with Capturer("wlroots", cursor=False) as cap:
            assert [m.name for m in cap._backend.monitors()] == ["HEADLESS-1"]
            frame = cap.grab()
            assert frame.size == (1920, 1080)
            error = np.abs(frame.rgb.astype(np.int16) - expected_pattern(1920, 1080))
            assert error[:-8].max() == 0 and error[:, :-8].max() == 0
            assert error.max() > 0  # the cursor is there, in the corner
            # A region: the backend hands a view of the output's buffer, cropped.
            raw = cap._backend.grab_bgra(cap.area)
            assert raw.base is not None and raw.shape == (1080, 1920, 4)


def test_clicks_land_on_the_documented_pixel(sway: SwaySession, hands: InputController) -> None:
    with GtkApp(sway, "pattern") as app:
        app.pointer_in(hands, 1000, 700)
        for point in [(100, 200), (0, 0), (1919, 1079), (777, 333), (1500, 20)]:
            mark = app.mark()
            hands.click(*point)
            hands.sync()
            click = app.wait_for(lambda r: r["type"] == "click", since=mark)
            assert (int(click["x"]), int(click["y"]), click["button"]) == (*point, 1)
        mark = app.mark()
        hands.click(640, 480, button="right")
        click = app.wait_for(lambda r: r["type"] == "click", since=mark)
        assert (int(click["x"]), int(click["y"]), click["button"]) == (640, 480, 3)
        assert hands.position() == (640, 480)


def test_scroll_sends_one_step_per_notch(sway: SwaySession, hands: InputController) -> None:
    with GtkApp(sway, "pattern") as app:
        for dy, dx in ((2, 0), (-1, 0), (0, 1)):
            mark = app.mark()
            hands.scroll(900, 500, dy=dy, dx=dx)
            hands.sync()
            # Every step the compositor got: a sync reaches sway, not the app, which may
            # report the last ones later on a loaded machine; then none more may follow.
            want = abs(dy) + abs(dx)
            app.wait_for(lambda r, m=mark, n=want: len([s for s in app.since(m) if s["type"] == "scroll"]) >= n,
                         since=mark)
            time.sleep(0.2)
            steps = [r for r in app.since(mark) if r["type"] == "scroll"]
            assert len(steps) == abs(dy) + abs(dx), steps
            for step in steps:
                assert np.sign(step["dy"]) == np.sign(dy) and np.sign(step["dx"]) == np.sign(dx)


def test_ascii_text_and_keys_are_exact(sway: SwaySession, hands: InputController) -> None:
    with GtkApp(sway, "text") as app:
        printable = "".join(chr(c) for c in range(0x20, 0x7F))
        hands.type_text(printable)
        assert app.text(printable) == printable
        hands.key("enter")
        hands.type_text("second line")
        assert app.text(printable + "\nsecond line") == printable + "\nsecond line"


def test_modifiers_are_sent(sway: SwaySession, hands: InputController) -> None:
    with GtkApp(sway, "text") as app:
        hands.type_text("replace me")
        assert app.text("replace me") == "replace me"
        hands.key("ctrl+a")  # select all: the text typed next replaces it
        hands.type_text("x")
        assert app.text("x") == "x"
        hands.key("shift+b")
        with hands.hold("shift"):
            hands.key("c")
        hands.key("d")
        assert app.text("xBCd") == "xBCd"


def test_unicode_text_is_exact_across_keymap_changes(sway: SwaySession, hands: InputController) -> None:
    with GtkApp(sway, "text") as app:
        text = "😀 日本語 𝄞 € ü"
        hands.type_text(text)
        assert app.text(text) == text
        # More characters outside the layout than spare keycodes: the keymap changes mid-text.
        greek = "αβγδεζηθικλμνξοπρστυφχψω ΑΒΓΔΕΖΗΘ"
        backend = hands.backend
        assert len(set(greek) - {" "}) > len(backend._keymap.spare)  # type: ignore[attr-defined]
        hands.type_text(greek)
        assert app.text(text + greek) == text + greek


def test_tk_apps_through_xwayland_get_every_click_and_text(sway: SwaySession, env: dict[str, str],
                                                         monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                         hands: InputController) -> None:
    """Two Tk windows side by side: every click moves into the other X11 window with one
    motion, the case where Xwayland loses the press unless the pointer moves aside and back
    first (measured: 3 of 6 presses arrive without it)."""
    monkeypatch.setenv("DISPLAY", sway.xwayland())
    left = TargetApp(tmp_path / "left.jsonl", geometry="900x1000+0+0", timeout=30.0)
    try:
        right = TargetApp(tmp_path / "right.jsonl", geometry="900x1000+1000+0", timeout=30.0)
        try:
            for app, name in [(left, "red"), (right, "green"), (left, "blue"), (right, "yellow"), (left, "green"),
                              (right, "red")]:
                mark = app.mark()
                x, y = app.center(name)
                hands.click(x, y)
                hands.sync()
                press = app.wait_for(lambda r: r["type"] == "press", timeout=5, since=mark)
                assert (press["x"], press["y"], press["widget"]) == (x, y, name)
            right.focus("entry")
            hands.click(*right.center("entry"))
            hands.type_text("Tk ü € 日本 😀")
            right.wait_for(lambda r: r["type"] == "entry" and r["text"] == "Tk ü € 日本 😀", timeout=5)
        finally:
            right.close()
    finally:
        left.close()


def test_the_agent_runs_on_sway(sway: SwaySession, env: dict[str, str], tmp_path: Path) -> None:
    from deskpilot.agent import iter_turns, load_config, load_summary, run_agent
    from deskpilot.testing import ModelServer, Reply, ScriptedPolicy

    with GtkApp(sway, "text") as app:
        script = [
            Reply(tool_calls=[("click_element", {"label": "text", "box": [500, 500]})]),
            Reply(tool_calls=[("type_text", {"text": "agent 😀 日本"})]),
            Reply(tool_calls=[("press_key", {"key": "enter"})]),
            "Done.",
        ]
        with ModelServer(ScriptedPolicy(script)) as server:
            cfg = load_config(flags={"model.endpoint": server.endpoint, "run.runs_dir": str(tmp_path / "runs"),
                                     "screen.image_width": 960, "screen.image_height": 540,
                                     "screen.capture_backend": "wlroots", "screen.input_backend": "wlroots",
                                     "agent.toolset": "extended"},
                              env={}, search_default=False)
            result = run_agent(cfg, "type into the text view")
            assert server.problems == []
        assert result.outcome == "answered", result.error
        assert app.text("agent 😀 日本\n") == "agent 😀 日本\n"
        turns = list(iter_turns(result.run_dir))
        assert [t.get("tool_call", {}).get("name") for t in turns[1:4]] == ["click_element", "type_text", "press_key"]
        from PIL import Image

        shots = load_summary(result.run_dir)["screenshots"]
        with Image.open(result.run_dir / shots[-1]) as last:
            pixels = np.asarray(last.convert("RGB"))
            assert last.size == (960, 540) and pixels.mean() > 100  # the white text view, not black


def test_the_mcp_server_over_stdio_on_sway(sway: SwaySession, env: dict[str, str], tmp_path: Path) -> None:
    """``deskpilot mcp`` with ``auto`` backends on sway (its DISPLAY unset: Wayland only),
    driven by the official SDK client: it starts, its screenshot is the app's picture, and a
    click on image pixel (ix, iy) lands on the documented physical pixel."""
    import io
    import math

    from _mcp import error_text, meta, png_of, server_command, stdio
    from PIL import Image

    runs = tmp_path / "runs"
    runs.mkdir()
    with GtkApp(sway, "pattern") as app:
        with InputController("wlroots") as hands:
            app.pointer_in(hands, 1000, 700)  # sway shows the window (its placement applied)
        client = stdio(server_command(runs))
        try:
            shot = client.call("screenshot", {"max_width": 960, "max_height": 540})
            assert not shot.is_error, shot
            info = meta(shot)
            assert info["screen_rect"] == [0, 0, 1920, 1080] and info["image_size"] == [960, 540]
            seen = np.asarray(Image.open(io.BytesIO(png_of(shot))).convert("RGB")).astype(float)
            expected = expected_pattern(1920, 1080).reshape(540, 2, 960, 2, 3).mean(axis=(1, 3))
            # The picture, not a black frame (but for where sway draws its cursor).
            assert (np.abs(seen - expected).max(axis=2) > 1).sum() < 400
            ix, iy = 611, 377
            mark = app.mark()
            result = client.call("click", {"x": ix, "y": iy, "frame": info["frame"], "screenshot_after": False})
            assert not result.is_error, error_text(result)
            click = app.wait_for(lambda r: r["type"] == "click", since=mark)
            # Image pixel (ix, iy) of a 960-wide image over 1920 pixels: physical floor((ix + 0.5) * 2).
            assert (click["button"], int(click["x"]), int(click["y"])) == (
                1, math.floor((ix + 0.5) * 2), math.floor((iy + 0.5) * 2))
        finally:
            client.close()
    assert len(list(runs.iterdir())) == 1


@pytest.mark.parametrize("choice", [[], ["--capture", "wlroots"]], ids=["auto", "wlroots"])
def test_shot_captures_the_wayland_desktop(sway: SwaySession, env: dict[str, str], tmp_path: Path,
                                          choice: list[str]) -> None:
    """`auto` picks wlroots on this session (its DISPLAY is Xwayland, blind), like naming it."""
    import subprocess

    from PIL import Image

    with GtkApp(sway, "pattern"):
        out = tmp_path / "shot.png"
        proc = subprocess.run([sys.executable, "-m", "deskpilot", "shot", *choice, "--no-cursor",
                               "--out", str(out), "--json"], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout)["backend"] == "wlroots"
        with Image.open(out) as shot:
            pixels = np.asarray(shot.convert("RGB")).astype(np.int16)
        # The pattern, but for the few corner pixels where a pointer of an earlier test may be.
        assert shot.size == (1920, 1080)
        assert (np.abs(pixels - expected_pattern(1920, 1080)).max(axis=2) > 0).sum() < 1000


def test_wlroots_backends_refuse_where_there_is_no_wlroots(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    monkeypatch.setenv("WAYLAND_DISPLAY", "absent")
    with pytest.raises(CaptureError, match="cannot connect to the Wayland compositor"):
        Capturer("wlroots")
    with pytest.raises(InputError, match="cannot connect to the Wayland compositor"):
        InputController("wlroots")


if sys.platform != "linux":  # pragma: no cover
    pytestmark.append(pytest.mark.skip(reason="sway is Linux only"))
