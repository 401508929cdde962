"""The portal's restore token on disk: where it is kept, 0600, replaced whole."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from deskpilot._wayland._portal import load_restore_token, restore_token_path, save_restore_token


def test_the_token_lives_in_the_state_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    assert restore_token_path() == tmp_path / "state" / "deskpilot" / "portal-restore-token"
    monkeypatch.delenv("XDG_STATE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert restore_token_path() == tmp_path / "home" / ".local" / "state" / "deskpilot" / "portal-restore-token"


def test_saved_0600_and_replaced_whole(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    assert load_restore_token() is None
    save_restore_token("1b4e28ba-2fa1-11d2-883f-0016d3cca427")
    path = restore_token_path()
    assert load_restore_token() == "1b4e28ba-2fa1-11d2-883f-0016d3cca427"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    inode = path.stat().st_ino
    save_restore_token("6fa459ea-ee8a-3ca4-894e-db77e160355e")
    assert load_restore_token() == "6fa459ea-ee8a-3ca4-894e-db77e160355e"
    # A new file renamed over the old one: a reader sees the old token or the new, never half.
    assert path.stat().st_ino != inode
    assert [p.name for p in path.parent.iterdir()] == ["portal-restore-token"]
    path.write_text("  \n")
    assert load_restore_token() is None


@pytest.mark.parametrize(
    ("mutter", "wlroots", "portal", "hide", "capture", "input_"),
    [
        (True, False, 4, "", "mutter", "mutter"),
        (False, True, 4, "", "wlroots", "wlroots"),
        (False, False, 4, "", "portal", None),  # KDE Plasma: capture only
        (False, False, 3, "", None, None),  # a portal too old to keep the approval
        (False, False, None, "", None, None),
        (True, False, 4, "mutter", "portal", None),  # the test-only switch
    ],
)
def test_the_backend_choice(monkeypatch: pytest.MonkeyPatch, mutter: bool, wlroots: bool, portal: int | None,
                            hide: str, capture: str | None, input_: str | None) -> None:
    from deskpilot._wayland import _detect, _mutter, _portal, _wlr

    monkeypatch.setattr(_mutter, "mutter_available", lambda **_: mutter)
    monkeypatch.setattr(_wlr, "wlroots_available", lambda: wlroots)
    monkeypatch.setattr(_portal, "portal_screencast_version", lambda: portal)
    monkeypatch.setenv(_detect.HIDE_ENV, hide)
    assert (_detect.wayland_backend("capture"), _detect.wayland_backend("input")) == (capture, input_)
