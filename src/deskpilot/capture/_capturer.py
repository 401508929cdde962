"""The :class:`Capturer` facade: backend -> cursor -> imaging.prepare -> :class:`Frame`.

One grab is: the backend's raw BGRA of the working area (a monitor or a region of
it), the cursor composited onto that *source* region at physical resolution (exact,
before any downscale), then one fused crop/area-average/BGRA->RGB pass into a reused
output buffer. Backends are imported only when chosen, so a Linux install never
loads Win32 declarations and vice versa.
"""

from __future__ import annotations

import numbers
import operator
import sys
import threading
import time
import warnings
from collections.abc import Sequence
from typing import Any, Literal, SupportsIndex

import numpy as np
import numpy.typing as npt

from deskpilot import imaging
from deskpilot._errors import CaptureError, ConfigError, PlatformError
from deskpilot.capture._base import (
    CaptureBackend,
    CursorDrawingBackend,
    CursorImage,
    Monitor,
    ScalingBackend,
)
from deskpilot.capture._frame import Frame
from deskpilot.geometry import Rect

__all__ = ["BACKENDS", "Capturer", "Scaling", "make_backend"]

#: Backend names accepted by :class:`Capturer` ("auto": gdi on Windows; on Linux mss where the
#: X display sees the screen, mutter on a GNOME Wayland session, wlroots on sway and the like,
#: portal (xdg-desktop-portal ScreenCast) on other Wayland desktops; mss elsewhere).
BACKENDS: tuple[str, ...] = ("auto", "gdi", "mss", "mutter", "portal", "wlroots")

#: ``native``: capture at physical resolution, downscale in deskpilot.imaging (exact area
#: average, cursor composited first). ``gdi``: let GDI StretchBlt HALFTONE scale, as the
#: seeds did (Windows GDI backend only; the cursor is drawn unscaled at its scaled spot).
Scaling = Literal["native", "gdi"]

Pixels = npt.NDArray[np.uint8]

# A pooled output buffer is free when only the pool list, the loop variable and
# sys.getrefcount's own argument refer to it: no Frame (or view of one) holds it.
_FREE_REFCOUNT = 3
_POOL_PER_SIZE = 3


def make_backend(name: str, *, cursor: bool = True) -> CaptureBackend:
    """Instantiate a capture backend by name (imported on demand)."""
    if name == "auto":
        if sys.platform == "win32":
            name = "gdi"
        elif sys.platform.startswith(("linux", "freebsd", "openbsd", "netbsd")):
            from deskpilot.capture._visibility import auto_backend

            name = auto_backend("capture")
        else:
            name = "mss"
    if name == "mutter":
        from deskpilot.capture._mutter import MutterBackend

        return MutterBackend(cursor=cursor)
    if name == "mss":
        from deskpilot.capture._mss import MssBackend

        return MssBackend(cursor=cursor)
    if name == "gdi":
        if sys.platform != "win32":
            raise CaptureError("the gdi capture backend needs Windows; use backend='mss'", platform=sys.platform)
        from deskpilot.capture._gdi import GdiBackend

        return GdiBackend()
    if name == "portal":
        from deskpilot.capture._portal import PortalBackend

        return PortalBackend(cursor=cursor)
    if name == "wlroots":
        from deskpilot.capture._wlroots import WlrootsBackend

        return WlrootsBackend(cursor=cursor)
    raise ConfigError(f"unknown capture backend {name!r} (one of {', '.join(BACKENDS)})", backend=name)


def _size(size: Any) -> tuple[int, int]:
    bad = ConfigError(f"size must be (width, height) with positive integers, got {size!r}", size=repr(size))
    # A numpy array or numpy integers (a size computed with numpy) are accepted; floats are not.
    if isinstance(size, (str, bytes)) or not hasattr(size, "__getitem__") or not hasattr(size, "__len__"):
        raise bad
    if len(size) != 2:
        raise bad
    values: list[int] = []
    for v in size:
        if isinstance(v, bool) or not isinstance(v, numbers.Integral):
            raise bad
        values.append(operator.index(v))
    if min(values) <= 0:
        raise bad
    return (values[0], values[1])


