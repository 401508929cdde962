"""The xdg-desktop-portal capture backend on a real headless GNOME session: the real
``xdg-desktop-portal`` and ``xdg-desktop-portal-gnome``, started by bus activation on the
session's private bus, with the screencast permission pre-seeded in the PermissionStore as a
user's earlier approval leaves it (so no dialog is needed, as on a desktop after the first run).

Checked: the portal's frame is the known GTK picture and equal to the Mutter backend's; the
restore token is saved (0600) and the next session starts from it with no dialog, while a
session without a token does wait for the dialog (so "no dialog" is not vacuous); ``auto``
picks the portal when Mutter's own API is hidden (``DESKPILOT_TEST_HIDE_WAYLAND``, test-only:
GNOME's portal backend needs that API itself, so it cannot be hidden from the bus); ``doctor``
names the portal backend, says there is no input and why, and asks for the first approval
when no token is kept."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from _mutter_tier import GtkApp, block_colors, started_desktop

from deskpilot._errors import InputError, PlatformError
from deskpilot._wayland import SessionBus, load_restore_token, restore_token_path
from deskpilot._wayland._detect import HIDE_ENV
from deskpilot.capture import check_screen_visible
from deskpilot.capture._capturer import make_backend as make_capture_backend
from deskpilot.capture._mutter import MutterBackend
from deskpilot.capture._portal import PortalBackend
from deskpilot.input import InputController
from deskpilot.testing._mutter import MutterDesktop

pytestmark = [pytest.mark.mutter]

WIDTH, HEIGHT = 1920, 1080
#: Seconds a session may wait in Start: a restored one answers in well under a second
#: (13-53 ms measured); a dialog would wait for a user and fail this.
NO_DIALOG = 20.0
_STORE = ("org.freedesktop.impl.portal.PermissionStore", "/org/freedesktop/impl/portal/PermissionStore",
          "org.freedesktop.impl.portal.PermissionStore")


def seed_permission(desktop: MutterDesktop) -> str:
    """Store an approval of screen sharing of every monitor (as xdg-desktop-portal-gnome 43
    records a user's answer with persist_mode 2) under a new token; return the token."""
    bus = SessionBus(desktop.bus_address)
    try:
        _serial, monitors, _logical, _props = bus.call(
            "org.gnome.Mutter.DisplayConfig", "/org/gnome/Mutter/DisplayConfig", "org.gnome.Mutter.DisplayConfig",
            "GetCurrentState")
        now = int(time.time() * 1e6)
        sources = [(0, 1, ("s", f"{vendor}:{product}:{serial}")) for (_c, vendor, product, serial), _m, _p in monitors]
        token = str(uuid.uuid4())
        bus.call(*_STORE, "Set", "sbsa{sas}v",
                 ("screencast", True, token, {"": ["yes"]},
                  ("(suv)", ("GNOME", 1, ("(xxa(uuv))", (now, now, sources))))))
        return token
    finally:
        bus.close()


@pytest.fixture(scope="module")
def desktop() -> Iterator[MutterDesktop]:
    if shutil.which("/usr/libexec/xdg-desktop-portal") is None or \
            shutil.which("/usr/libexec/xdg-desktop-portal-gnome") is None:
        pytest.skip("xdg-desktop-portal and xdg-desktop-portal-gnome not installed (./dev setup installs them)")
    with started_desktop() as session:
        env = {**os.environ, **session.env()}
        # Bus-activated services get the bus's environment, not ours: the portal picks its
        # backend from XDG_CURRENT_DESKTOP (a systemd login session does this at login).
        subprocess.run(["dbus-update-activation-environment", "XDG_CURRENT_DESKTOP=GNOME", "WAYLAND_DISPLAY",
                        "DISPLAY", "XAUTHORITY", "XDG_SESSION_TYPE", "XDG_RUNTIME_DIR", "HOME"],
                       env=env, check=True, timeout=30, capture_output=True)
        saved = os.environ.get("XDG_STATE_HOME")
        # The token file goes to the session's private home, never the real user's.
        os.environ["XDG_STATE_HOME"] = env["XDG_STATE_HOME"]
        try:
            yield session
        finally:
            if saved is None:
                os.environ.pop("XDG_STATE_HOME", None)
            else:
                os.environ["XDG_STATE_HOME"] = saved


@pytest.fixture(scope="module")
def app(desktop: MutterDesktop) -> Iterator[GtkApp]:
    gtk = GtkApp(desktop)
    yield gtk
    gtk.close()


@pytest.fixture()
def approved(app: GtkApp, desktop: MutterDesktop) -> None:
    """A kept token, as after the user's first approval (seeded when none is kept yet)."""
    if load_restore_token() is None:
        PortalBackend(restore_token=seed_permission(desktop), approval_timeout=NO_DIALOG).close()


def _entry_mask() -> np.ndarray:
    mask = np.ones((HEIGHT, WIDTH), bool)
    mask[:120, :700] = False  # the text entry and its frame
    return mask


def test_the_portal_frame_is_the_window_and_what_mutter_grabs(app: GtkApp, desktop: MutterDesktop) -> None:
    token = seed_permission(desktop)
    portal = PortalBackend(cursor=False, restore_token=token, approval_timeout=NO_DIALOG)
    mutter = MutterBackend(cursor=False)
    try:
        assert [m.rect.as_tuple() for m in portal.monitors()] == [(0, 0, WIDTH, HEIGHT)]
        expected = block_colors(WIDTH, HEIGHT)
        mask = _entry_mask()
        rect = portal.monitors()[0].rect
        deadline = time.monotonic() + 5  # the first paint may still be on its way to a stream
        while True:
            ours = portal.grab_bgra(rect)[..., :3].copy()
            theirs = mutter.grab_bgra(rect)[..., :3].copy()
            error = np.abs(ours[..., ::-1].astype(np.int16) - expected).max(axis=2)
            if (int(error[mask].max()) == 0 and np.array_equal(ours, theirs)) or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert int(error[mask].max()) == 0, np.argwhere((error > 0) & mask)[:5]
        assert np.array_equal(ours, theirs)
        # The portal gave a new token and it is kept, readable by the user only.
        assert portal.session.restore_token and load_restore_token() == portal.session.restore_token
        assert stat.S_IMODE(restore_token_path().stat().st_mode) == 0o600
    finally:
        portal.close()
        mutter.close()


def test_the_saved_token_starts_the_next_session_without_a_dialog(approved: None) -> None:
    started = time.monotonic()
    again = PortalBackend(cursor=False, approval_timeout=NO_DIALOG)  # the saved token, read from the file
    try:
        assert time.monotonic() - started < NO_DIALOG
        assert again.session.restore_token and load_restore_token() == again.session.restore_token
        frame = again.grab_bgra(again.monitors()[0].rect)
        assert frame.shape == (HEIGHT, WIDTH, 4) and frame[..., :3].mean() > 20
    finally:
        again.close()


def test_without_a_token_the_portal_waits_for_the_user(approved: None) -> None:
    """What makes "no dialog" above mean something: without a token the portal shows its
    chooser; nobody answers here, so the session times out, and the kept token stays."""
    kept = load_restore_token()
    with pytest.raises(PlatformError, match="nobody answered"):
        PortalBackend(restore_token="", approval_timeout=3.0)
    assert load_restore_token() == kept
    # The next session (just after the unanswered dialog) starts again from the kept token.
    PortalBackend(approval_timeout=NO_DIALOG).close()


def test_auto_picks_the_portal_without_mutters_api(approved: None, monkeypatch: pytest.MonkeyPatch) -> None:
    assert check_screen_visible().backend == "mutter"
    monkeypatch.setenv(HIDE_ENV, "mutter")
    visible = check_screen_visible()
    assert (visible.server, visible.visible, visible.backend) == ("wayland", True, "portal")
    assert "through the portal backend (the xdg-desktop-portal ScreenCast)" in visible.describe()
    backend = make_capture_backend("auto", cursor=False)
    try:
        assert backend.name == "portal"
    finally:
        backend.close()
    # No input answers there: auto says so instead of XTest on Xwayland.
    with pytest.raises(InputError, match="no input backend for this desktop"):
        InputController("auto")


def _doctor(tmp_path: Path) -> str:
    env = {**os.environ, HIDE_ENV: "mutter"}
    proc = subprocess.run([sys.executable, "-m", "deskpilot", "doctor", "--no-model"], capture_output=True,
                          text=True, cwd=tmp_path, env=env, timeout=120)
    assert proc.returncode != 0  # the input line fails
    return " ".join(proc.stdout.split())


def test_doctor_names_the_portal_and_what_is_missing(approved: None, tmp_path: Path) -> None:
    text = _doctor(tmp_path)
    assert "capture sees the whole screen through the portal backend" in text, text
    assert "portal backend; monitor 1 1920x1080" in text, text
    assert "input auto: no input backend for this desktop" in text and "RemoteDesktop portal" in text, text
    # Before the first approval: doctor says what to do instead of waiting on a dialog.
    restore_token_path().unlink()
    text = _doctor(tmp_path)
    assert "portal backend (xdg-desktop-portal ScreenCast): not approved yet; run `deskpilot shot " \
           "--capture portal` once" in text, text


def test_shot_through_the_portal(approved: None, tmp_path: Path) -> None:
    """What doctor tells a user to run for the first approval works (named, on GNOME too)."""
    out = tmp_path / "shot.png"
    proc = subprocess.run([sys.executable, "-m", "deskpilot", "shot", "--capture", "portal", "--no-cursor",
                           "--size", "1920x1080", "--out", str(out)], capture_output=True, text=True,
                          cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "portal" in proc.stdout, proc.stdout
    from PIL import Image

    got = np.asarray(Image.open(out).convert("RGB"))
    mask = _entry_mask()
    assert np.array_equal(got[mask], block_colors(WIDTH, HEIGHT)[mask])
