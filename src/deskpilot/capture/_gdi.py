"""Windows GDI capture backend (ctypes): pixels into a DIB section, cursor from its icon.

Pixels
    ``GetDC(NULL)`` (the screen) -> ``CreateCompatibleDC`` -> ``CreateDIBSection`` (top-down
    32 bpp BGRA, ``biHeight`` negative) selected into the memory DC -> ``BitBlt`` with
    ``SRCCOPY | CAPTUREBLT`` (layered windows included) -> ``GdiFlush`` -> a numpy view on
    the DIB's own memory: no copy. The DIB is created once per size and reused; when the
    size changes the old one is selected out and deleted. The alpha byte of captured pixels
    is whatever GDI leaves there (normally 0): treat the frame as BGRX.

    With ``scale_mode="gdi"``, :meth:`GdiBackend.grab_scaled` lets GDI downscale like the
    seeds did: ``SetStretchBltMode(HALFTONE)`` + ``SetBrushOrgEx(0, 0)`` (required after
    selecting HALFTONE) + ``StretchBlt``. The default, ``"native"``, always captures at
    physical resolution and leaves scaling to :mod:`deskpilot.imaging` (exact area
    averaging, cursor composited before downscaling).

Monitors
    ``EnumDisplayMonitors`` + ``GetMonitorInfoW``: virtual-desktop rectangles (origins can
    be negative, left of or above the primary monitor), the primary flag and the device
    name. Indexes are 1-based in *enumeration order*, the order python-mss uses on Windows,
    so ``monitor=N`` names the same screen with ``backend="gdi"`` and ``backend="mss"``;
    use :attr:`~deskpilot.capture._base.Monitor.primary` to find the primary one.

Cursor
    ``GetCursorInfo`` (``CURSOR_SHOWING``) -> ``GetIconInfo`` -> ``GetObjectW`` + ``GetDIBits``,
    cached per cursor handle (an LRU of ``cursor_cache_size`` shapes). The two bitmaps
    ``GetIconInfo`` creates are always deleted. Kinds (see ``capture/_base.py``):

    * ``"straight"``: a 32 bpp colour bitmap with a non-zero alpha channel. Windows keeps
      icon/cursor alpha *non-premultiplied* (DrawIconEx blends it with SRC_ALPHA /
      INV_SRC_ALPHA; OBS's cursor capture and wxWidgets treat it the same way).
    * ``"masked"``: a colour bitmap without alpha; the AND mask goes into the alpha byte
      (0 = opaque colour replaces the screen, 0xFF = colour is XORed onto the screen).
    * ``"mono"``: no colour bitmap; the mask is double height (AND on top, XOR below) and
      becomes an HxWx2 array of 0/1 planes.

    An animated cursor is read once per handle (its first frame). The image has the size
    ``GetIconInfo`` reports; where Windows draws cursors enlarged (the accessibility
    "pointer size" setting, some per-monitor DPI cases) the composited cursor can be
    smaller than the one on screen.

Call :meth:`GdiBackend.close` (or use ``with``) to release the DCs and the DIB.
"""

from __future__ import annotations

import contextlib
import ctypes
import threading
from collections import OrderedDict
from types import TracebackType
from typing import TYPE_CHECKING, Literal

import numpy as np
import numpy.typing as npt

from deskpilot._errors import CaptureError, ConfigError, PlatformError
from deskpilot._win32 import (
    BI_RGB,
    BITMAP,
    BITMAPINFO,
    CAPTUREBLT,
    CURSOR_SHOWING,
    CURSORINFO,
    DIB_RGB_COLORS,
    HALFTONE,
    ICONINFO,
    MONITORENUMPROC,
    MONITORINFOEXW,
    MONITORINFOF_PRIMARY,
    MONOBITMAPINFO,
    RECT,
    SRCCOPY,
    Library,
    system_library,
)
from deskpilot._win32.dpi import DpiAwareness, ensure_dpi_awareness
from deskpilot.capture._base import CaptureBackend, CursorImage, CursorKind, Monitor
from deskpilot.geometry import Rect

