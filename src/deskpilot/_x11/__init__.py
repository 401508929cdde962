"""Thin ctypes layer over libX11, libXtst, libXfixes, libXdamage and libXrandr (importable without a display).

deskpilot's only X11 binding: one prototype table (:mod:`._lib`), one connection class
(:class:`XDisplay`) and the process's only X error handler (:mod:`._error_handler`).
Used by the XTest input backend, the mss capture backend (XFixes cursor), the DAMAGE
watcher of the settle loop, the kill switch and active-window reader of
:mod:`deskpilot.safety`, and the check that capture can see the screen (RandR output names:
:func:`deskpilot.capture.check_screen_visible`).
"""

from deskpilot._x11._display import XDisplay
from deskpilot._x11._error_handler import XError
from deskpilot._x11._lib import (
    CFUNCTIONS,
    LIBRARIES,
    XErrorEvent,
    XEvent,
    XFixesCursorImage,
    XkbMapNotifyEvent,
    XkbStateRec,
    library,
)

# The DAMAGE watcher (the settle), the RECORD motion recorder (the kill switch), the input
# record and its watchdog (XTest) load on first use: capture imports this package and
# needs none of them.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from deskpilot._x11._damage import DamageWatcher
    from deskpilot._x11._motion import MotionRecorder
    from deskpilot._x11._record import InputRecord, Owner, OwnerEntry, reclaim_dead_owners
    from deskpilot._x11._watchdog import Watchdog, hold_watchdog

_HOME = {
    "DamageWatcher": "_damage",
    "MotionRecorder": "_motion",
    **dict.fromkeys(("InputRecord", "Owner", "OwnerEntry", "reclaim_dead_owners"), "_record"),
    **dict.fromkeys(("Watchdog", "hold_watchdog"), "_watchdog"),
}


def __getattr__(name: str) -> object:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'deskpilot._x11' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"deskpilot._x11.{home}"), name)
    globals()[name] = value
    return value


__all__ = [
    "CFUNCTIONS",
    "LIBRARIES",
    "DamageWatcher",
    "InputRecord",
    "MotionRecorder",
    "Owner",
    "OwnerEntry",
    "Watchdog",
    "XDisplay",
    "XError",
    "XErrorEvent",
    "XEvent",
    "XFixesCursorImage",
    "XkbMapNotifyEvent",
    "XkbStateRec",
    "hold_watchdog",
    "library",
    "reclaim_dead_owners",
]
