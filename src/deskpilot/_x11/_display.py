"""One Xlib connection: errors turned into exceptions, and the calls its users share.

Every connection is watched by :mod:`deskpilot._x11._error_handler` (the process's only
X error handler), so an X error becomes a value to check instead of a process exit:
:meth:`XDisplay.sync` raises the first one, :meth:`XDisplay.take_errors` returns them,
and :meth:`XDisplay.trap` collects those caused inside a ``with`` block.

Beyond that, the small helpers several users need: window properties, the input focus
and window tree, the pointer, the keyboard state, passive key grabs and the event queue
(the kill switch and the active-window reader of :mod:`deskpilot.safety`), and the names
of the RandR outputs (which X server this is: :mod:`deskpilot.capture._visibility`).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import threading
from collections.abc import Iterator
from ctypes import POINTER, byref, c_char, c_int, c_long, c_short, c_ubyte, c_uint, c_ulong

from deskpilot._errors import PlatformError
from deskpilot._x11 import _error_handler
from deskpilot._x11._error_handler import XError
from deskpilot._x11._lib import Atom, Window, XEvent, library

__all__ = ["XDisplay"]

# X.h constants used here.
_KEY_PRESS = 2
_GRAB_MODE_ASYNC = 1
_ANY_PROPERTY_TYPE = 0
_SUCCESS = 0

# Xlib may hand a closed connection's Display* address to the next XOpenDisplay. Opening
# (XOpenDisplay + watch) and closing (XCloseDisplay + forget) are serialized so that one
# thread's close never forgets the address another thread has just opened and watched.
_open_close_lock = threading.Lock()


class XDisplay:
    """An open X connection; ``error`` is the exception class its failures raise."""

    def __init__(self, error: type[PlatformError] = PlatformError, name: str | None = None) -> None:
        self.error = error
        self.x11 = library("X11")
        # Before the first request: an error on this connection must never reach Xlib's
        # exit-on-error default handler.
        _error_handler.install()
        raw = name.encode() if name is not None else None
        with _open_close_lock:
            ptr = self.x11.XOpenDisplay(raw)
            if ptr:
                _error_handler.watch(int(ptr))
        if not ptr:
            shown = name if name is not None else os.environ.get("DISPLAY")
            raise error(
                "no X display: is DISPLAY set?" if not shown else f"cannot open X display {shown!r}",
                display=shown,
                call="XOpenDisplay",
            )
        self.ptr: int = int(ptr)
        self.lock = threading.RLock()
        screen = int(self.x11.XDefaultScreen(self.ptr))
        self.root: int = int(self.x11.XDefaultRootWindow(self.ptr))
        self.width: int = int(self.x11.XDisplayWidth(self.ptr, screen))
        self.height: int = int(self.x11.XDisplayHeight(self.ptr, screen))
        self._atoms: dict[str, int] = {}

    @property
    def closed(self) -> bool:
        return self.ptr == 0

    def handle(self) -> int:
        """The Display* for a call; raises if the connection was closed."""
        if self.ptr == 0:
            raise self.error("X display connection is closed", call="handle")
        return self.ptr

    def sync(self, call: str) -> None:
        """Round-trip to the server and raise the first X error our requests caused."""
        self.x11.XSync(self.handle(), 0)
        self.raise_pending(call)

    def raise_pending(self, call: str) -> None:
        """Raise the first X error recorded for this connection (dropping the rest)."""
        errors = _error_handler.take(self.ptr)
        if not errors:
            return
        first = errors[0]
        raise self.error(
            f"{call} failed: {self.error_text(first.code)} (request {first.request}.{first.minor})",
            call=call,
            error_code=first.code,
            request_code=first.request,
            minor_code=first.minor,
            resource=first.resource,
        )

    def take_errors(self) -> list[XError]:
        """Round-trip, then return (and forget) the X errors our requests caused."""
        self.x11.XSync(self.handle(), 0)
        return _error_handler.take(self.ptr)

    @contextlib.contextmanager
    def trap(self) -> Iterator[list[XError]]:
        """Collect the X errors that the requests made inside the block cause.

        Earlier requests' errors are dropped first (after a round trip), so they are not
        blamed on the block; on leaving, a round trip makes the server answer and the
        yielded list is filled. Nothing is raised: the caller decides what an error means.
        """
        self.take_errors()
        errors: list[XError] = []
        try:
            yield errors
        finally:
            if not self.closed:
                errors.extend(self.take_errors())

    def error_text(self, code: int) -> str:
        """Xlib's text for an X error code (``BadAccess (attempt to access private resource denied)``)."""
        buf = ctypes.create_string_buffer(256)
        self.x11.XGetErrorText(self.handle(), code, buf, len(buf))
        return buf.value.decode(errors="replace") or f"X error {code}"

    def close(self) -> None:
        """Close the connection. Idempotent."""
        with self.lock:
            if self.ptr:
                ptr, self.ptr = self.ptr, 0
                # Forgotten only after the close: XCloseDisplay flushes our last requests,
                # and their errors must still be recorded, not reach Xlib's default.
                with _open_close_lock:
                    self.x11.XCloseDisplay(ptr)
                    _error_handler.forget(ptr)

    def __enter__(self) -> XDisplay:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- properties and windows ------------------------------------------------------

    def atom(self, name: str) -> int:
        """The atom ``name`` (interned, cached per connection)."""
        value = self._atoms.get(name)
        if value is None:
            value = self._atoms[name] = int(self.x11.XInternAtom(self.handle(), name.encode(), 0))
        return value

    def read_property(self, window: int, name: str, *, max_longs: int = 1024) -> tuple[int, bytes] | None:
        """``(format, raw bytes)`` of a window property, or None when it is absent.

        Format-32 data comes back from Xlib as C longs (8 bytes on LP64); it is returned
        as such and :meth:`property_ints` unpacks it. A window that no longer exists
        reads as absent (its BadWindow stays recorded for :meth:`take_errors`).
        """
        actual_type = Atom()
        actual_format = c_int()
        nitems = c_ulong()
        after = c_ulong()
        data = POINTER(c_ubyte)()
        status = self.x11.XGetWindowProperty(
            self.handle(), window, self.atom(name), 0, max_longs, 0, _ANY_PROPERTY_TYPE,
            byref(actual_type), byref(actual_format), byref(nitems), byref(after), byref(data),
        )
        try:
            if status != _SUCCESS or not actual_type.value or not data:
                return None
            fmt = actual_format.value
            unit = {8: 1, 16: ctypes.sizeof(c_short), 32: ctypes.sizeof(c_long)}.get(fmt, 1)
            return fmt, ctypes.string_at(data, nitems.value * unit)
        finally:
            if data:
                self.x11.XFree(data)

    def property_ints(self, window: int, name: str) -> list[int]:
        """A format-32 property as integers ([] when absent or of another format)."""
        prop = self.read_property(window, name)
        if prop is None or prop[0] != 32:
            return []
        raw = prop[1]
        count = len(raw) // ctypes.sizeof(c_ulong)
        return list((c_ulong * count).from_buffer_copy(raw[: count * ctypes.sizeof(c_ulong)]))

    def property_text(self, window: int, name: str) -> str | None:
        """A format-8 property as text (None when absent or of another format)."""
        prop = self.read_property(window, name)
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
        self.x11.XGetInputFocus(self.handle(), byref(window), byref(revert))
        return int(window.value)

    def parent(self, window: int) -> int:
        """The parent of ``window`` (0 for the root or on error)."""
        root = Window()
        parent = Window()
        children = POINTER(Window)()
        count = c_uint()
        ok = self.x11.XQueryTree(
            self.handle(), window, byref(root), byref(parent), byref(children), byref(count)
        )
        if children:
            self.x11.XFree(children)
        if not ok or window == root.value:
            return 0
        return int(parent.value)

    # -- pointer and keyboard -------------------------------------------------------

    def query_pointer(self) -> tuple[int, int, int]:
        """``(x, y, mask)``: the pointer on the root window and XQueryPointer's button and
        modifier mask (Button1Mask = 1 << 8 ...)."""
        root = Window()
        child = Window()
        rx, ry, wx, wy = c_int(), c_int(), c_int(), c_int()
        mask = c_uint()
        self.x11.XQueryPointer(
            self.handle(), self.root, byref(root), byref(child), byref(rx), byref(ry),
            byref(wx), byref(wy), byref(mask),
        )
        return rx.value, ry.value, int(mask.value)

    def pointer(self) -> tuple[int, int]:
        """The pointer position on the root window."""
        x, y, _ = self.query_pointer()
        return x, y

    def pointer_buttons(self) -> int:
        """The button mask of XQueryPointer (Button1Mask = 1 << 8 ...)."""
        return self.query_pointer()[2]

    def keymap(self) -> bytes:
        """XQueryKeymap: 32 bytes, bit ``k`` set while keycode ``k`` is down."""
        buf = (c_char * 32)()
        self.x11.XQueryKeymap(self.handle(), buf)
        return bytes(buf)

    def keycode(self, keysym: int) -> int:
        """The keycode that produces ``keysym`` (0: none does)."""
        return int(self.x11.XKeysymToKeycode(self.handle(), keysym))

    def modifier_masks(self) -> dict[int, int]:
        """Keycode -> modifier mask bit, from the server's modifier mapping."""
        mapping = self.x11.XGetModifierMapping(self.handle())
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
            self.x11.XFreeModifiermap(mapping)

    def grab_key(self, keycode: int, modifiers: int) -> None:
        """A passive grab of ``keycode`` + ``modifiers`` on the root window (asynchronous:
        a conflict with another client's grab arrives later as BadAccess, see :meth:`trap`)."""
        self.x11.XGrabKey(
            self.handle(), keycode, modifiers, self.root, 1, _GRAB_MODE_ASYNC, _GRAB_MODE_ASYNC
        )

    def ungrab_key(self, keycode: int, modifiers: int) -> None:
        self.x11.XUngrabKey(self.handle(), keycode, modifiers, self.root)

    def fileno(self) -> int:
        """The connection's socket (readable when events or replies arrive)."""
        return int(self.x11.XConnectionNumber(self.handle()))

    def pending_key_presses(self) -> list[tuple[int, int]]:
        """Drain the event queue; ``(keycode, state)`` of every KeyPress in it."""
        presses: list[tuple[int, int]] = []
        event = XEvent()
        ptr = self.handle()
        while self.x11.XPending(ptr) > 0:
            self.x11.XNextEvent(ptr, byref(event))
            if event.type == _KEY_PRESS:
                presses.append((int(event.xkey.keycode), int(event.xkey.state)))
        return presses

    def flush(self) -> None:
        self.x11.XFlush(self.handle())

    # -- RandR ------------------------------------------------------------------------

    def randr_output_names(self) -> list[str] | None:
        """The names of the screen's RandR outputs, in the server's order: ``XWAYLAND0``,
        ``XWAYLAND1``... on Xwayland, ``screen`` on Xvfb, connectors (``HDMI-1``, ``eDP-1``,
        ``DUMMY0``) on Xorg. None when the server has no RANDR extension.

        Loads libXrandr on first use (a :class:`PlatformError` names it when it is not
        installed). Reads the server's current configuration: no hardware probe.
        """
        xrandr = library("Xrandr")
        with self.lock:
            ptr = self.handle()
            event_base, error_base = c_int(), c_int()
            if not xrandr.XRRQueryExtension(ptr, byref(event_base), byref(error_base)):
                return None
            resources = xrandr.XRRGetScreenResourcesCurrent(ptr, self.root)
            if not resources:
                self.raise_pending("XRRGetScreenResourcesCurrent")
                raise self.error("XRRGetScreenResourcesCurrent returned no resources",
                                 call="XRRGetScreenResourcesCurrent")
            try:
                names: list[str] = []
                res = resources.contents
                for index in range(res.noutput):
                    info = xrandr.XRRGetOutputInfo(ptr, resources, res.outputs[index])
                    if not info:  # the output went away between the two requests
                        continue
                    try:
                        raw = ctypes.string_at(info.contents.name, info.contents.nameLen)
                    finally:
                        xrandr.XRRFreeOutputInfo(info)
                    names.append(raw.decode("latin-1"))
            finally:
                xrandr.XRRFreeScreenResources(resources)
            self.raise_pending("XRRGetOutputInfo")
            return names