__all__ = ["GdiBackend", "ScaleMode"]

ScaleMode = Literal["native", "gdi"]
Pixels = npt.NDArray[np.uint8]
_CachedCursor = tuple[Pixels, CursorKind, tuple[int, int]]


class GdiBackend:
    """Capture backend over GDI; see the module docstring for the call sequence.

    ``user32``/``gdi32``/``shcore`` are injectable (recorded fakes in tests); by default the
    system DLLs are used. Unless ``dpi_awareness=False``, the process is made
    per-monitor-v2 DPI aware first; the outcome is kept in :attr:`dpi`.
    """

    name = "gdi"
    #: Until ``__init__`` has allocated: a backend whose constructor failed has nothing to free.
    _closed = True

    def __init__(
        self,
        *,
        scale_mode: ScaleMode = "native",
        capture_layered: bool = True,
        cursor_cache_size: int = 32,
        dpi_awareness: bool = True,
        user32: Library | None = None,
        gdi32: Library | None = None,
        shcore: Library | None = None,
    ) -> None:
        if scale_mode not in ("native", "gdi"):
            raise ConfigError(f"scale_mode must be 'native' or 'gdi', not {scale_mode!r}")
        if cursor_cache_size < 1:
            raise ConfigError(f"cursor_cache_size must be at least 1, not {cursor_cache_size}")
        self.scale_mode: ScaleMode = scale_mode
        self._rop = SRCCOPY | (CAPTUREBLT if capture_layered else 0)
        self._cursor_cache_size = cursor_cache_size
        self._user32 = user32 if user32 is not None else system_library("user32")
        self._gdi32 = gdi32 if gdi32 is not None else system_library("gdi32")
        # DPI first: every size and coordinate below depends on it.
        self.dpi: DpiAwareness | None = None
        if dpi_awareness:
            self.dpi = ensure_dpi_awareness(user32=user32, shcore=shcore)
        self._lock = threading.Lock()
        self._closed = False
        self._screen_dc: int | None = None
        self._memory_dc: int | None = None
        self._original_bitmap: int | None = None  # what the memory DC held before our DIB
        self._dib: int | None = None
        self._dib_size: tuple[int, int] | None = None
        self._pixels: Pixels | None = None
        self._halftone = False
        self._cursors: OrderedDict[int, _CachedCursor] = OrderedDict()

    # -- context manager ----------------------------------------------------------------
    def __enter__(self) -> GdiBackend:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- monitors -----------------------------------------------------------------------
    def monitors(self) -> list[Monitor]:
        """Every monitor in enumeration order (1-based), primary flagged."""
        self._check_open()
        found: list[int] = []
        failures: list[BaseException] = []

        def collect(hmonitor: int | None, hdc: int | None, rect: object, data: int) -> int:
            # An exception escaping a ctypes callback is printed and lost, so keep it.
            try:
                found.append(int(hmonitor or 0))
            except BaseException as exc:  # pragma: no cover - defensive
                failures.append(exc)
                return 0
            return 1

        callback = MONITORENUMPROC(collect)
        self._user32.EnumDisplayMonitors(None, None, callback, 0)
        if failures:  # pragma: no cover - defensive
            raise CaptureError(
                "enumerating monitors failed", function="EnumDisplayMonitors"
            ) from failures[0]
        monitors: list[Monitor] = []
        for index, hmonitor in enumerate(found, start=1):
            info = MONITORINFOEXW()
            info.cbSize = ctypes.sizeof(MONITORINFOEXW)
            self._user32.GetMonitorInfoW(hmonitor, info)
            bounds: RECT = info.rcMonitor
            rect = Rect(
                bounds.left, bounds.top, bounds.right - bounds.left, bounds.bottom - bounds.top
            )
            primary = bool(info.dwFlags & MONITORINFOF_PRIMARY)
            monitors.append(
                Monitor(index=index, rect=rect, primary=primary, name=info.device_name())
            )
        if not monitors:
            raise CaptureError(
                "EnumDisplayMonitors reported no monitors", function="EnumDisplayMonitors"
            )
        return monitors

    # -- pixels -------------------------------------------------------------------------
    def grab_bgra(self, rect: Rect) -> Pixels:
        """``rect`` at physical resolution as HxWx4 BGRX: a view on the reused DIB.

        The view stays valid until the next grab of a different size or :meth:`close`
        (both free the DIB memory it points into); copy it to keep it longer.
        """
        return self._grab(rect, rect.width, rect.height)

    def grab_scaled(self, rect: Rect, size: tuple[int, int]) -> Pixels:
        """``rect`` resampled by GDI (StretchBlt HALFTONE) to ``size`` = (width, height).

        Same buffer rules as :meth:`grab_bgra`. Equal sizes use a plain BitBlt. Works
        whatever :attr:`scale_mode` is; ``scale_mode`` only records which path a caller
        (the Capturer's ``scaling`` option) prefers.
        """
        width, height = (int(v) for v in size)
        if width <= 0 or height <= 0:
            raise CaptureError(
                f"destination size must be positive, got {width}x{height}", size=(width, height)
            )
        return self._grab(rect, width, height)

    def _grab(self, rect: Rect, width: int, height: int) -> Pixels:
        with self._lock:
            screen_dc, memory_dc = self._device_contexts()
            pixels = self._dib_view(memory_dc, width, height)
            gdi = self._gdi32
            if (width, height) == (rect.width, rect.height):
                gdi.BitBlt(
                    memory_dc, 0, 0, width, height, screen_dc, rect.left, rect.top, self._rop
                )
            else:
                if not self._halftone:
                    # HALFTONE is area averaging; MSDN requires resetting the brush origin
                    # after selecting it. Both are memory-DC state, set once.
                    gdi.SetStretchBltMode(memory_dc, HALFTONE)
                    gdi.SetBrushOrgEx(memory_dc, 0, 0, None)
                    self._halftone = True
                gdi.StretchBlt(
                    memory_dc, 0, 0, width, height,
                    screen_dc, rect.left, rect.top, rect.width, rect.height,
                    self._rop,
                )  # fmt: skip
            # GDI may batch drawing calls: flush before reading the DIB's memory.
            gdi.GdiFlush()
            return pixels

    def _check_open(self) -> None:
        if self._closed:
            raise CaptureError("the GDI capture backend is closed")

    def _device_contexts(self) -> tuple[int, int]:
        self._check_open()
        if self._screen_dc is None:
            screen_dc = int(self._user32.GetDC(None))
            try:
                memory_dc = int(self._gdi32.CreateCompatibleDC(screen_dc))
            except BaseException:
                self._user32.ReleaseDC(None, screen_dc)
                raise
            self._screen_dc, self._memory_dc = screen_dc, memory_dc
        assert self._memory_dc is not None
        return self._screen_dc, self._memory_dc

    def _dib_view(self, memory_dc: int, width: int, height: int) -> Pixels:
        if self._dib_size == (width, height) and self._pixels is not None:
            return self._pixels
        self._release_dib()
        info = BITMAPINFO()
        header = info.bmiHeader
        header.biSize = ctypes.sizeof(header)
        header.biWidth = width
        header.biHeight = -height  # negative: top-down rows, row 0 is the top of the image
        header.biPlanes = 1
        header.biBitCount = 32
        header.biCompression = BI_RGB
        bits = ctypes.c_void_p()
        dib = int(self._gdi32.CreateDIBSection(memory_dc, info, DIB_RGB_COLORS, bits, None, 0))
        try:
            if not bits.value:
                raise CaptureError(
                    "CreateDIBSection returned no pixel memory", function="CreateDIBSection"
                )
            previous = self._gdi32.SelectObject(memory_dc, dib)
        except BaseException:
            self._gdi32.DeleteObject(dib)
            raise
        if self._original_bitmap is None:
            self._original_bitmap = int(previous)
        self._dib, self._dib_size = dib, (width, height)
        memory = (ctypes.c_uint8 * (width * height * 4)).from_address(bits.value)
        self._pixels = np.frombuffer(memoryview(memory), dtype=np.uint8).reshape(height, width, 4)
        return self._pixels

    def _release_dib(self) -> None:
        """Select the original bitmap back into the memory DC and delete our DIB."""
        dib, self._dib, self._dib_size, self._pixels = self._dib, None, None, None
        if dib is None:
            return
        try:
            if self._memory_dc is not None and self._original_bitmap is not None:
                # A bitmap still selected into a DC cannot be deleted.
                self._gdi32.SelectObject(self._memory_dc, self._original_bitmap)
        finally:
            self._gdi32.DeleteObject(dib)

    # -- cursor -------------------------------------------------------------------------
    def cursor(self) -> CursorImage | None:
        """The cursor's image and position, or None while it is hidden."""
        self._check_open()
        info = CURSORINFO()
        info.cbSize = ctypes.sizeof(CURSORINFO)
        self._user32.GetCursorInfo(info)
        if not info.flags & CURSOR_SHOWING or not info.hCursor:
            return None
        handle = int(info.hCursor)
        position = (int(info.ptScreenPos.x), int(info.ptScreenPos.y))
        with self._lock:
            cached = self._cursors.get(handle)
            if cached is None:
                cached = self._read_cursor(handle)
                self._cursors[handle] = cached
                while len(self._cursors) > self._cursor_cache_size:
                    self._cursors.popitem(last=False)
            else:
                self._cursors.move_to_end(handle)
        pixels, kind, hotspot = cached
        return CursorImage(
            pixels=pixels, kind=kind, hotspot=hotspot, position=position, serial=handle
        )

    def _read_cursor(self, handle: int) -> _CachedCursor:
        screen_dc, _ = self._device_contexts()
        icon = ICONINFO()
        self._user32.GetIconInfo(handle, icon)
        # GetIconInfo creates two bitmaps that the caller owns: delete them whatever happens.
        try:
            if icon.hbmColor:
                pixels, kind = self._colour_cursor(screen_dc, int(icon.hbmColor), icon.hbmMask)
            elif icon.hbmMask:
                pixels, kind = self._mono_cursor(screen_dc, int(icon.hbmMask))
            else:
                raise CaptureError(
                    "GetIconInfo returned neither a colour nor a mask bitmap", cursor=handle
                )
        finally:
            self._delete_objects(icon.hbmColor, icon.hbmMask)
        pixels.setflags(write=False)  # shared by every CursorImage of this handle
        return pixels, kind, (int(icon.xHotspot), int(icon.yHotspot))

    def _delete_objects(self, *handles: int | None) -> None:
        """DeleteObject each handle; all are attempted, the first failure is raised."""
        failure: PlatformError | None = None
        for handle in handles:
            if not handle:
                continue
            try:
                self._gdi32.DeleteObject(handle)
            except PlatformError as exc:
                failure = failure or exc
        if failure is not None:
            raise failure

    def _bitmap_size(self, bitmap: int) -> tuple[int, int, int]:
        info = BITMAP()
        self._gdi32.GetObjectW(bitmap, ctypes.sizeof(BITMAP), ctypes.byref(info))
        if info.bmWidth <= 0 or info.bmHeight <= 0:
            raise CaptureError(f"cursor bitmap has no pixels ({info.bmWidth}x{info.bmHeight})")
        return int(info.bmWidth), int(info.bmHeight), int(info.bmBitsPixel)

    def _colour_cursor(self, dc: int, colour: int, mask: int | None) -> tuple[Pixels, CursorKind]:
        width, height, bits_per_pixel = self._bitmap_size(colour)
        pixels = self._bits_32(dc, colour, width, height)
        if bits_per_pixel == 32 and pixels[..., 3].any():
            return pixels, "straight"
        # No alpha: the AND mask decides (1 = XOR onto the screen, 0 = replace).
        if mask:
            pixels[..., 3] = self._bits_1(dc, int(mask), width, height) * np.uint8(0xFF)
        else:
            pixels[..., 3] = 0
        return pixels, "masked"

    def _mono_cursor(self, dc: int, mask: int) -> tuple[Pixels, CursorKind]:
        width, double_height, _ = self._bitmap_size(mask)
        if double_height % 2:
            raise CaptureError(f"monochrome cursor mask has odd height {double_height}")
        height = double_height // 2
        planes = self._bits_1(dc, mask, width, double_height)
        return np.ascontiguousarray(np.stack((planes[:height], planes[height:]), axis=-1)), "mono"

    def _bits_32(self, dc: int, bitmap: int, width: int, height: int) -> Pixels:
        info = BITMAPINFO()
        header = info.bmiHeader
        header.biSize = ctypes.sizeof(header)
        header.biWidth, header.biHeight = width, -height
        header.biPlanes, header.biBitCount, header.biCompression = 1, 32, BI_RGB
        pixels = np.zeros((height, width, 4), dtype=np.uint8)
        lines = self._gdi32.GetDIBits(
            dc, bitmap, 0, height, pixels.ctypes.data, ctypes.byref(info), DIB_RGB_COLORS
        )
        if int(lines) != height:
            raise CaptureError(f"GetDIBits copied {lines} of {height} rows", function="GetDIBits")
        return pixels

    def _bits_1(self, dc: int, bitmap: int, width: int, height: int) -> Pixels:
        """A 1 bpp bitmap as an HxW array: 1 where the pixel is white (mask bit set)."""
        info = MONOBITMAPINFO()
        header = info.bmiHeader
        header.biSize = ctypes.sizeof(header)
        header.biWidth, header.biHeight = width, -height
        header.biPlanes, header.biBitCount, header.biCompression = 1, 1, BI_RGB
        stride = (width + 31) // 32 * 4  # DIB rows are padded to 32 bits
        raw = np.zeros((height, stride), dtype=np.uint8)
        lines = self._gdi32.GetDIBits(
            dc, bitmap, 0, height, raw.ctypes.data, ctypes.byref(info), DIB_RGB_COLORS
        )
        if int(lines) != height:
            raise CaptureError(f"GetDIBits copied {lines} of {height} rows", function="GetDIBits")
        bits = np.unpackbits(raw, axis=1)[:, :width]  # most significant bit = leftmost pixel
        # GetDIBits fills the colour table: index 1 is white for masks, but follow the
        # table rather than assume it (a bit means "white" in AND/XOR mask terms).
        zero, one = info.bmiColors[0], info.bmiColors[1]
        if zero.rgbRed + zero.rgbGreen + zero.rgbBlue > one.rgbRed + one.rgbGreen + one.rgbBlue:
            bits ^= 1
        return np.ascontiguousarray(bits)

    # -- cleanup ------------------------------------------------------------------------
    def close(self) -> None:
        """Release the DIB and both DCs. Idempotent; every release is attempted."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._cursors.clear()
            failure: BaseException | None = None
            steps = (
                self._release_dib,
                lambda: self._memory_dc is not None and self._gdi32.DeleteDC(self._memory_dc),
                lambda: (
                    self._screen_dc is not None and self._user32.ReleaseDC(None, self._screen_dc)
                ),
            )
            for step in steps:
                try:
                    step()
                except PlatformError as exc:
                    failure = failure or exc
            self._memory_dc = self._screen_dc = self._original_bitmap = None
            if failure is not None:
                raise failure

    def __del__(self) -> None:
        # A forgotten backend still gives its DCs and DIB back when collected, not at
        # process exit. ``_closed`` is the class's True when __init__ failed before allocating.
        if not self._closed:
            with contextlib.suppress(Exception):
                self.close()


if TYPE_CHECKING:  # GdiBackend satisfies the protocol the Capturer facade expects

    def _is_capture_backend(backend: GdiBackend) -> CaptureBackend:
        return backend
