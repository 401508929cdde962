"""On a Wayland desktop deskpilot refuses instead of showing a model black screenshots.

A real headless weston with Xwayland (:mod:`deskpilot.testing._weston`) is the Wayland
session: its Xwayland is detected by its RandR output names, and ``shot``, ``doctor``,
``run``, ``panel`` and the library's ``run_agent`` refuse with the message that says what
to do, while ``demo`` moves to a virtual display. On Xvfb nothing refuses, not even with
the Wayland hints (``WAYLAND_DISPLAY``, ``XDG_SESSION_TYPE``) set.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from deskpilot._errors import PlatformError, ScreenNotVisibleError
from deskpilot.capture import check_screen_visible
from deskpilot.testing._weston import WestonSession, weston_xwayland

pytestmark = [pytest.mark.x11, pytest.mark.wayland]

ALLOW = "DESKPILOT_ALLOW_XWAYLAND"


@pytest.fixture(scope="module")
def weston() -> Iterator[WestonSession]:
    """One weston + Xwayland for the module."""
    with contextlib.ExitStack() as stack:
        try:
            session = stack.enter_context(weston_xwayland((1280, 720), timeout=60.0))
        except PlatformError as exc:
            if "not installed" in str(exc):
                pytest.skip(f"{exc} (./dev setup installs weston and xwayland)")
            pytest.fail(str(exc))
        yield session


def session_env(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("WAYLAND_DISPLAY", "XDG_SESSION_TYPE", ALLOW)}
    env.update(extra)
    return env


def deskpilot(*args: str, env: dict[str, str], cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "deskpilot", *args], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=timeout)


def assert_refused(proc: subprocess.CompletedProcess[str], display: str) -> None:
    """Exit 1, the one-line message on stderr, no traceback."""
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    err = " ".join(proc.stderr.split())
    assert err.startswith(f"deskpilot: error: DISPLAY={display} is Xwayland (RandR outputs XWAYLAND0)"), err
    assert "black screenshots" in err and "log into an X11 session" in err and "GNOME on Xorg" in err
    assert "Wayland backends (GNOME/Mutter, picked by auto" in err and "none answered here" in err
    assert 'pip install "deskpilot[wayland]"' in err and "--capture wlroots --input wlroots" in err
    assert "--allow-xwayland" in err


# --- detection ----------------------------------------------------------------------------


def test_xwayland_is_detected_by_its_output_names(weston: WestonSession) -> None:
    with pytest.raises(ScreenNotVisibleError) as caught:
        check_screen_visible(weston.x_display)
    assert caught.value.details["outputs"] == ["XWAYLAND0"]
    assert caught.value.details["server"] == "xwayland"
    allowed = check_screen_visible(weston.x_display, allow_xwayland=True)
    assert (allowed.server, allowed.visible, allowed.allowed, allowed.outputs) == (
        "xwayland", False, True, ("XWAYLAND0",))


def test_xwayland_is_detected_without_any_wayland_hint(weston: WestonSession, monkeypatch: pytest.MonkeyPatch) -> None:
    """ssh, cron or sudo inside a Wayland session lose WAYLAND_DISPLAY: still refused."""
    for name in ("WAYLAND_DISPLAY", "XDG_SESSION_TYPE", ALLOW):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DISPLAY", weston.x_display)
    with pytest.raises(ScreenNotVisibleError) as caught:
        check_screen_visible()
    assert caught.value.details["hints"] == []


def test_xvfb_is_visible_even_with_the_wayland_hints_set(xvfb: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WAYLAND_DISPLAY", "wayland-0")
    monkeypatch.setenv("XDG_SESSION_TYPE", "wayland")
    monkeypatch.delenv(ALLOW, raising=False)
    found = check_screen_visible(xvfb)
    assert (found.server, found.outputs, found.visible, found.allowed) == ("xvfb", ("screen",), True, False)
    assert "they are only hints" in found.describe()


# --- the commands refuse on Xwayland ---------------------------------------------------------


def test_shot_refuses_on_xwayland_and_writes_nothing(weston: WestonSession, tmp_path: Path) -> None:
    out = tmp_path / "shot.png"
    proc = deskpilot("shot", "--out", str(out), env=session_env(weston.env()), cwd=tmp_path)
    assert_refused(proc, weston.x_display)
    assert not out.exists()


def test_shot_with_allow_xwayland_shows_why_it_refuses(weston: WestonSession, tmp_path: Path) -> None:
    """Allowed, it captures: weston's desktop (its shell's background, a native Wayland
    surface) comes back black, which is what a model would have been shown."""
    out = tmp_path / "shot.png"
    proc = deskpilot("shot", "--allow-xwayland", "--no-cursor", "--out", str(out),
                     env=session_env(weston.env()), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    pixels = np.asarray(Image.open(out).convert("RGB"))
    assert pixels.shape == (720, 1280, 3)
    assert pixels.max() == 0


def test_doctor_fails_the_screen_line_on_xwayland(weston: WestonSession, tmp_path: Path) -> None:
    proc = deskpilot("doctor", "--no-model", env=session_env(weston.env()), cwd=tmp_path)
    lines = proc.stdout.splitlines()
    screen = " ".join(next(i for i in proc.stdout.split("\n") if i.startswith("FAIL screen")).split())
    assert screen.startswith(f"FAIL screen DISPLAY={weston.x_display} is Xwayland"), proc.stdout
    assert "all checks passed" not in proc.stdout and "1 failed" in lines[-1]
    assert proc.returncode == 1


def test_doctor_warns_when_xwayland_is_allowed(weston: WestonSession, tmp_path: Path) -> None:
    proc = deskpilot("doctor", "--no-model", env=session_env({**weston.env(), ALLOW: "1"}), cwd=tmp_path)
    out = " ".join(proc.stdout.split())
    assert "WARN screen DISPLAY=" in out and "X11 windows only, black elsewhere" in out, out
    assert "FAIL screen" not in out


def test_run_refuses_on_xwayland_before_the_run_starts(weston: WestonSession, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    proc = deskpilot("run", "--dry-run", "--runs-dir", str(runs), "--endpoint", "http://127.0.0.1:9/v1/chat/completions",
                     "Open the calculator", env=session_env(weston.env()), cwd=tmp_path)
    assert_refused(proc, weston.x_display)
    assert not runs.exists()  # no run directory, no record of a run that never started


def test_panel_refuses_on_xwayland_before_serving(weston: WestonSession, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    proc = deskpilot("panel", "--no-linger", "--runs-dir", str(runs), "Open the calculator",
                     env=session_env(weston.env()), cwd=tmp_path)
    assert_refused(proc, weston.x_display)
    assert not runs.exists()
    assert "panel" not in proc.stdout  # no "panel at http://..." line: nothing was served


def test_mcp_server_refuses_on_xwayland_before_serving(weston: WestonSession, tmp_path: Path) -> None:
    """``deskpilot mcp`` (stdio) refuses before the transport opens: a client never gets a
    black screenshot, and no session is recorded."""
    runs = tmp_path / "runs"
    proc = deskpilot("mcp", "--runs-dir", str(runs), env=session_env(weston.env()), cwd=tmp_path)
    assert_refused(proc, weston.x_display)
    assert not runs.exists()
    assert proc.stdout == ""  # not one JSON-RPC byte on the stdio transport


def test_the_library_run_refuses_on_xwayland(weston: WestonSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``run_agent`` with the default screen refuses too (the MCP server and other callers)."""
    from deskpilot.agent import load_config, run_agent

    for name in ("WAYLAND_DISPLAY", "XDG_SESSION_TYPE", ALLOW):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DISPLAY", weston.x_display)
    config = load_config(flags={"run.runs_dir": str(tmp_path / "runs"), "agent.dry_run": True})
    with pytest.raises(ScreenNotVisibleError, match="is Xwayland"):
        run_agent(config, "Open the calculator")
    assert not (tmp_path / "runs").exists()


