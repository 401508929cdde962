"""The wlroots capture backend (sway, Hyprland, river...): ``wlr-screencopy-unstable-v1``
over the compositor's Wayland socket (:mod:`deskpilot._wayland._wlr`).

Each grab asks the compositor for the next frame of the output(s) ``rect`` covers and
lets it copy the pixels into a wl_shm buffer kept per output (a memfd mapped once): the
frame handed on is a numpy view of that mapping, no copy, valid until the next grab. A
rectangle spanning several outputs is assembled into one array (a copy, the only one).
Pixels are XRGB8888, BGRx in memory: the BGRA layout deskpilot's imaging reads.

The cursor: screencopy draws the compositor's own pointer into the frame when asked
(``overlay_cursor``), so ``cursor=True`` frames show the real cursor where it really is and
:meth:`WlrootsBackend.cursor` returns None (there is nothing left to composite).
``cursor=False`` asks for frames without it, which a compositor can honour only where the
cursor is on a hardware plane: with a software cursor (headless sway, measured) the cursor
is part of the output's pixels in every frame.

So the settle's digests (:meth:`WlrootsBackend.digest_without_cursor`) keep the drawn
cursor out: the pointer moving to a click point is not the app's reaction (on X11 the
probe's pixels have no cursor at all). Where the cursor is comes from this process's wlroots
input (:func:`deskpilot._wayland._wlr.pointer_of`: the compositor tells clients nothing); the
digest is taken over a *cursor-free copy* of the screen: each frame's pixels outside the box
the cursor may cover, and inside it the pixels last seen there without the cursor. Two frames
of an unchanged app digest equal wherever the pointer went in between. What this cannot see:
drawing under the resting pointer until the pointer leaves (a box of the cursor's size, twice
``XCURSOR_SIZE`` logical pixels a side around the hotspot), the box where the pointer was when
the first digest was taken (its cursor-free pixels were never seen: it stays out of every
digest of this backend), and a pointer moved by someone else (a real mouse: its cursor counts
as drawing).

Output coordinates: physical pixels, each output at its layout position times its scale
(outputs of one scale tile exactly; see :class:`~deskpilot._wayland._wlr.WlrOutput`).
Rotated outputs (``transform``) are not handled.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from deskpilot import imaging
from deskpilot._errors import CaptureError
from deskpilot._wayland import (
    ZWLR_SCREENCOPY_FRAME_V1,
    Proxy,
    ShmBuffer,
    WlrootsClient,
    WlrOutput,
    pointer_of,
)
from deskpilot.capture._base import CursorImage, Monitor
from deskpilot.geometry import Rect

__all__ = ["WlrootsBackend", "WlrootsDamage"]

Pixels = npt.NDArray[np.uint8]

#: The cursor size of wlroots compositors unless the session says otherwise (logical px).
DEFAULT_CURSOR_SIZE = 24


def _output_rect(output: WlrOutput) -> Rect:
    x, y = output.origin
    return Rect(x, y, output.physical[0], output.physical[1])


class WlrootsBackend:
    """Capture through wlr-screencopy. ``environ``: where to find the compositor (default
    ``os.environ``: ``WAYLAND_DISPLAY`` and ``XDG_RUNTIME_DIR``)."""

    name = "wlroots"
    _closed = True  # until __init__ has opened it: __del__ of a half-built object does nothing

    def __init__(self, *, cursor: bool = True, environ: Mapping[str, str] | None = None) -> None:
        self._client = WlrootsClient(CaptureError, ("screencopy",), environ)
        self._environ = environ
        self._overlay_cursor = cursor
        self._lock = threading.Lock()
        self._closed = False
        env = os.environ if environ is None else environ
        try:
            self._cursor_size = max(1, int(env.get("XCURSOR_SIZE", "") or DEFAULT_CURSOR_SIZE))
        except ValueError:
            self._cursor_size = DEFAULT_CURSOR_SIZE
        # The cursor-free copy of the last digested area: its pixels, which area, and the
        # box never seen without the cursor (zeroed for good).
        self._clean: Pixels | None = None
        self._clean_area: Rect | None = None
        self._blind: tuple[int, int, int, int] | None = None

    def _check_open(self) -> None:
        if self._closed:
            raise CaptureError("the wlroots capture backend is closed")

    def monitors(self) -> list[Monitor]:
        self._check_open()
        with self._lock:
            outputs = self._client.refresh_outputs()
            # wlroots has no "primary output": the one at the layout's origin counts as primary
            # (the first announced where none is there).
            at_origin = [o for o in outputs if o.logical_position == (0, 0)]
            primary = at_origin[0] if at_origin else outputs[0]
            return [Monitor(index=i, rect=_output_rect(o), primary=o is primary, name=o.name)
                    for i, o in enumerate(outputs, start=1)]

    def _grab_output(self, output: WlrOutput) -> Pixels:
        buffer, y_inverted = self._client.capture(output, overlay_cursor=self._overlay_cursor)
        rows = np.frombuffer(buffer.memory, dtype=np.uint8).reshape(buffer.height, buffer.stride)
        pixels = rows[:, : buffer.width * 4].reshape(buffer.height, buffer.width, 4)
        if y_inverted:
            # The compositor says the rows are upside down (none measured here does).
            pixels = np.ascontiguousarray(pixels[::-1])
        return pixels

    def grab_bgra(self, rect: Rect) -> Pixels:
        """``rect`` as HxWx4 BGRA: a view on the output's shm buffer (valid until the next grab)."""
        self._check_open()
        with self._lock:
            outputs = [(o, _output_rect(o)) for o in self._client.outputs]
            for output, box in outputs:
                if box.contains(rect.left, rect.top) and rect.right <= box.right and rect.bottom <= box.bottom:
                    pixels = self._grab_output(output)
                    top, left = rect.top - box.top, rect.left - box.left
                    return pixels[top: top + rect.height, left: left + rect.width]
            out = np.zeros((rect.height, rect.width, 4), dtype=np.uint8)
            covered = False
            for output, box in outputs:
                left, top = max(rect.left, box.left), max(rect.top, box.top)
                right, bottom = min(rect.right, box.right), min(rect.bottom, box.bottom)
                if right <= left or bottom <= top:
                    continue
                pixels = self._grab_output(output)
                out[top - rect.top: bottom - rect.top, left - rect.left: right - rect.left] = \
                    pixels[top - box.top: bottom - box.top, left - box.left: right - box.left]
                covered = True
            if not covered:
                raise CaptureError(f"{rect.as_tuple()} is on no output", rect=list(rect.as_tuple()))
            return out

    def cursor_box(self) -> Rect | None:
        """Where the compositor may have drawn its cursor (physical desktop pixels): a
        square of twice the cursor's size around where this process's input last put the
        pointer, whatever the cursor's hotspot (None: it never moved it)."""
        self._check_open()
        position = pointer_of(self._client.conn.path)
        if position is None:
            return None
        x, y = position
        scale = 1.0
        for output in self._client.outputs:
            if _output_rect(output).contains(x, y):
                scale = output.scale
        half = int(self._cursor_size * scale + 0.999)
        return Rect(x - half, y - half, 2 * half, 2 * half)

    def digest_without_cursor(self, bgra: Pixels, area: Rect) -> int:
        """The digest of ``bgra`` (the grab of ``area``) with the compositor's cursor kept
        out (see the module docstring); ``imaging.frame_digest(bgra)`` where the pointer was
        never moved by this process."""
        box = self.cursor_box()
        if box is None:
            return imaging.frame_digest(bgra)
        inside = box.intersect(area)
        x0, y0 = (inside.left - area.left, inside.top - area.top) if inside else (0, 0)
        x1, y1 = (x0 + inside.width, y0 + inside.height) if inside else (0, 0)
        with self._lock:
            clean = self._clean
            if clean is None or clean.shape != bgra.shape or self._clean_area != area:
                clean = self._clean = bgra.copy()
                self._clean_area = area
                self._blind = (x0, y0, x1, y1)
            else:
                kept = clean[y0:y1, x0:x1].copy()
                np.copyto(clean, bgra)
                clean[y0:y1, x0:x1] = kept
            bx0, by0, bx1, by1 = self._blind or (0, 0, 0, 0)
            clean[by0:by1, bx0:bx1] = 0
            return imaging.frame_digest(clean)

    def damage_source(self, monitor: int = 0) -> WlrootsDamage:
        """Drawing notifications for monitor ``monitor`` (1-based as :meth:`monitors`; 0:
        the whole desktop) for the adaptive settle (see :class:`WlrootsDamage`)."""
        self._check_open()
        monitors = self.monitors()
        found = [m.rect for m in monitors if m.index == monitor]
        if found:
            area = found[0]
        else:
            left, top = min(m.rect.left for m in monitors), min(m.rect.top for m in monitors)
            right, bottom = max(m.rect.right for m in monitors), max(m.rect.bottom for m in monitors)
            area = Rect(left, top, right - left, bottom - top)
        return WlrootsDamage(area, self._environ)

    def cursor(self) -> CursorImage | None:
        """None: the compositor draws the cursor into ``cursor=True`` frames itself."""
        self._check_open()
        return None

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with self._lock:
            self._client.close()

    def __del__(self) -> None:
        if not self._closed:
            with contextlib.suppress(Exception):
                self.close()


