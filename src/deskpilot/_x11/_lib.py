"""ctypes declarations for libX11 (XKB included), libXtst, libXfixes, libXdamage and libXrandr.

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
    c_char,
    c_char_p,
    c_int,
    c_long,
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
    "XRECORD_INTERCEPT",
    "Atom",
    "Bool",
    "Display",
    "KeyCode",
    "KeySym",
    "Time",
    "Window",
    "XDamageNotifyEvent",
    "XErrorEvent",
    "XEvent",
    "XFixesCursorImage",
    "XKeyEvent",
    "XModifierKeymap",
    "XRRModeInfo",
    "XRROutputInfo",
    "XRRScreenResources",
    "XRecordInterceptData",
    "XRecordRange",
    "XRectangle",
    "XkbMapNotifyEvent",
    "XkbStateRec",
    "library",
]

# Xlib's opaque pointer and integer types, spelled as Xlib spells them.
Display = c_void_p  # Display*
Window = c_ulong  # XID
Atom = c_ulong
KeySym = c_ulong  # XID-sized on every ABI
KeyCode = c_ubyte
Time = c_ulong
Bool = c_int
Drawable = c_ulong  # XID
Damage = c_ulong  # XID
XserverRegion = c_ulong  # XID
RROutput = c_ulong  # XID
RRCrtc = c_ulong  # XID
RRMode = c_ulong  # XID


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


class XKeyEvent(Structure):
    """``XKeyEvent`` (Xlib.h): the KeyPress a passive grab (the kill-switch hotkey) delivers."""

    _fields_ = (
        ("type", c_int),
        ("serial", c_ulong),
        ("send_event", Bool),
        ("display", Display),
        ("window", Window),
        ("root", Window),
        ("subwindow", Window),
        ("time", Time),
        ("x", c_int),
        ("y", c_int),
        ("x_root", c_int),
        ("y_root", c_int),
        ("state", c_uint),
        ("keycode", c_uint),
        ("same_screen", Bool),
    )


class XRectangle(Structure):
    """``XRectangle`` (Xlib.h)."""

    _fields_ = (("x", c_short), ("y", c_short), ("width", c_ushort), ("height", c_ushort))


class XDamageNotifyEvent(Structure):
    """``XDamageNotifyEvent`` (Xdamage.h): ``area`` is the damage's bounding box."""

    _fields_ = (
        ("type", c_int),
        ("serial", c_ulong),
        ("send_event", Bool),
        ("display", Display),
        ("drawable", c_ulong),
        ("damage", c_ulong),
        ("level", c_int),
        ("more", Bool),
        ("timestamp", Time),
        ("area", XRectangle),
        ("geometry", XRectangle),
    )


class XEvent(ctypes.Union):
    """``XEvent`` (Xlib.h): its type, the variants read here, and 24 longs (Xlib's own size)."""

    _fields_ = (
        ("type", c_int),
        ("xkey", XKeyEvent),
        ("damage", XDamageNotifyEvent),
        ("pad", c_long * 24),
    )


class XModifierKeymap(Structure):
    """``XModifierKeymap`` (Xlib.h): 8 modifiers x ``max_keypermod`` keycodes."""

    _fields_ = (("max_keypermod", c_int), ("modifiermap", POINTER(c_ubyte)))


class XkbMapNotifyEvent(Structure):
    """``XkbMapNotifyEvent`` (XKBlib.h), up to the key-symbol range it reports."""

    _fields_ = (
        ("type", c_int),
        ("serial", c_ulong),
        ("send_event", Bool),
        ("display", Display),
        ("time", c_ulong),
        ("xkb_type", c_int),
        ("device", c_int),
        ("changed", c_uint),
        ("flags", c_uint),
        ("first_type", c_int),
        ("num_types", c_int),
        ("min_key_code", KeyCode),
        ("max_key_code", KeyCode),
        ("first_key_sym", KeyCode),
        ("first_key_act", KeyCode),
        ("first_key_behavior", KeyCode),
        ("first_key_explicit", KeyCode),
        ("first_modmap_key", KeyCode),
        ("first_vmodmap_key", KeyCode),
        ("num_key_syms", c_int),
    )


