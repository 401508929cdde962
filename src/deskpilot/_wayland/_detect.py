"""Which Wayland backend the session offers: the one place that decides, for capture and
input alike (``auto`` backends, :func:`deskpilot.capture.check_screen_visible`, ``doctor``).

GNOME: ``org.gnome.Mutter.ScreenCast`` owned on the session bus (and
``org.gnome.Mutter.RemoteDesktop`` for input) → ``"mutter"``. Nothing else is offered yet
(wlroots' screencopy and virtual input come next, read from the compositor's registry).
The environment's ``WAYLAND_DISPLAY`` / ``XDG_SESSION_TYPE`` are never the verdict: only what
answers on the bus or the socket.
"""

from __future__ import annotations

from typing import Literal

__all__ = ["WAYLAND_BACKENDS", "Purpose", "wayland_backend"]

Purpose = Literal["capture", "input"]

#: The Wayland backends deskpilot has (for messages: what exists).
WAYLAND_BACKENDS: tuple[str, ...] = ("mutter",)


def wayland_backend(purpose: Purpose) -> str | None:
    """The Wayland backend this session offers for ``purpose``, or None (no session bus, no
    Mutter on it, or the ``wayland`` extra's jeepney not installed)."""
    from deskpilot._wayland._mutter import mutter_available

    if mutter_available(remote_desktop=purpose == "input"):
        return "mutter"
    return None
