"""The GNOME (Mutter) backends on a real headless mutter with PipeWire: the capture is the
picture a native GTK window shows (max error 0), clicks land on the pixel sent, keys and
text (ASCII as keys, the rest through Mutter's clipboard, the user's clipboard kept) reach
the window exactly, ``auto`` picks mutter, ``shot`` and ``doctor`` work and say so.

One compositor and one app for the module (tests/integration/_mutter_tier.py)."""

from __future__ import annotations

import io
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from _mutter_tier import GtkApp, block_colors, started_desktop
from PIL import Image

from deskpilot.capture import Capturer, check_screen_visible
from deskpilot.capture._capturer import make_backend as make_capture_backend
from deskpilot.capture._mutter import MutterBackend
from deskpilot.input import InputController
from deskpilot.input._mutter import MutterInput
from deskpilot.testing._mutter import MutterDesktop

pytestmark = [pytest.mark.mutter]

WIDTH, HEIGHT = 1920, 1080


@pytest.fixture(scope="module")
def desktop() -> Iterator[MutterDesktop]:
    with started_desktop() as session:
        yield session


@pytest.fixture(scope="module")
def app(desktop: MutterDesktop) -> Iterator[GtkApp]:
    gtk = GtkApp(desktop)
    yield gtk
    gtk.close()


@pytest.fixture(scope="module")
def hands(app: GtkApp) -> Iterator[InputController]:
    with InputController("mutter") as controller:
        app.wait_in_place(controller)
        yield controller


@pytest.fixture(scope="module")
def capture(app: GtkApp) -> Iterator[MutterBackend]:
    backend = MutterBackend(cursor=False)
    yield backend
    backend.close()


def _entry_mask(scale: int = 1) -> np.ndarray:
    """True outside the text entry (it covers the blocks at logical (40, 40), 600x40; its
    frame and shadow reach a little further)."""
    mask = np.ones((HEIGHT, WIDTH), bool)
    mask[: 120 * scale, : 700 * scale] = False
    return mask


# --- choice --------------------------------------------------------------------------------


def test_auto_picks_mutter_and_the_screen_is_visible(desktop: MutterDesktop) -> None:
    visible = check_screen_visible()
    assert (visible.server, visible.visible, visible.backend) == ("wayland", True, "mutter")
    assert "mutter backend" in visible.describe()
    backend = make_capture_backend("auto")
    try:
        assert backend.name == "mutter"
        assert [(m.rect.as_tuple(), m.primary, m.name) for m in backend.monitors()] == [
            ((0, 0, WIDTH, HEIGHT), True, "Meta-0")]
    finally:
        backend.close()
    # The X11 path on the same session is refused by name, not shown black frames.
    with pytest.raises(Exception, match="Xwayland"):
        check_screen_visible(capture="mss")


# --- capture -------------------------------------------------------------------------------


def test_capture_is_the_window_pixel_for_pixel(app: GtkApp, capture: MutterBackend) -> None:
    assert (app.ready["width"], app.ready["height"], app.ready["scale"]) == (WIDTH, HEIGHT, 1)
    expected = block_colors(WIDTH, HEIGHT)
    mask = _entry_mask()
    # The app's first paint may still be on its way to the stream: the newest frame within 5 s.
    deadline = time.monotonic() + 5
    while True:
        bgra = capture.grab_bgra(capture.monitors()[0].rect)
        assert bgra.shape == (HEIGHT, WIDTH, 4)
        error = np.abs(bgra[..., 2::-1].astype(np.int16) - expected).max(axis=2)
        if int(error[mask].max()) == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert int(error[mask].max()) == 0, np.argwhere((error > 0) & mask)[:5]
    # A region is a view of the same frame (no copy).
    from deskpilot.geometry import Rect

    part = capture.grab_bgra(Rect(1000, 500, 64, 32))
    assert np.array_equal(part[..., 2::-1], expected[500:532, 1000:1064])


def test_capturer_frames_through_auto(app: GtkApp) -> None:
    with Capturer("auto", cursor=False) as cap:
        assert cap.backend.name == "mutter"
        frame = cap.grab(size=(960, 540))
    assert frame.rgb.shape == (540, 960, 3)
    assert frame.rgb.mean() > 20  # not the black frame Xwayland gives


