"""Which Wayland backend the session offers: the one place that decides, for capture and
input alike (``auto`` backends, :func:`deskpilot.capture.check_screen_visible`, ``doctor``).

GNOME: ``org.gnome.Mutter.ScreenCast`` owned on the session bus (and
``org.gnome.Mutter.RemoteDesktop`` for input) → ``"mutter"``. wlroots (sway, Hyprland,
river...): ``$WAYLAND_DISPLAY``'s registry offers screencopy, the virtual pointer and the
virtual keyboard → ``"wlroots"``. Other compositors (KDE Plasma, weston): None.
The environment's ``WAYLAND_DISPLAY`` / ``XDG_SESSION_TYPE`` are never the verdict: only what
answers on the bus or the socket.
"""

from __future__ import annotations

from typing import Literal

__all__ = ["WAYLAND_BACKENDS", "Purpose", "wayland_backend"]

Purpose = Literal["capture", "input"]

#: The Wayland backends deskpilot has (for messages: what exists).
WAYLAND_BACKENDS: tuple[str, ...] = ("mutter", "wlroots")


def wayland_backend(purpose: Purpose) -> str | None:
    """The Wayland backend this session offers for ``purpose``, or None (neither Mutter on the
    session bus, with the ``wayland`` extra's jeepney installed, nor a wlroots compositor at
    ``$WAYLAND_DISPLAY``)."""
    from deskpilot._wayland._mutter import mutter_available
    from deskpilot._wayland._wlr import wlroots_available

    if mutter_available(remote_desktop=purpose == "input"):
        return "mutter"
    if wlroots_available():
        return "wlroots"
    return None