class _DamageFrame:
    """One output's frame in flight: ``copy_with_damage`` is answered once something was
    drawn on the output since the previous frame (the first one at once, all damaged)."""

    def __init__(self, source: WlrootsDamage, output: WlrOutput) -> None:
        self.source = source
        self.output = output
        self.box = _output_rect(output)
        self.buffer: ShmBuffer | None = None
        self.frames = 0  # answered frames
        self.frame: Proxy | None = None
        self._info: list[int] = []
        self._meets = False

    def request(self) -> None:
        screencopy = self.source.client.screencopy
        assert screencopy is not None
        # No cursor asked for: where the compositor can leave it out, it does not damage.
        frame = screencopy.request("capture_output", ZWLR_SCREENCOPY_FRAME_V1, 0, self.output.proxy)
        assert frame is not None
        frame.handler = self.handle
        self.frame, self._info, self._meets = frame, [], False

    def handle(self, event: str, args: list[Any]) -> None:
        frame = self.frame
        assert frame is not None
        if event == "buffer" and not self._info:
            self._info = list(args)
            if frame.version < 3:
                self._copy()
        elif event == "buffer_done":
            self._copy()
        elif event == "damage":
            x, y, w, h = args
            scale_x = self.box.width / max(1, self._info[1]) if self._info else 1.0
            scale_y = self.box.height / max(1, self._info[2]) if self._info else 1.0
            drawn = Rect(self.box.left + int(x * scale_x), self.box.top + int(y * scale_y),
                         max(1, int(w * scale_x + 0.999)), max(1, int(h * scale_y + 0.999)))
            if drawn.intersect(self.source.area) is not None:
                self._meets = True
        elif event == "ready":
            frame.destroy()
            self.frames += 1
            if self._meets and self.frames > 1:  # the first frame is all damage: nothing drawn yet
                self.source.count += 1
            self.request()
        elif event == "failed":
            frame.destroy()
            self.source.problem = f"screencopy of output {self.output.name} failed"

    def _copy(self) -> None:
        fmt, width, height, stride = self._info
        buffer = self.buffer
        if buffer is None or (buffer.width, buffer.height, buffer.stride, buffer.format) != (width, height, stride, fmt):
            if buffer is not None:
                buffer.destroy()
            client = self.source.client
            assert client.shm is not None
            buffer = self.buffer = client.conn.shm_buffer(client.shm, width, height, stride, fmt)
        assert self.frame is not None
        self.frame.request("copy_with_damage", buffer.buffer)