# --- input ---------------------------------------------------------------------------------


@pytest.mark.parametrize("point", [(700, 500), (0, 0), (WIDTH - 1, HEIGHT - 1), (1234, 777), (5, 1000)])
def test_a_click_lands_on_the_pixel_sent(app: GtkApp, hands: InputController, point: tuple[int, int]) -> None:
    app.drain()
    hands.click(*point)
    event = app.wait("click")
    assert (event["button"], event["x"], event["y"]) == (1, point[0], point[1])
    assert hands.position() == point


def test_right_and_middle_buttons_and_the_wheel(app: GtkApp, hands: InputController) -> None:
    app.drain()
    hands.click(900, 700, button="right")
    assert app.wait("click")["button"] == 3
    hands.click(901, 701, button="middle")
    assert app.wait("click")["button"] == 2
    # GTK reports a wheel step as a smooth and a discrete event: compare directions only.
    hands.scroll(900, 700, dy=2)
    time.sleep(0.3)
    assert {e["direction"] for e in app.drain() if e["type"] == "scroll"} == {"down"}
    hands.scroll(900, 700, dy=-1)
    time.sleep(0.3)
    assert {e["direction"] for e in app.drain() if e["type"] == "scroll"} == {"up"}


def test_keys_reach_the_window(app: GtkApp, hands: InputController) -> None:
    app.focus_entry()
    for combo, name in (("f5", "F5"), ("escape", "Escape"), ("pagedown", "Page_Down"), ("a", "a")):
        hands.key(combo)
        assert app.wait("key", name=name)
    app.focus_entry()
    hands.type_text("abc")
    assert app.typed("abc") == "abc"
    hands.key("ctrl+a")
    hands.key("backspace")
    assert app.typed("") == ""


def test_ascii_text_is_typed_exactly(app: GtkApp, hands: InputController) -> None:
    text = "Hello, World! ~`|\\{}[]<>?/@#$%^&*()_+-=\"' 0123456789 The quick brown fox"
    app.focus_entry()
    hands.type_text(text)
    assert app.typed(text) == text


def test_text_outside_the_layout_is_exact_and_the_clipboard_is_kept(
    app: GtkApp, hands: InputController
) -> None:
    # The user copies something first (in a key handler: Wayland wants an input serial).
    app.focus_entry()
    app.command('copy "the user\'s clipboard \\u00fc"')
    time.sleep(0.1)
    hands.key("f5")
    app.wait("copied")
    for text in ("😀 日本語 𝄞 €", "mixed: x€y😀z 日本語 w𝄞 end", "ü"):
        app.focus_entry()
        hands.type_text(text)
        assert app.typed(text) == text
    # A long paste (60 KB of UTF-8; a GTK entry holds at most 64 KiB).
    long_text = "日本語€" * 5000
    app.focus_entry()
    hands.type_text(long_text)
    assert app.typed(long_text, timeout=20) == long_text
    app.drain()
    app.command("clipboard")
    assert app.wait("clipboard")["text"] == "the user's clipboard ü"


def test_input_backend_name_and_desktop(hands: InputController) -> None:
    backend = hands.backend
    assert isinstance(backend, MutterInput)
    assert hands.desktop.as_tuple() == (0, 0, WIDTH, HEIGHT)
    hands.sync()


# --- the change signal ---------------------------------------------------------------------


def test_frames_come_on_damage_and_not_on_pointer_moves(
    app: GtkApp, hands: InputController, capture: MutterBackend
) -> None:
    damage = capture.damage_source(1)
    time.sleep(0.3)
    damage.drain()
    # The cursor is not in the frames: moving it draws nothing.
    for x in range(800, 1200, 40):
        hands.move(x, 600)
    time.sleep(0.3)
    assert damage.drain() == 0
    # Typing draws: frames arrive and the pipe says so.
    app.focus_entry()
    time.sleep(0.3)
    damage.drain()
    hands.type_text("x")
    readable, _, _ = select.select([damage], [], [], 2.0)
    assert readable and damage.drain() >= 1