class Capturer:
    """Grabs frames of one working area.

    ``backend``: ``"auto"``, ``"mss"``, ``"gdi"`` or a backend object. ``monitor``: the
    1-based monitor index, default the primary. ``region``: ``(x, y, w, h)`` in physical
    pixels relative to the monitor's top-left, default the whole monitor. ``cursor``:
    composite the pointer into frames. Use as a context manager (or call :meth:`close`).
    """

    def __init__(
        self,
        backend: str | CaptureBackend = "auto",
        monitor: int | None = None,
        region: Sequence[int] | None = None,
        cursor: bool = True,
        *,
        scaling: Scaling = "native",
    ) -> None:
        if scaling not in ("native", "gdi"):
            raise ConfigError(f"scaling must be 'native' or 'gdi', got {scaling!r}")
        self._backend: CaptureBackend = make_backend(backend, cursor=cursor) if isinstance(backend, str) else backend
        try:
            #: The backend that downscales while it copies (scaling="gdi"), else None.
            self._scaler: ScalingBackend | None = None
            if scaling == "gdi":
                if not isinstance(self._backend, ScalingBackend):
                    raise ConfigError(f"scaling='gdi' needs the gdi backend, not {self._backend.name!r}")
                self._scaler = self._backend
            self.scaling: Scaling = scaling
            self.cursor = bool(cursor)
            self.monitor = self._pick_monitor(self._backend.monitors(), monitor)
            self.area = self._area(self.monitor.rect, region)
        except BaseException:
            self._backend.close()
            raise
        self._pool: dict[tuple[int, int], list[Pixels]] = {}
        # One grab at a time: backends hand out views of reused buffers, and the pool's
        # "is this buffer free" check must not race with another grab taking it.
        self._lock = threading.RLock()
        self._closed = False
        #: Why the cursor could not be drawn the first time that happened (None while it
        #: never failed), and how many frames went without it since.
        self.cursor_problem: str | None = None
        self.cursor_failures = 0

    @staticmethod
    def _pick_monitor(monitors: list[Monitor], index: int | None) -> Monitor:
        if index is None:
            return next((m for m in monitors if m.primary), monitors[0])
        if isinstance(index, bool) or not isinstance(index, int) or not 1 <= index <= len(monitors):
            raise ConfigError(
                f"monitor must be 1..{len(monitors)}, got {index!r}",
                monitor=repr(index),
                monitors=[m.rect.as_tuple() for m in monitors],
            )
        return monitors[index - 1]

    @staticmethod
    def _area(monitor: Rect, region: Sequence[int] | None) -> Rect:
        if region is None:
            return monitor
        if (
            isinstance(region, (str, bytes))
            or len(region) != 4
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in region)
        ):
            raise ConfigError(f"region must be (x, y, w, h) integers, got {region!r}", region=repr(region))
        x, y, w, h = (int(v) for v in region)
        if w <= 0 or h <= 0 or x < 0 or y < 0 or x + w > monitor.width or y + h > monitor.height:
            raise ConfigError(
                f"region {(x, y, w, h)} is not inside the {monitor.width}x{monitor.height} monitor",
                region=[x, y, w, h],
                monitor=monitor.as_tuple(),
            )
        return Rect(monitor.left + x, monitor.top + y, w, h)

    # -- public API -----------------------------------------------------------------

    @property
    def backend(self) -> CaptureBackend:
        return self._backend

    def monitors(self) -> list[Monitor]:
        """Every monitor of the virtual desktop (origins may be negative)."""
        self._check_open()
        return self._backend.monitors()

    def grab(self, size: Sequence[SupportsIndex] | None = None) -> Frame:
        """Capture the working area, resized to ``size`` = (w, h) when given."""
        area = self.area
        width, height = (area.width, area.height) if size is None else _size(size)
        with self._lock:
            return self._grab(area, width, height)

    def _grab(self, area: Rect, width: int, height: int) -> Frame:
        self._check_open()
        timestamp = time.time()
        t0 = time.perf_counter()
        scaler = self._scaler if self.scaling == "gdi" and (width, height) != (area.width, area.height) else None
        gdi_scaled = scaler is not None
        if scaler is not None:
            bgra: Pixels = scaler.grab_scaled(area, (width, height))
        else:
            bgra = self._backend.grab_bgra(area)
        t1 = time.perf_counter()
        image = self.read_cursor() if self.cursor else None
        return self._make_frame(bgra, image, area, width, height, gdi_scaled, timestamp, t0, t1)

    def probe(self) -> tuple[int, Pixels, CursorImage | None]:
        """One raw grab of the working area for settle polling: ``(digest of the raw
        pixels without cursor, those pixels, the cursor or None)``.

        :meth:`frame_from` turns the pixels into the frame the model sees without a
        second grab (the settled probe *is* the observation). The pixels may be a view
        of a buffer the backend reuses: use them before the next grab or probe.
        """
        with self._lock:
            self._check_open()
            bgra = self._backend.grab_bgra(self.area)
            image = self.read_cursor() if self.cursor else None
            return self._digest(bgra), bgra, image

    def _digest(self, bgra: Pixels) -> int:
        """The raw pixels' digest without the cursor: a backend whose frames have the
        cursor drawn in (wlroots) keeps it out itself."""
        if isinstance(self._backend, CursorDrawingBackend):
            return self._backend.digest_without_cursor(bgra, self.area)
        return imaging.frame_digest(bgra)

    def frame_from(
        self, bgra: Pixels, cursor: CursorImage | None, size: tuple[int, int] | None = None
    ) -> Frame:
        """The frame :meth:`grab` would have made from these pixels and cursor (from
        :meth:`probe`): cursor composited into ``bgra`` (in place), then resized."""
        area = self.area
        if bgra.shape[:2] != (area.height, area.width):
            raise CaptureError(f"pixels of {bgra.shape[1]}x{bgra.shape[0]} are not the "
                               f"{area.width}x{area.height} working area", shape=list(bgra.shape))
        width, height = (area.width, area.height) if size is None else _size(size)
        with self._lock:
            self._check_open()
            now = time.perf_counter()
            return self._make_frame(bgra, cursor, area, width, height, False, time.time(), now, now)

    def _make_frame(
        self,
        bgra: Pixels,
        image: CursorImage | None,
        area: Rect,
        width: int,
        height: int,
        gdi_scaled: bool,
        timestamp: float,
        t0: float,
        t1: float,
    ) -> Frame:
        cursor_at = None
        if self.cursor and image is not None:
            cursor_at = image.position
            self._composite(bgra, image, area, (bgra.shape[1], bgra.shape[0]))
        t2 = time.perf_counter()
        out = self._buffer(width, height)
        rgb = imaging.prepare(bgra, size=None if gdi_scaled else (width, height), out=out)
        t3 = time.perf_counter()
        return Frame(
            rgb,
            area,
            cursor=cursor_at,
            timestamp=timestamp,
            monitor=self.monitor.index,
            timings={"capture": t1 - t0, "cursor": t2 - t1, "prepare": t3 - t2},
        )

    def read_cursor(self) -> CursorImage | None:
        """The backend's cursor image, or None when it is hidden *or cannot be read*.

        The cursor is a garnish on the pixels: a cursor bitmap the OS will not hand over
        (Windows answers GetIconInfo with "Invalid cursor handle" for some application
        cursors, a handle can be destroyed between GetCursorInfo and GetIconInfo) must
        never cost the frame. The frame goes without it; the first reason is kept in
        :attr:`cursor_problem` (and warned about once), later ones are counted.
        """
        try:
            return self._backend.cursor()
        except (CaptureError, PlatformError, OSError) as exc:
            self.cursor_failures += 1
            if self.cursor_problem is None:
                self.cursor_problem = f"{type(exc).__name__}: {exc}"
                warnings.warn(
                    f"a frame was captured without the mouse cursor: {exc}",
                    RuntimeWarning,
                    stacklevel=3,
                )
            return None

    def grab_bgra(self) -> Pixels:
        """The raw BGRA of the working area, no cursor, no copy (valid until the next grab)."""
        with self._lock:
            self._check_open()
            return self._backend.grab_bgra(self.area)

    def digest(self) -> int:
        """A cheap fingerprint of the working area (raw grab, no cursor) for settle polling:
        equal digests mean equal pixels."""
        with self._lock:
            return self._digest(self.grab_bgra())

    def close(self) -> None:
        """Release the backend's OS resources and the buffers. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._pool.clear()
            self._backend.close()

    def __enter__(self) -> Capturer:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def __repr__(self) -> str:
        a = self.area
        return f"<Capturer {self._backend.name} monitor={self.monitor.index} area={a.width}x{a.height}+{a.left}+{a.top}>"

    # -- internals ------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise CaptureError("the capturer is closed")

    @staticmethod
    def _composite(bgra: Pixels, image: CursorImage, area: Rect, frame_size: tuple[int, int]) -> None:
        """Draw the cursor into the raw frame; its position is scaled when GDI already
        shrank the frame (the cursor image itself stays at its size, as on screen)."""
        px, py = image.position
        fw, fh = frame_size
        x = (px - area.left) * fw // area.width - image.hotspot[0]
        y = (py - area.top) * fh // area.height - image.hotspot[1]
        ch, cw = image.pixels.shape[:2]
        if x >= fw or y >= fh or x + cw <= 0 or y + ch <= 0:
            return  # the pointer is elsewhere on the desktop
        imaging.composite_cursor(bgra, image.pixels, x, y, kind=image.kind)

    def _buffer(self, width: int, height: int) -> Pixels:
        """An HxWx3 output array no frame refers to any more (allocated when none is)."""
        pool = self._pool.setdefault((width, height), [])
        for buf in pool:
            if sys.getrefcount(buf) <= _FREE_REFCOUNT:
                return buf
        buf = np.empty((height, width, 3), dtype=np.uint8)
        if len(pool) < _POOL_PER_SIZE:
            pool.append(buf)
        return buf
