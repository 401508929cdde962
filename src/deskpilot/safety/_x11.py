"""Thin ctypes declarations of the Xlib calls the safety layer makes.

Only what the kill-switch watcher and the active-window reader need: window properties
(``_NET_ACTIVE_WINDOW``, ``_NET_WM_NAME``, ``WM_CLASS``), the input focus and window tree
(for servers without a window manager), the pointer position, passive key grabs and
the event queue. Loading is lazy, so the module imports on any OS; the library gets its
own ``CDLL`` handle so these prototypes never clash with another module's.

Xlib's default error handler exits the process; :class:`Connection` installs a chained
handler once that records errors of the connections opened here (checked after a
round trip) and passes every other connection's errors to the handler installed
before it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import threading
from ctypes import (
    POINTER,
    Structure,
    Union,
    byref,
    c_char,
    c_char_p,
    c_int,
    c_long,
    c_ubyte,
    c_uint,
    c_ulong,
    c_void_p,
)
from typing import Any

from deskpilot._errors import PlatformError

__all__ = [
    "CFUNCTIONS",
    "Connection",
    "XErrorEvent",
    "XEvent",
    "XKeyEvent",
    "XModifierKeymap",
]

Display = c_void_p
Window = c_ulong
Atom = c_ulong
KeySym = c_ulong
Time = c_ulong
Bool = c_int

# X.h constants used here.
KEY_PRESS = 2
GRAB_MODE_ASYNC = 1
ANY_PROPERTY_TYPE = 0
SUCCESS = 0
BAD_ACCESS = 10
SHIFT_MASK, LOCK_MASK, CONTROL_MASK = 1, 2, 4
MOD1_MASK, MOD2_MASK, MOD3_MASK, MOD4_MASK, MOD5_MASK = 8, 16, 32, 64, 128
POINTER_ROOT = 1  # XGetInputFocus: focus follows the pointer


class XKeyEvent(Structure):
    """``XKeyEvent`` (Xlib.h)."""

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


class XEvent(Union):
    """``XEvent``: a union padded to 24 longs; only the key variant is read here."""

    _fields_ = (("type", c_int), ("xkey", XKeyEvent), ("pad", c_long * 24))


class XErrorEvent(Structure):
    """``XErrorEvent`` (Xlib.h)."""

    _fields_ = (
        ("type", c_int),
        ("display", Display),
        ("resourceid", c_ulong),
        ("serial", c_ulong),
        ("error_code", c_ubyte),
        ("request_code", c_ubyte),
        ("minor_code", c_ubyte),
    )


class XModifierKeymap(Structure):
    """``XModifierKeymap``: 8 modifiers x ``max_keypermod`` keycodes."""

    _fields_ = (("max_keypermod", c_int), ("modifiermap", POINTER(c_ubyte)))


_ERROR_HANDLER = ctypes.CFUNCTYPE(c_int, Display, POINTER(XErrorEvent))

#: Function name -> (argtypes, restype). Sorted by name.
CFUNCTIONS: dict[str, tuple[tuple[Any, ...], Any]] = {
    "XCloseDisplay": ((Display,), c_int),
    "XConnectionNumber": ((Display,), c_int),
    "XDefaultRootWindow": ((Display,), Window),
    "XDefaultScreen": ((Display,), c_int),
    "XDisplayHeight": ((Display, c_int), c_int),
    "XDisplayWidth": ((Display, c_int), c_int),
    "XFlush": ((Display,), c_int),
    "XFree": ((c_void_p,), c_int),
    "XFreeModifiermap": ((POINTER(XModifierKeymap),), c_int),
    "XGetErrorText": ((Display, c_int, c_char_p, c_int), c_int),
    "XGetInputFocus": ((Display, POINTER(Window), POINTER(c_int)), c_int),
    "XGetModifierMapping": ((Display,), POINTER(XModifierKeymap)),
    "XGetWindowProperty": (
        (Display, Window, Atom, c_long, c_long, Bool, Atom, POINTER(Atom), POINTER(c_int),
         POINTER(c_ulong), POINTER(c_ulong), POINTER(POINTER(c_ubyte))),
        c_int,
    ),
    "XGrabKey": ((Display, c_int, c_uint, Window, Bool, c_int, c_int), c_int),
    "XInternAtom": ((Display, c_char_p, Bool), Atom),
    "XKeysymToKeycode": ((Display, KeySym), c_ubyte),
    "XNextEvent": ((Display, POINTER(XEvent)), c_int),
    "XOpenDisplay": ((c_char_p,), Display),
    "XPending": ((Display,), c_int),
    "XQueryKeymap": ((Display, POINTER(c_char)), c_int),
    "XQueryPointer": (
        (Display, Window, POINTER(Window), POINTER(Window), POINTER(c_int), POINTER(c_int),
         POINTER(c_int), POINTER(c_int), POINTER(c_uint)),
        Bool,
    ),
    "XQueryTree": (
        (Display, Window, POINTER(Window), POINTER(Window), POINTER(POINTER(Window)), POINTER(c_uint)),
        c_int,
    ),
    "XSetErrorHandler": ((_ERROR_HANDLER,), _ERROR_HANDLER),
    "XSync": ((Display, Bool), c_int),
    "XUngrabKey": ((Display, c_int, c_uint, Window), c_int),
}

_lib: ctypes.CDLL | None = None
_lock = threading.Lock()
_handler: Any = None  # kept alive: ctypes does not keep callbacks alive
_previous: Any = None
_errors: dict[int, list[tuple[int, int, int]]] = {}


def _load() -> ctypes.CDLL:
    global _lib
    with _lock:
        if _lib is not None:
            return _lib
        found = ctypes.util.find_library("X11")
        errors: list[str] = []
        for name in [n for n in (found, "libX11.so.6", "libX11.so") if n]:
            try:
                lib = ctypes.CDLL(name)
            except OSError as exc:
                errors.append(f"{name}: {exc}")
                continue
            for fname, (argtypes, restype) in CFUNCTIONS.items():
                func = getattr(lib, fname)
                func.argtypes = argtypes
                func.restype = restype
            _lib = lib
            return lib
        raise PlatformError(f"cannot load libX11 ({'; '.join(errors) or 'not found'})", library="X11")


def _on_error(display: int | None, event: Any) -> int:
    err = event.contents
    pending = _errors.get(display or 0)
    if pending is not None:
        pending.append((int(err.error_code), int(err.request_code), int(err.minor_code)))
        return 0
    if _previous:
        return int(_previous(display, event))
    return 0


def _install_handler(lib: ctypes.CDLL) -> None:
    global _handler, _previous
    with _lock:
        if _handler is None:
            _handler = _ERROR_HANDLER(_on_error)
            _previous = lib.XSetErrorHandler(_handler)


class Connection:
    """One X connection, used by one thread. Every helper the safety layer needs."""

    def __init__(self, name: str | None = None) -> None:
        self.x = _load()
        _install_handler(self.x)
        shown = name if name is not None else os.environ.get("DISPLAY")
        ptr = self.x.XOpenDisplay(name.encode() if name is not None else None)
        if not ptr:
            raise PlatformError(
                "no X display: is DISPLAY set?" if not shown else f"cannot open X display {shown!r}",
                display=shown,
                call="XOpenDisplay",
            )
        self.ptr: int = int(ptr)
        _errors[self.ptr] = []
        screen = int(self.x.XDefaultScreen(self.ptr))
        self.root: int = int(self.x.XDefaultRootWindow(self.ptr))
        self.width: int = int(self.x.XDisplayWidth(self.ptr, screen))
        self.height: int = int(self.x.XDisplayHeight(self.ptr, screen))
        self._atoms: dict[str, int] = {}

    # -- lifetime --------------------------------------------------------------------

    def close(self) -> None:
        """Close the connection. Idempotent."""
        if self.ptr:
            ptr, self.ptr = self.ptr, 0
            self.x.XCloseDisplay(ptr)
            _errors.pop(ptr, None)

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def take_errors(self) -> list[tuple[int, int, int]]:
        """Round-trip, then return and clear the X errors our requests caused."""
        self.x.XSync(self.ptr, 0)
        pending = _errors.get(self.ptr, [])
        out = list(pending)
        pending.clear()
        return out

    def error_text(self, code: int) -> str:
        buf = ctypes.create_string_buffer(256)
        self.x.XGetErrorText(self.ptr, code, buf, len(buf))
        return buf.value.decode(errors="replace") or f"X error {code}"

    # -- properties and windows ------------------------------------------------------

    def atom(self, name: str) -> int:
        value = self._atoms.get(name)
        if value is None:
            value = self._atoms[name] = int(self.x.XInternAtom(self.ptr, name.encode(), 0))
        return value

    def property(self, window: int, name: str, *, max_longs: int = 1024) -> tuple[int, bytes] | None:
        """``(format, raw bytes)`` of a window property, or None when it is absent.

        Format-32 data comes back from Xlib as C longs (8 bytes on LP64); it is returned
        as such and :meth:`property_ints` unpacks it.
        """
        actual_type = Atom()
        actual_format = c_int()
        nitems = c_ulong()
        after = c_ulong()
        data = POINTER(c_ubyte)()
        status = self.x.XGetWindowProperty(
            self.ptr, window, self.atom(name), 0, max_longs, 0, ANY_PROPERTY_TYPE,
            byref(actual_type), byref(actual_format), byref(nitems), byref(after), byref(data),
        )
        try:
            if status != SUCCESS or not actual_type.value or not data:
                return None
            fmt = actual_format.value
            unit = {8: 1, 16: ctypes.sizeof(ctypes.c_short), 32: ctypes.sizeof(c_long)}.get(fmt, 1)
            return fmt, ctypes.string_at(data, nitems.value * unit)
        finally:
            if data:
                self.x.XFree(data)

    def property_ints(self, window: int, name: str) -> list[int]:
        prop = self.property(window, name)
        if prop is None or prop[0] != 32:
            return []
        raw = prop[1]
        count = len(raw) // ctypes.sizeof(c_ulong)
        return list((c_ulong * count).from_buffer_copy(raw[: count * ctypes.sizeof(c_ulong)]))

    def property_text(self, window: int, name: str) -> str | None:
        prop = self.property(window, name)
        if prop is None or prop[0] != 8:
            return None
        raw = prop[1]
        # _NET_WM_NAME is UTF8_STRING; WM_NAME is STRING (Latin-1) or COMPOUND_TEXT, whose
        # ASCII subset decodes the same either way.
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            return raw.decode("latin-1")

    def focus(self) -> int:
        """The window holding the input focus (0 = none, 1 = PointerRoot)."""
        window = Window()
        revert = c_int()
        self.x.XGetInputFocus(self.ptr, byref(window), byref(revert))
        return int(window.value)

    def parent(self, window: int) -> int:
        """The parent of ``window`` (0 for the root or on error)."""
        root = Window()
        parent = Window()
        children = POINTER(Window)()
        count = c_uint()
        ok = self.x.XQueryTree(self.ptr, window, byref(root), byref(parent), byref(children), byref(count))
        if children:
            self.x.XFree(children)
        if not ok or window == root.value:
            return 0
        return int(parent.value)

    # -- pointer and keyboard -------------------------------------------------------

    def pointer(self) -> tuple[int, int]:
        root = Window()
        child = Window()
        rx, ry, wx, wy = c_int(), c_int(), c_int(), c_int()
        mask = c_uint()
        self.x.XQueryPointer(
            self.ptr, self.root, byref(root), byref(child), byref(rx), byref(ry),
            byref(wx), byref(wy), byref(mask),
        )
        return rx.value, ry.value

    def pointer_buttons(self) -> int:
        """The button mask of XQueryPointer (Button1Mask = 1 << 8 ...)."""
        root = Window()
        child = Window()
        rx, ry, wx, wy = c_int(), c_int(), c_int(), c_int()
        mask = c_uint()
        self.x.XQueryPointer(
            self.ptr, self.root, byref(root), byref(child), byref(rx), byref(ry),
            byref(wx), byref(wy), byref(mask),
        )
        return int(mask.value)

    def keymap(self) -> bytes:
        """XQueryKeymap: 32 bytes, bit ``k`` set while keycode ``k`` is down."""
        buf = (c_char * 32)()
        self.x.XQueryKeymap(self.ptr, buf)
        return bytes(buf)

    def keycode(self, keysym: int) -> int:
        return int(self.x.XKeysymToKeycode(self.ptr, keysym))

    def modifier_masks(self) -> dict[int, int]:
        """Keycode -> modifier mask bit, from the server's modifier mapping."""
        mapping = self.x.XGetModifierMapping(self.ptr)
        if not mapping:
            return {}
        try:
            per = mapping.contents.max_keypermod
            codes = mapping.contents.modifiermap
            out: dict[int, int] = {}
            for index in range(8):
                for j in range(per):
                    code = codes[index * per + j]
                    if code:
                        out.setdefault(int(code), 1 << index)
            return out
        finally:
            self.x.XFreeModifiermap(mapping)

    def grab_key(self, keycode: int, modifiers: int) -> None:
        self.x.XGrabKey(self.ptr, keycode, modifiers, self.root, 1, GRAB_MODE_ASYNC, GRAB_MODE_ASYNC)

    def ungrab_key(self, keycode: int, modifiers: int) -> None:
        self.x.XUngrabKey(self.ptr, keycode, modifiers, self.root)

    def fileno(self) -> int:
        return int(self.x.XConnectionNumber(self.ptr))

    def pending_key_presses(self) -> list[tuple[int, int]]:
        """Drain the event queue; ``(keycode, state)`` of every KeyPress in it."""
        presses: list[tuple[int, int]] = []
        event = XEvent()
        while self.x.XPending(self.ptr) > 0:
            self.x.XNextEvent(self.ptr, byref(event))
            if event.type == KEY_PRESS:
                presses.append((int(event.xkey.keycode), int(event.xkey.state)))
        return presses

    def flush(self) -> None:
        self.x.XFlush(self.ptr)