# --- the commands --------------------------------------------------------------------------


def _deskpilot(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "deskpilot", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=timeout)


def test_shot_captures_the_gnome_screen(app: GtkApp, tmp_path: Path) -> None:
    out = tmp_path / "shot.png"
    proc = _deskpilot("shot", "--out", str(out), "--no-cursor", "--size", "1920x1080", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "mutter" in proc.stdout
    got = np.asarray(Image.open(io.BytesIO(out.read_bytes())).convert("RGB"))
    mask = _entry_mask()
    assert np.array_equal(got[mask], block_colors(WIDTH, HEIGHT)[mask])


def test_doctor_names_the_mutter_backends(app: GtkApp, tmp_path: Path) -> None:
    proc = _deskpilot("doctor", "--no-model", cwd=tmp_path)
    text = " ".join(proc.stdout.split())
    assert "capture sees the whole screen through the mutter backend" in text, text
    assert "mutter backend; monitor 1 1920x1080" in text, text
    assert "mutter backend; desktop 1920x1080" in text, text
    assert "kill switch: the fail-safe corner" in text and "no hotkey" in text, text
    assert proc.returncode == 0, text


# --- a killed agent ------------------------------------------------------------------------

HOLDER = """
import time
from deskpilot.input import InputController
from deskpilot.input._keys import resolve_key
hands = InputController("mutter")
hands.move(600, 600)
hands.mouse_down("left")
hands.backend.key(resolve_key("shift"), True)
hands.sync()
print("held", flush=True)
time.sleep(60)
"""


def test_a_killed_agent_leaves_nothing_pressed(app: GtkApp, hands: InputController) -> None:
    """Measured: Mutter ends a remote-desktop session with its D-Bus connection and releases
    what it held (no watchdog process is needed, unlike XTest's)."""
    app.focus_entry()
    holder = subprocess.Popen([sys.executable, "-c", HOLDER], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        assert app.wait("click")["button"] == 1
        assert app.wait("key", name="Shift_L")
    finally:
        holder.kill()
        holder.wait()
    assert app.wait("release", button=1)
    assert app.wait("key_release", name="Shift_L")
    # And the desktop is usable: a plain click is a plain click.
    app.drain()
    hands.click(800, 600)
    assert app.wait("click")["button"] == 1
    assert app.wait("release")["button"] == 1


# --- the kill switch -----------------------------------------------------------------------

USER_MOVE = """
import sys, time
from deskpilot.input import InputController
with InputController("mutter") as hands:  # the user's pointer: another client moving it
    hands.move(int(sys.argv[1]), int(sys.argv[2]))
    hands.sync()
    time.sleep(0.5)
"""


def _user_moves(x: int, y: int) -> None:
    subprocess.run([sys.executable, "-c", USER_MOVE, str(x), str(y)], check=True, timeout=60)


def test_the_corner_kill_switch_sees_the_pointer_through_the_stream(hands: InputController) -> None:
    from deskpilot.safety import KillSwitch
    from deskpilot.safety._killswitch import MutterWatchBackend

    hands.move(960, 540)
    with KillSwitch(poll_interval=0.02, hotkeys=("ctrl+alt+q",), backend=MutterWatchBackend) as switch:
        assert switch.status["corner"].startswith("armed")
        assert "a Wayland session does not show global keys" in switch.status["hotkey"]
        # The agent's own move into a corner, announced first, does not trip it.
        switch.note_pointer(1919, 0)
        hands.move(1919, 0)
        time.sleep(0.5)
        assert not switch.tripped
        hands.move(960, 540)
        time.sleep(0.3)
        # The user's move into a corner does (the position comes with the stream's metadata).
        _user_moves(0, 1079)
        deadline = time.monotonic() + 5
        while not switch.tripped and time.monotonic() < deadline:
            time.sleep(0.01)
    assert switch.trip_info is not None and switch.trip_info.source == "corner", switch.status
    assert "bottom-left" in switch.trip_info.reason
    hands.move(960, 540)
