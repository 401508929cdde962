"""The mss capture backend (every OS), with the X11 cursor read through XFixes.

Pixels come from one long-lived :class:`mss.MSS` instance (XShmGetImage over XCB on
Linux, GDI on Windows, CoreGraphics on macOS); its fresh ``bytearray`` per grab is
handed on as a zero-copy numpy view. mss's own cursor support composites in pure
Python, so it stays off: on X11 the cursor is read here with
``XFixesGetCursorImage`` on a separate Xlib connection, converted once per cursor
shape (``cursor_serial``) and composited by :mod:`deskpilot.imaging`. macOS and
Windows get no cursor from this backend (use ``backend="gdi"`` on Windows).
"""

from __future__ import annotations

import contextlib
import ctypes
import sys
import threading
import warnings
from typing import Any

import numpy as np
import numpy.typing as npt

from deskpilot._errors import CaptureError, PlatformError
from deskpilot.capture._base import CursorImage, Monitor
from deskpilot.geometry import Rect

__all__ = ["MssBackend", "xfixes_pixels_to_bgra"]

Pixels = npt.NDArray[np.uint8]


def xfixes_pixels_to_bgra(pixels: npt.NDArray[np.unsignedinteger[Any]], width: int, height: int) -> Pixels:
    """XFixes cursor pixels (one ARGB32 per *unsigned long*, premultiplied) -> HxWx4 BGRA.

    The value's low 32 bits hold 0xAARRGGBB; stored little-endian, those are the bytes
    B, G, R, A. ``unsigned long`` is 8 bytes on LP64 and 4 on 32-bit builds; both work.
    """
    argb = np.asarray(pixels).reshape(-1)[: width * height].astype("<u4", copy=True)
    return argb.view(np.uint8).reshape(height, width, 4)


class _XFixesCursor:
    """Reads the pointer image over an Xlib connection of its own (opened lazily)."""

    def __init__(self) -> None:
        from deskpilot._x11 import XDisplay, library

        self._xfixes = library("Xfixes")
        self._display = XDisplay(CaptureError)
        ev, err = ctypes.c_int(), ctypes.c_int()
        if not self._xfixes.XFixesQueryExtension(self._display.ptr, ctypes.byref(ev), ctypes.byref(err)):
            self._display.close()
            raise CaptureError("the X server has no XFIXES extension", call="XFixesQueryExtension")
        major, minor = ctypes.c_int(6), ctypes.c_int(0)
        self._xfixes.XFixesQueryVersion(self._display.ptr, ctypes.byref(major), ctypes.byref(minor))
        self._cached: tuple[int, Pixels, tuple[int, int]] | None = None  # serial, pixels, hotspot

    def read(self) -> CursorImage | None:
        d = self._display
        with d.lock:
            image = self._xfixes.XFixesGetCursorImage(d.handle())
            if not image:
                d.raise_pending("XFixesGetCursorImage")
                return None
            try:
                img = image.contents
                width, height = int(img.width), int(img.height)
                serial = int(img.cursor_serial)
                position = (int(img.x), int(img.y))
                cached = self._cached
                if cached is None or cached[0] != serial or cached[1].shape[:2] != (height, width):
                    if width == 0 or height == 0:
                        return None
                    raw = np.ctypeslib.as_array(img.pixels, shape=(width * height,))
                    pixels = xfixes_pixels_to_bgra(raw, width, height)
                    pixels.flags.writeable = False  # shared by every CursorImage of this shape
                    cached = self._cached = (serial, pixels, (int(img.xhot), int(img.yhot)))
            finally:
                d.x11.XFree(image)
        _, pixels, hotspot = cached
        return CursorImage(pixels=pixels, kind="premultiplied", hotspot=hotspot, position=position, serial=serial)

    def close(self) -> None:
        self._display.close()


class MssBackend:
    """Capture through python-mss; ``cursor=False`` skips opening the XFixes connection.
    Where XFixes cannot be used, the first :meth:`cursor` call warns and every call
    returns None (frames without the cursor)."""

    name = "mss"
    #: Until ``__init__`` has opened: a backend whose constructor failed has nothing to free.
    _closed = True

    def __init__(self, *, cursor: bool = True) -> None:
        import mss
        from mss.exception import ScreenShotError

        self._error = ScreenShotError
        self._lock = threading.Lock()
        try:
            self._mss: Any = mss.MSS()
        except ScreenShotError as exc:
            raise self._translate(exc, "open") from exc
        self._want_cursor = cursor and sys.platform.startswith("linux")
        self._cursor: _XFixesCursor | None = None
        self._closed = False

    @staticmethod
    def _translate(exc: BaseException, what: str) -> CaptureError:
        text = str(exc)
        if "display" in text.lower() and ("open" in text.lower() or "connect" in text.lower()):
            return CaptureError(f"no X display: is DISPLAY set? (mss: {text})", call=f"mss.{what}")
        return CaptureError(f"mss {what} failed: {text}", call=f"mss.{what}")

    def _check_open(self) -> None:
        if self._closed:
            raise CaptureError("the mss capture backend is closed")

    def monitors(self) -> list[Monitor]:
        self._check_open()
        try:
            raw = self._mss.monitors[1:]
        except self._error as exc:
            raise self._translate(exc, "monitors") from exc
        if not raw:
            raise CaptureError("mss found no monitor", call="mss.monitors")
        # X without a RandR primary output flags none: the first monitor then counts as primary.
        flagged = any(m.get("is_primary") for m in raw)
        return [
            Monitor(
                index=i,
                rect=Rect(int(m["left"]), int(m["top"]), int(m["width"]), int(m["height"])),
                primary=bool(m.get("is_primary")) if flagged else i == 1,
                name=str(m.get("name") or m.get("output") or ""),
            )
            for i, m in enumerate(raw, start=1)
        ]

    def grab_bgra(self, rect: Rect) -> Pixels:
        """``rect`` as HxWx4 BGRA: a writable view on mss's buffer for this grab."""
        self._check_open()
        region = {"left": rect.left, "top": rect.top, "width": rect.width, "height": rect.height}
        with self._lock:
            try:
                shot = self._mss.grab(region)
            except self._error as exc:
                raise self._translate(exc, "grab") from exc
        width, height = shot.size
        return np.frombuffer(shot.raw, dtype=np.uint8).reshape(height, width, 4)

    def cursor(self) -> CursorImage | None:
        self._check_open()
        if not self._want_cursor:
            return None
        if self._cursor is None:
            try:
                self._cursor = _XFixesCursor()
            except PlatformError as exc:
                # The cursor is a garnish on the pixels: without XFixes (or libXfixes)
                # every frame is still worth having, so say so once and stop asking; a
                # missing extension will not appear on a retry.
                self._want_cursor = False
                warnings.warn(
                    f"capturing without the mouse cursor: {exc} (cursor=False silences this)",
                    RuntimeWarning,
                    stacklevel=2,
                )
                return None
        return self._cursor.read()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._mss.close()
        finally:
            if self._cursor is not None:
                self._cursor.close()
                self._cursor = None

    def __del__(self) -> None:
        # A forgotten backend still gives its X connections back when collected.
        if not self._closed:
            with contextlib.suppress(Exception):
                self.close()
