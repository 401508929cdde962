"""ctypes declarations for libX11, libXtst and libXfixes.

Importing this module loads nothing: the structures and the prototype table are plain
data (so they can be inspected and tested on any OS), and each library is opened on
first use by :func:`library`. Every prototype lives in one sorted table; a function
that is missing from the installed library raises :class:`PlatformError` naming it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import threading
from ctypes import (
    POINTER,
    Structure,
    c_char_p,
    c_int,
    c_short,
    c_ubyte,
    c_uint,
    c_ulong,
    c_ushort,
    c_void_p,
)
from typing import Any

from deskpilot._errors import PlatformError

__all__ = [
    "CFUNCTIONS",
    "LIBRARIES",
    "XERROR_HANDLER",
    "Atom",
    "Bool",
    "Display",
    "KeyCode",
    "KeySym",
    "Window",
    "XErrorEvent",
    "XFixesCursorImage",
    "library",
]

# Xlib's opaque pointer and integer types, spelled as Xlib spells them.
Display = c_void_p  # Display*
Window = c_ulong  # XID
Atom = c_ulong
KeySym = c_ulong  # XID-sized on every ABI
KeyCode = c_ubyte
Bool = c_int


class XFixesCursorImage(Structure):
    """``XFixesCursorImage`` (Xfixes.h). ``pixels`` are *unsigned long*: 8 bytes per pixel
    on LP64, each holding one premultiplied ARGB32 value in its low 32 bits."""

    _fields_ = (
        ("x", c_short),
        ("y", c_short),
        ("width", c_ushort),
        ("height", c_ushort),
        ("xhot", c_ushort),
        ("yhot", c_ushort),
        ("cursor_serial", c_ulong),
        ("pixels", POINTER(c_ulong)),
        ("atom", Atom),  # XFixes >= 2
        ("name", c_char_p),
    )


class XErrorEvent(Structure):
    """``XErrorEvent`` (Xlib.h), handed to the error handler."""

    _fields_ = (
        ("type", c_int),
        ("display", Display),
        ("resourceid", c_ulong),
        ("serial", c_ulong),
        ("error_code", c_ubyte),
        ("request_code", c_ubyte),
        ("minor_code", c_ubyte),
    )


#: ``int (*XErrorHandler)(Display *, XErrorEvent *)``.
XERROR_HANDLER = ctypes.CFUNCTYPE(c_int, Display, POINTER(XErrorEvent))

#: Short name -> (soname candidates searched by ctypes.util.find_library, fallbacks).
LIBRARIES: dict[str, tuple[str, tuple[str, ...]]] = {
    "X11": ("X11", ("libX11.so.6", "libX11.so")),
    "Xfixes": ("Xfixes", ("libXfixes.so.3", "libXfixes.so")),
    "Xtst": ("Xtst", ("libXtst.so.6", "libXtst.so")),
}

#: Function name -> (library, argtypes, restype). Sorted by name.
CFUNCTIONS: dict[str, tuple[str, tuple[Any, ...], Any]] = {
    "XChangeKeyboardMapping": ("X11", (Display, c_int, c_int, POINTER(KeySym), c_int), c_int),
    "XCloseDisplay": ("X11", (Display,), c_int),
    "XDefaultRootWindow": ("X11", (Display,), Window),
    "XDefaultScreen": ("X11", (Display,), c_int),
    "XDisplayHeight": ("X11", (Display, c_int), c_int),
    "XDisplayKeycodes": ("X11", (Display, POINTER(c_int), POINTER(c_int)), c_int),
    "XDisplayWidth": ("X11", (Display, c_int), c_int),
    "XFixesGetCursorImage": ("Xfixes", (Display,), POINTER(XFixesCursorImage)),
    "XFixesQueryExtension": ("Xfixes", (Display, POINTER(c_int), POINTER(c_int)), Bool),
    "XFixesQueryVersion": ("Xfixes", (Display, POINTER(c_int), POINTER(c_int)), c_int),
    "XFlush": ("X11", (Display,), c_int),
    "XFree": ("X11", (c_void_p,), c_int),
    "XGetErrorText": ("X11", (Display, c_int, c_char_p, c_int), c_int),
    "XGetKeyboardMapping": ("X11", (Display, KeyCode, c_int, POINTER(c_int)), POINTER(KeySym)),
    "XOpenDisplay": ("X11", (c_char_p,), Display),
    "XQueryPointer": (
        "X11",
        (Display, Window, POINTER(Window), POINTER(Window), POINTER(c_int), POINTER(c_int),
         POINTER(c_int), POINTER(c_int), POINTER(c_uint)),
        Bool,
    ),
    "XSetErrorHandler": ("X11", (XERROR_HANDLER,), XERROR_HANDLER),
    "XSync": ("X11", (Display, Bool), c_int),
    "XTestFakeButtonEvent": ("Xtst", (Display, c_uint, Bool, c_ulong), c_int),
    "XTestFakeKeyEvent": ("Xtst", (Display, c_uint, Bool, c_ulong), c_int),
    "XTestFakeMotionEvent": ("Xtst", (Display, c_int, c_int, c_int, c_ulong), c_int),
    "XTestQueryExtension": (
        "Xtst", (Display, POINTER(c_int), POINTER(c_int), POINTER(c_int), POINTER(c_int)), Bool,
    ),
}

_loaded: dict[str, ctypes.CDLL] = {}
_load_lock = threading.Lock()


def _open(short: str) -> ctypes.CDLL:
    soname, fallbacks = LIBRARIES[short]
    found = ctypes.util.find_library(soname)
    errors: list[str] = []
    for candidate in (found, *fallbacks) if found else fallbacks:
        try:
            lib = ctypes.CDLL(candidate)
        except OSError as exc:
            errors.append(f"{candidate}: {exc}")
            continue
        for name, (owner, argtypes, restype) in CFUNCTIONS.items():
            if owner != short:
                continue
            func = getattr(lib, name, None)
            if func is None:
                raise PlatformError(f"{candidate} has no function {name}", library=candidate, function=name)
            func.argtypes = argtypes
            func.restype = restype
        return lib
    raise PlatformError(
        f"cannot load lib{short}: is it installed? ({'; '.join(errors) or 'not found'})",
        library=short,
        tried=[c for c in (found, *fallbacks) if c],
    )


def library(short: str) -> ctypes.CDLL:
    """The loaded library ``short`` ("X11", "Xtst" or "Xfixes"), prototypes applied."""
    lib = _loaded.get(short)
    if lib is None:
        with _load_lock:
            lib = _loaded.get(short)
            if lib is None:
                lib = _loaded[short] = _open(short)
    return lib
