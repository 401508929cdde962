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
    XFixesCursorImage,
    library,
)

__all__ = [
    "CFUNCTIONS",
    "LIBRARIES",
    "XDisplay",
    "XError",
    "XErrorEvent",
    "XFixesCursorImage",
    "library",
]
