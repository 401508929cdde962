"""Which Wayland backend the session offers: the one place that decides, for capture and
input alike (``auto`` backends, :func:`deskpilot.capture.check_screen_visible`, ``doctor``).

GNOME: ``org.gnome.Mutter.ScreenCast`` owned on the session bus (and
``org.gnome.Mutter.RemoteDesktop`` for input) → ``"mutter"``. wlroots (sway, Hyprland,
river...): ``$WAYLAND_DISPLAY``'s registry offers screencopy, the virtual pointer and the
virtual keyboard → ``"wlroots"``. Other desktops (KDE Plasma, ...): for capture only, the
xdg-desktop-portal ScreenCast (version 4 or later, so the approval can be kept) on the session
bus → ``"portal"``; for input None (see :data:`PORTAL_INPUT_MISSING`). weston: None.
The environment's ``WAYLAND_DISPLAY`` / ``XDG_SESSION_TYPE`` are never the verdict: only what
answers on the bus or the socket.
"""

from __future__ import annotations

import os
from typing import Literal

__all__ = ["HIDE_ENV", "PORTAL_INPUT_MISSING", "WAYLAND_BACKENDS", "Purpose", "wayland_backend"]

Purpose = Literal["capture", "input"]

#: The Wayland backends deskpilot has (for messages: what exists).
WAYLAND_BACKENDS: tuple[str, ...] = ("mutter", "portal", "wlroots")

#: TEST-ONLY switch: a comma-separated list of Wayland backends (``mutter``, ``wlroots``)
#: that :func:`wayland_backend` acts as if absent. The Wayland tier uses it to show what
#: ``auto`` picks on a desktop without Mutter's private API (KDE Plasma) while the portal
#: runs on headless GNOME (whose portal backend needs Mutter's API itself, so the bus cannot
#: hide it). Never set it in a real session.
HIDE_ENV = "DESKPILOT_TEST_HIDE_WAYLAND"

#: Why there is no input backend where only the portal offers capture, and what to do.
PORTAL_INPUT_MISSING = (
    "no input backend for this desktop: deskpilot's Wayland input speaks Mutter's RemoteDesktop (GNOME) "
    "and wlroots' virtual pointer and keyboard (sway, Hyprland, river); the RemoteDesktop portal "
    "(version 1 on xdg-desktop-portal 1.16) asks the user in a dialog for every session and keeps no "
    "approval, so deskpilot does not use it. Capture works (portal); to let deskpilot act, log into "
    "an X11 session (KDE: \"Plasma (X11)\"), GNOME or a wlroots compositor")


def wayland_backend(purpose: Purpose) -> str | None:
    """The Wayland backend this session offers for ``purpose``, or None (neither Mutter on the
    session bus, with the ``wayland`` extra's jeepney installed, nor a wlroots compositor at
    ``$WAYLAND_DISPLAY``, nor, for capture, a ScreenCast portal)."""
    from deskpilot._wayland._mutter import mutter_available
    from deskpilot._wayland._portal import portal_screencast_version
    from deskpilot._wayland._wlr import wlroots_available

    hidden = {name.strip() for name in os.environ.get(HIDE_ENV, "").split(",")}
    if "mutter" not in hidden and mutter_available(remote_desktop=purpose == "input"):
        return "mutter"
    if "wlroots" not in hidden and wlroots_available():
        return "wlroots"
    if purpose == "capture" and (portal_screencast_version() or 0) >= 4:
        return "portal"
    return None
