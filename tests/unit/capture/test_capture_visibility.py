"""Which X server this is, from its RandR output names, and the refusal's wording; no
display needed (tests/integration/test_xwayland.py runs the check on weston's Xwayland
and on Xvfb)."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from deskpilot._errors import CaptureError, ScreenNotVisibleError
from deskpilot.capture import ScreenVisibility, check_screen_visible
from deskpilot.capture._visibility import ALLOW_XWAYLAND_ENV, classify_x_outputs, wayland_hints


@pytest.mark.parametrize(
    ("outputs", "server"),
    [
        (["XWAYLAND0"], "xwayland"),
        (["XWAYLAND0", "XWAYLAND1"], "xwayland"),  # two monitors on GNOME or sway
        (["XWAYLAND12"], "xwayland"),
        (["screen"], "xvfb"),
        (["HDMI-1", "eDP-1"], "xorg"),
        (["DUMMY0"], "xorg"),  # Xorg's dummy driver
        (["DP-1-1", "HDMI-A-0"], "xorg"),
        (["screen", "HDMI-1"], "xorg"),  # only a lone "screen" is Xvfb's
        (["xwayland0"], "xorg"),  # Xwayland spells it in capitals, nothing else matches
        (["XWAYLAND"], "xorg"),
        (["MY-XWAYLAND0"], "xorg"),
        ([], "x11"),  # RandR without outputs: cannot tell
        (None, "x11"),  # no RandR at all
    ],
)
def test_output_names_tell_the_server(outputs: list[str] | None, server: str) -> None:
    assert classify_x_outputs(outputs) == server


def test_wayland_hints_are_read_but_only_shown() -> None:
    assert wayland_hints({}) == ()
    assert wayland_hints({"WAYLAND_DISPLAY": "wayland-0", "XDG_SESSION_TYPE": "wayland"}) == (
        "WAYLAND_DISPLAY=wayland-0", "XDG_SESSION_TYPE=wayland")
    assert wayland_hints({"WAYLAND_DISPLAY": "", "XDG_SESSION_TYPE": "x11"}) == ()


def test_describe_says_what_capture_sees() -> None:
    fine = ScreenVisibility(":5", "xvfb", ("screen",), True, False, ("WAYLAND_DISPLAY=wayland-0",))
    text = fine.describe()
    assert text.startswith("DISPLAY=:5 is a virtual X server (Xvfb); RandR outputs: screen; capture sees the whole screen")
    assert "WAYLAND_DISPLAY=wayland-0 set, but the X display is not Xwayland: they are only hints" in text
    allowed = ScreenVisibility(":1", "xwayland", ("XWAYLAND0",), False, True, ())
    assert "X11 windows only, black elsewhere (allowed by --allow-xwayland" in allowed.describe()
    assert ScreenVisibility("Windows desktop", "windows", (), True, False, ()).describe() == (
        "Windows desktop: captured directly")


def test_the_error_is_a_capture_error() -> None:
    assert issubclass(ScreenNotVisibleError, CaptureError)


@pytest.mark.skipif(sys.platform == "win32", reason="X11 display check")
def test_a_wayland_session_without_an_x_display_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv(ALLOW_XWAYLAND_ENV, raising=False)
    monkeypatch.setenv("WAYLAND_DISPLAY", "wayland-0")
    with pytest.raises(ScreenNotVisibleError) as caught:
        check_screen_visible()
    text = str(caught.value)
    assert "Wayland session (WAYLAND_DISPLAY=wayland-0) without an X display" in text
    assert "log into an X11 session" in text and "GNOME/Mutter, picked by auto" in text and "none answered here" in text
    assert caught.value.details["server"] == "wayland"


@pytest.mark.skipif(sys.platform == "win32", reason="X11 display check")
def test_no_display_at_all_is_the_capture_error_it_always_was(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("DISPLAY", "WAYLAND_DISPLAY", ALLOW_XWAYLAND_ENV):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(CaptureError, match="no X display: is DISPLAY set") as caught:
        check_screen_visible()
    assert not isinstance(caught.value, ScreenNotVisibleError)


@pytest.mark.skipif(sys.platform == "win32", reason="X11 display check")
@pytest.mark.parametrize("how", ["argument", "environment"])
def test_allowing_xwayland_lets_a_display_less_wayland_session_through_to_capture(
    monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """Allowed, the check stands aside; capture then fails on its own (there is no X display)."""
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.setenv("WAYLAND_DISPLAY", "wayland-0")
    monkeypatch.delenv(ALLOW_XWAYLAND_ENV, raising=False)
    if how == "environment":
        monkeypatch.setenv(ALLOW_XWAYLAND_ENV, "1")
    with pytest.raises(CaptureError, match="no X display") as caught:
        check_screen_visible(allow_xwayland=how == "argument")
    assert not isinstance(caught.value, ScreenNotVisibleError)


@pytest.mark.skipif(sys.platform == "win32", reason="X11 display check")
def test_the_environment_switch_is_off_at_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.setenv("WAYLAND_DISPLAY", "wayland-0")
    monkeypatch.setenv(ALLOW_XWAYLAND_ENV, "0")
    with pytest.raises(ScreenNotVisibleError):
        check_screen_visible()


@pytest.mark.skipif(sys.platform != "win32", reason="Windows")
def test_windows_is_always_visible() -> None:
    assert check_screen_visible().visible


@pytest.mark.skipif(sys.platform == "win32", reason="no Wayland on Windows")
def test_an_explicit_wlroots_capture_is_not_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """``--capture wlroots`` captures the Wayland outputs, not Xwayland: nothing to refuse
    (whether the compositor offers screencopy is the backend's own error)."""
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv(ALLOW_XWAYLAND_ENV, raising=False)
    monkeypatch.setenv("WAYLAND_DISPLAY", "wayland-1")
    with pytest.raises(ScreenNotVisibleError):
        check_screen_visible()
    found = check_screen_visible(capture="wlroots")
    assert (found.server, found.visible, found.allowed) == ("wlroots", True, False)
    assert found.describe() == "WAYLAND_DISPLAY=wayland-1 (wlroots screencopy): captured directly"


@pytest.mark.skipif(sys.platform == "win32", reason="Linux session bus")
def test_the_mutter_backend_by_name_needs_mutter_on_the_bus(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    # No session bus at all: nothing answers, so the chosen Wayland backend cannot see.
    monkeypatch.delenv("DBUS_SESSION_BUS_ADDRESS", raising=False)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    with pytest.raises(ScreenNotVisibleError, match="mutter capture backend was chosen"):
        check_screen_visible(capture="mutter")


@pytest.mark.skipif(sys.platform == "win32", reason="Linux session bus")
def test_auto_is_the_x11_backend_without_a_wayland_one(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    from deskpilot.capture._visibility import auto_backend

    for name in ("DISPLAY", "DBUS_SESSION_BUS_ADDRESS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    assert auto_backend("capture") == "mss" and auto_backend("input") == "xtest"
