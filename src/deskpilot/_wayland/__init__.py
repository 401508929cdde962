"""Wayland platform bindings (importable without a compositor).

The Wayland counterpart of :mod:`deskpilot._x11`: the only code that speaks to a Wayland
session's own interfaces. Two families live here, each in its own modules:

- GNOME (Mutter): the session bus's ``org.gnome.Mutter.ScreenCast`` and
  ``org.gnome.Mutter.RemoteDesktop`` (D-Bus) and the PipeWire stream they open (ctypes on
  ``libpipewire-0.3``);
- other desktops (KDE Plasma, ...): the xdg-desktop-portal ScreenCast on the session bus
  (:mod:`._portal`), its streams through the same PipeWire module;
- wlroots (sway, Hyprland, river, ...): the Wayland wire protocol over the compositor's
  socket (:mod:`._wire`; ``wlr-screencopy-unstable-v1``, ``wlr-virtual-pointer-unstable-v1``,
  ``virtual-keyboard-unstable-v1`` in :mod:`._wlr`) and the keymap the virtual keyboard
  uploads (:mod:`._xkb`, libxkbcommon).

The capture and input backends built on them live in :mod:`deskpilot.capture` and
:mod:`deskpilot.input`; they import from this package (its face), which loads each module
on first use: importing ``deskpilot.capture`` loads none of them.
"""

TYPE_CHECKING = False
if TYPE_CHECKING:
    from deskpilot._wayland._dbus import DBusCallError, SessionBus, variant
    from deskpilot._wayland._detect import PORTAL_INPUT_MISSING, WAYLAND_BACKENDS, wayland_backend
    from deskpilot._wayland._mutter import (
        REMOTE_DESKTOP,
        MonitorStream,
        MutterSession,
        acquire_mutter,
        pointer_position,
        release_mutter,
    )
    from deskpilot._wayland._portal import (
        APPROVAL_TIMEOUT,
        PortalScreenCast,
        PortalStream,
        load_restore_token,
        portal_screencast_version,
        restore_token_path,
    )
    from deskpilot._wayland._watchdog import WlrootsWatchdog, start_watchdog
    from deskpilot._wayland._wire import Proxy, ShmBuffer
    from deskpilot._wayland._wlr import (
        WHEEL_STEP,
        ZWLR_SCREENCOPY_FRAME_V1,
        WlrootsClient,
        WlrOutput,
        note_pointer,
        now_ms,
        pointer_of,
        wlroots_available,
    )
    from deskpilot._wayland._xkb import XkbKeymap, utf32_to_keysym

_HOME = {
    **dict.fromkeys(("APPROVAL_TIMEOUT", "PortalScreenCast", "PortalStream", "load_restore_token",
                     "portal_screencast_version", "restore_token_path"), "_portal"),
    **dict.fromkeys(("WlrootsWatchdog", "start_watchdog"), "_watchdog"),
    **dict.fromkeys(("Proxy", "ShmBuffer"), "_wire"),
    **dict.fromkeys(("WHEEL_STEP", "ZWLR_SCREENCOPY_FRAME_V1", "WlrootsClient", "WlrOutput", "note_pointer", "now_ms",
                     "pointer_of", "wlroots_available"), "_wlr"),
    **dict.fromkeys(("XkbKeymap", "utf32_to_keysym"), "_xkb"),
    **dict.fromkeys(("DBusCallError", "SessionBus", "variant"), "_dbus"),
    **dict.fromkeys(("PORTAL_INPUT_MISSING", "WAYLAND_BACKENDS", "wayland_backend"), "_detect"),
    **dict.fromkeys(("REMOTE_DESKTOP", "MonitorStream", "MutterSession", "acquire_mutter", "pointer_position",
                     "release_mutter"), "_mutter"),
}


def __getattr__(name: str) -> object:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'deskpilot._wayland' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"deskpilot._wayland.{home}"), name)
    globals()[name] = value
    return value


__all__ = [
    "APPROVAL_TIMEOUT",
    "PORTAL_INPUT_MISSING",
    "REMOTE_DESKTOP",
    "WAYLAND_BACKENDS",
    "WHEEL_STEP",
    "ZWLR_SCREENCOPY_FRAME_V1",
    "DBusCallError",
    "MonitorStream",
    "MutterSession",
    "PortalScreenCast",
    "PortalStream",
    "Proxy",
    "SessionBus",
    "ShmBuffer",
    "WlrOutput",
    "WlrootsClient",
    "WlrootsWatchdog",
    "XkbKeymap",
    "acquire_mutter",
    "load_restore_token",
    "note_pointer",
    "now_ms",
    "pointer_of",
    "pointer_position",
    "portal_screencast_version",
    "release_mutter",
    "restore_token_path",
    "start_watchdog",
    "utf32_to_keysym",
    "variant",
    "wayland_backend",
    "wlroots_available",
]