class XkbStateRec(Structure):
    """``XkbStateRec`` (XKBstr.h): the keyboard's group and modifier state."""

    _fields_ = (
        ("group", c_ubyte),
        ("locked_group", c_ubyte),
        ("base_group", c_ushort),
        ("latched_group", c_ushort),
        ("mods", c_ubyte),
        ("base_mods", c_ubyte),
        ("latched_mods", c_ubyte),
        ("locked_mods", c_ubyte),
        ("compat_state", c_ubyte),
        ("grab_mods", c_ubyte),
        ("compat_grab_mods", c_ubyte),
        ("lookup_mods", c_ubyte),
        ("compat_lookup_mods", c_ubyte),
        ("ptr_buttons", c_ushort),
    )


class XRRModeInfo(Structure):
    """``XRRModeInfo`` (Xrandr.h): one video mode of the screen's resources."""

    _fields_ = (
        ("id", RRMode),
        ("width", c_uint),
        ("height", c_uint),
        ("dotClock", c_ulong),
        ("hSyncStart", c_uint),
        ("hSyncEnd", c_uint),
        ("hTotal", c_uint),
        ("hSkew", c_uint),
        ("vSyncStart", c_uint),
        ("vSyncEnd", c_uint),
        ("vTotal", c_uint),
        ("name", c_char_p),
        ("nameLength", c_uint),
        ("modeFlags", c_ulong),  # XRRModeFlags
    )


class XRRScreenResources(Structure):
    """``XRRScreenResources`` (Xrandr.h): the screen's CRTCs, outputs and modes."""

    _fields_ = (
        ("timestamp", Time),
        ("configTimestamp", Time),
        ("ncrtc", c_int),
        ("crtcs", POINTER(RRCrtc)),
        ("noutput", c_int),
        ("outputs", POINTER(RROutput)),
        ("nmode", c_int),
        ("modes", POINTER(XRRModeInfo)),
    )


class XRROutputInfo(Structure):
    """``XRROutputInfo`` (Xrandr.h): one output (a connector on Xorg, ``XWAYLAND0`` on
    Xwayland, ``screen`` on Xvfb). ``name`` is ``nameLen`` bytes, not NUL-terminated by
    contract (libXrandr adds a NUL; the length is what counts)."""

    _fields_ = (
        ("timestamp", Time),
        ("crtc", RRCrtc),
        ("name", POINTER(c_char)),
        ("nameLen", c_int),
        ("mm_width", c_ulong),
        ("mm_height", c_ulong),
        ("connection", c_ushort),  # Connection: 0 connected, 1 disconnected, 2 unknown
        ("subpixel_order", c_ushort),  # SubpixelOrder
        ("ncrtc", c_int),
        ("crtcs", POINTER(RRCrtc)),
        ("nclone", c_int),
        ("clones", POINTER(RROutput)),
        ("nmode", c_int),
        ("npreferred", c_int),
        ("modes", POINTER(RRMode)),
    )


class XRecordRange8(Structure):
    _fields_ = (("first", c_ubyte), ("last", c_ubyte))


class XRecordRange16(Structure):
    _fields_ = (("first", c_ushort), ("last", c_ushort))


class XRecordExtRange(Structure):
    _fields_ = (("ext_major", XRecordRange8), ("ext_minor", XRecordRange16))


class XRecordRange(Structure):
    """``XRecordRange`` (record.h): which protocol a RECORD context intercepts."""

    _fields_ = (
        ("core_requests", XRecordRange8),
        ("core_replies", XRecordRange8),
        ("ext_requests", XRecordExtRange),
        ("ext_replies", XRecordExtRange),
        ("delivered_events", XRecordRange8),
        ("device_events", XRecordRange8),
        ("errors", XRecordRange8),
        ("client_started", Bool),
        ("client_died", Bool),
    )


class XRecordInterceptData(Structure):
    """``XRecordInterceptData`` (record.h): one intercepted protocol element; ``data`` is
    the wire form (a 32-byte ``xEvent`` for device events), ``data_len`` in 4-byte units."""

    _fields_ = (
        ("id_base", c_ulong),
        ("server_time", Time),
        ("client_seq", c_ulong),
        ("category", c_int),
        ("client_swapped", Bool),
        ("data", POINTER(c_ubyte)),
        ("data_len", c_ulong),
    )


