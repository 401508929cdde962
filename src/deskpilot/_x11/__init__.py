"""Thin ctypes layer over libX11, libXtst and libXfixes (importable without a display).

Used by the XTest input backend and the XFixes cursor source of the mss capture
backend; nothing outside :mod:`deskpilot.capture` and :mod:`deskpilot.input` calls it.
"""

from deskpilot._x11._display import XDisplay
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
    "XErrorEvent",
    "XFixesCursorImage",
    "library",
]