def test_demo_moves_to_a_virtual_display_on_xwayland(weston: WestonSession, tmp_path: Path) -> None:
    """The demo app is an X11 window the agent could see there, but the demo must never show
    a model the black desktop around it: it runs on its own Xvfb and says why."""
    proc = deskpilot("demo", "--runs-dir", str(tmp_path / "runs"), "--image-size", "960x540",
                     env=session_env(weston.env()), cwd=tmp_path, timeout=240)
    out = " ".join(proc.stdout.split())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"DISPLAY={weston.x_display} is Xwayland (a Wayland session): deskpilot cannot see that desktop" in out
    assert "started a virtual display (Xvfb)" in out and "PASS text typed exactly" in out


# --- nothing refuses on Xvfb -------------------------------------------------------------------


def test_shot_and_doctor_work_on_xvfb_with_the_wayland_hints_set(xvfb: str, tmp_path: Path) -> None:
    env = session_env({"DISPLAY": xvfb, "WAYLAND_DISPLAY": "wayland-0", "XDG_SESSION_TYPE": "wayland"})
    shot = deskpilot("shot", "--out", str(tmp_path / "shot.png"), "--size", "192x108", env=env, cwd=tmp_path)
    assert shot.returncode == 0, shot.stdout + shot.stderr
    assert Image.open(tmp_path / "shot.png").size == (192, 108)
    doctor = deskpilot("doctor", "--no-model", env=env, cwd=tmp_path)
    out = " ".join(doctor.stdout.split())
    assert f"PASS screen DISPLAY={xvfb} is a virtual X server (Xvfb); RandR outputs: screen" in out, out
    assert doctor.returncode == 0, out