#: ``void (*XRecordInterceptProc)(XPointer closure, XRecordInterceptData *)``.
XRECORD_INTERCEPT = ctypes.CFUNCTYPE(None, c_void_p, POINTER(XRecordInterceptData))

#: ``int (*XErrorHandler)(Display *, XErrorEvent *)``.
XERROR_HANDLER = ctypes.CFUNCTYPE(c_int, Display, POINTER(XErrorEvent))

#: Short name -> (soname candidates searched by ctypes.util.find_library, fallbacks).
LIBRARIES: dict[str, tuple[str, tuple[str, ...]]] = {
    "X11": ("X11", ("libX11.so.6", "libX11.so")),
    "Xdamage": ("Xdamage", ("libXdamage.so.1", "libXdamage.so")),
    "Xfixes": ("Xfixes", ("libXfixes.so.3", "libXfixes.so")),
    "Xrandr": ("Xrandr", ("libXrandr.so.2", "libXrandr.so")),
    "Xtst": ("Xtst", ("libXtst.so.6", "libXtst.so")),
}

#: Function name -> (library, argtypes, restype). Sorted by name.
CFUNCTIONS: dict[str, tuple[str, tuple[Any, ...], Any]] = {
    "XChangeKeyboardMapping": ("X11", (Display, c_int, c_int, POINTER(KeySym), c_int), c_int),
    "XChangeProperty": ("X11", (Display, Window, Atom, Atom, c_int, c_int, c_void_p, c_int), c_int),
    "XCloseDisplay": ("X11", (Display,), c_int),
    "XConnectionNumber": ("X11", (Display,), c_int),
    "XDamageCreate": ("Xdamage", (Display, Drawable, c_int), Damage),
    "XDamageDestroy": ("Xdamage", (Display, Damage), None),
    "XDamageQueryExtension": ("Xdamage", (Display, POINTER(c_int), POINTER(c_int)), Bool),
    # region 0 (None) as repair means "all of it".
    "XDamageSubtract": ("Xdamage", (Display, Damage, XserverRegion, XserverRegion), None),
    "XDefaultRootWindow": ("X11", (Display,), Window),
    "XDefaultScreen": ("X11", (Display,), c_int),
    "XDeleteProperty": ("X11", (Display, Window, Atom), c_int),
    "XDisplayHeight": ("X11", (Display, c_int), c_int),
    "XDisplayKeycodes": ("X11", (Display, POINTER(c_int), POINTER(c_int)), c_int),
    "XDisplayWidth": ("X11", (Display, c_int), c_int),
    "XFixesGetCursorImage": ("Xfixes", (Display,), POINTER(XFixesCursorImage)),
    "XFixesQueryExtension": ("Xfixes", (Display, POINTER(c_int), POINTER(c_int)), Bool),
    "XFixesQueryVersion": ("Xfixes", (Display, POINTER(c_int), POINTER(c_int)), c_int),
    "XFlush": ("X11", (Display,), c_int),
    "XFree": ("X11", (c_void_p,), c_int),
    "XFreeModifiermap": ("X11", (POINTER(XModifierKeymap),), c_int),
    "XGetAtomNames": ("X11", (Display, POINTER(Atom), c_int, POINTER(c_void_p)), c_int),
    "XGetErrorText": ("X11", (Display, c_int, c_char_p, c_int), c_int),
    "XGetInputFocus": ("X11", (Display, POINTER(Window), POINTER(c_int)), c_int),
    "XGetKeyboardMapping": ("X11", (Display, KeyCode, c_int, POINTER(c_int)), POINTER(KeySym)),
    "XGetModifierMapping": ("X11", (Display,), POINTER(XModifierKeymap)),
    "XGetWindowProperty": (
        "X11",
        (Display, Window, Atom, c_long, c_long, Bool, Atom, POINTER(Atom), POINTER(c_int),
         POINTER(c_ulong), POINTER(c_ulong), POINTER(POINTER(c_ubyte))),
        c_int,
    ),
    "XGrabKey": ("X11", (Display, c_int, c_uint, Window, Bool, c_int, c_int), c_int),
    "XGrabServer": ("X11", (Display,), c_int),
    "XInternAtom": ("X11", (Display, c_char_p, Bool), Atom),
    "XKeysymToKeycode": ("X11", (Display, KeySym), KeyCode),
    "XListProperties": ("X11", (Display, Window, POINTER(c_int)), POINTER(Atom)),
    "XNextEvent": ("X11", (Display, POINTER(XEvent)), c_int),
    "XOpenDisplay": ("X11", (c_char_p,), Display),
    "XPending": ("X11", (Display,), c_int),
    "XQueryKeymap": ("X11", (Display, POINTER(c_char)), c_int),
    "XQueryPointer": (
        "X11",
        (Display, Window, POINTER(Window), POINTER(Window), POINTER(c_int), POINTER(c_int),
         POINTER(c_int), POINTER(c_int), POINTER(c_uint)),
        Bool,
    ),
    "XQueryTree": (
        "X11",
        (Display, Window, POINTER(Window), POINTER(Window), POINTER(POINTER(Window)), POINTER(c_uint)),
        c_int,
    ),
    "XRRFreeOutputInfo": ("Xrandr", (POINTER(XRROutputInfo),), None),
    "XRRFreeScreenResources": ("Xrandr", (POINTER(XRRScreenResources),), None),
    "XRRGetOutputInfo": (
        "Xrandr", (Display, POINTER(XRRScreenResources), RROutput), POINTER(XRROutputInfo),
    ),
    # RandR >= 1.3: the server's current configuration, without probing the hardware (a
    # probe of real connectors can take hundreds of milliseconds on Xorg).
    "XRRGetScreenResourcesCurrent": ("Xrandr", (Display, Window), POINTER(XRRScreenResources)),
    "XRRQueryExtension": ("Xrandr", (Display, POINTER(c_int), POINTER(c_int)), Bool),
    "XRecordAllocRange": ("Xtst", (), POINTER(XRecordRange)),
    "XRecordCreateContext": (
        "Xtst", (Display, c_int, POINTER(c_ulong), c_int, POINTER(POINTER(XRecordRange)), c_int), c_ulong,
    ),
    "XRecordDisableContext": ("Xtst", (Display, c_ulong), c_int),
    "XRecordEnableContextAsync": ("Xtst", (Display, c_ulong, XRECORD_INTERCEPT, c_void_p), c_int),
    "XRecordFreeContext": ("Xtst", (Display, c_ulong), c_int),
    "XRecordFreeData": ("Xtst", (POINTER(XRecordInterceptData),), None),
    "XRecordProcessReplies": ("Xtst", (Display,), None),
    "XRecordQueryVersion": ("Xtst", (Display, POINTER(c_int), POINTER(c_int)), c_int),
    "XSetErrorHandler": ("X11", (XERROR_HANDLER,), XERROR_HANDLER),
    "XSync": ("X11", (Display, Bool), c_int),
    "XTestFakeButtonEvent": ("Xtst", (Display, c_uint, Bool, c_ulong), c_int),
    "XTestFakeKeyEvent": ("Xtst", (Display, c_uint, Bool, c_ulong), c_int),
    "XTestFakeMotionEvent": ("Xtst", (Display, c_int, c_int, c_int, c_ulong), c_int),
    "XTestQueryExtension": (
        "Xtst", (Display, POINTER(c_int), POINTER(c_int), POINTER(c_int), POINTER(c_int)), Bool,
    ),
    "XUngrabKey": ("X11", (Display, c_int, c_uint, Window), c_int),
    "XUngrabServer": ("X11", (Display,), c_int),
    "XkbGetState": ("X11", (Display, c_uint, POINTER(XkbStateRec)), c_int),
    "XkbLockGroup": ("X11", (Display, c_uint, c_uint), Bool),
    "XkbLockModifiers": ("X11", (Display, c_uint, c_uint, c_uint), Bool),
    "XkbQueryExtension": (
        "X11", (Display, POINTER(c_int), POINTER(c_int), POINTER(c_int), POINTER(c_int), POINTER(c_int)), Bool,
    ),
    "XkbSelectEvents": ("X11", (Display, c_uint, c_ulong, c_ulong), Bool),
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
    """The loaded library ``short`` ("X11", "Xtst", "Xfixes", "Xdamage" or "Xrandr"), prototypes applied."""
    lib = _loaded.get(short)
    if lib is None:
        with _load_lock:
            lib = _loaded.get(short)
            if lib is None:
                lib = _loaded[short] = _open(short)
    return lib