class WlrootsDamage:
    """Drawing notifications on ``area`` (physical desktop pixels) from wlr-screencopy's
    ``copy_with_damage``, for the adaptive settle (a
    :class:`~deskpilot.agent._settle.DamageSource`): one frame per output is always in
    flight on a connection of its own; the compositor answers it once something was drawn
    on that output, with the damaged rectangles; a frame whose damage meets ``area`` is one
    notification. ``fileno`` is the connection's socket, ``drain`` dispatches what arrived.

    Each answered frame costs the compositor one copy of the output into a buffer kept per
    output (nothing while nothing is drawn). A cursor the compositor draws itself (headless
    sway's software cursor) damages the output where it moves: the settle takes that for
    drawing, which its probes (whose digests keep the cursor out) then find unchanged.
    """

    def __init__(self, area: Rect, environ: Mapping[str, str] | None = None, *, timeout: float = 5.0) -> None:
        self.area = area
        self.count = 0
        self.last_damage = 0.0  # perf_counter() of the last drain that found drawing on the area
        self.problem: str | None = None
        self.client = WlrootsClient(CaptureError, ("screencopy",), environ)
        try:
            self._frames = [_DamageFrame(self, o) for o in self.client.outputs
                            if _output_rect(o).intersect(area) is not None]
            if not self._frames:
                raise CaptureError(f"{area.as_tuple()} is on no output", rect=list(area.as_tuple()))
            for frame in self._frames:
                frame.request()
            # The first frame of each output comes at once (all of it damaged): wait it out.
            self.client.conn.wait(lambda: all(f.frames for f in self._frames) or self.problem is not None,
                                  timeout, "zwlr_screencopy_frame_v1.ready")
            if self.problem is not None:
                raise CaptureError(self.problem, interface="zwlr_screencopy_frame_v1")
            self.count = 0
        except BaseException:
            self.client.close()
            raise

    def fileno(self) -> int:
        return self.client.conn.fileno()

    def drain(self) -> int:
        """Dispatch what the compositor sent, without blocking; how many frames drawn on
        the area were answered since the last drain."""
        conn = self.client.conn
        while conn.read_events(0):
            pass
        conn.flush()  # the next frames' requests
        if self.problem is not None:
            raise CaptureError(self.problem, interface="zwlr_screencopy_frame_v1")
        count, self.count = self.count, 0
        if count:
            self.last_damage = time.perf_counter()
        return count

    def close(self) -> None:
        if not self.client.conn.open:
            return
        with contextlib.suppress(CaptureError):
            for frame in self._frames:
                if frame.frame is not None:
                    frame.frame.destroy()
                if frame.buffer is not None:
                    frame.buffer.destroy()
                    frame.buffer = None
            self.client.conn.roundtrip()
        self.client.close()
