"""The GNOME (Mutter) capture backend: Mutter's ScreenCast streams through PipeWire.

One stream per monitor stays open for the backend's life (:mod:`deskpilot._wayland._mutter`,
shared with the Mutter input backend of the same process), so a grab is a view of the
newest frame PipeWire delivered: no copy, no round trip. Frames are SHM BGRx at the
monitor's physical size, sent by Mutter only when something was drawn: the backend's
:meth:`MutterBackend.damage_source` is that change signal for the agent's settle.

The cursor: streams are recorded with the cursor as metadata (cursor-mode 2), so moving the
pointer never changes a frame (the settle must not take a pointer move for the app's
reaction) while its position comes with the stream (the user's moves included).
:meth:`MutterBackend.cursor` draws an arrow there (the shape is not read: always the
arrow); before any metadata, where the Mutter input of this process last put it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Protocol

import numpy as np
import numpy.typing as npt

from deskpilot._errors import CaptureError
from deskpilot._wayland import (
    MonitorStream,
    MutterSession,
    acquire_mutter,
    pointer_position,
    release_mutter,
)
from deskpilot.capture._base import CursorImage, Monitor
from deskpilot.geometry import Rect

__all__ = ["ARROW_CURSOR", "MutterBackend", "StreamDamage", "stream_index", "stream_view"]

Pixels = npt.NDArray[np.uint8]

# The X11 "left_ptr"-like arrow: '#' black outline, '.' white fill, ' ' transparent.
_ARROW = (
    "#           ",
    "##          ",
    "#.#         ",
    "#..#        ",
    "#...#       ",
    "#....#      ",
    "#.....#     ",
    "#......#    ",
    "#.......#   ",
    "#........#  ",
    "#.........# ",
    "#......#####",
    "#...#..#    ",
    "#..# #..#   ",
    "#.#  #..#   ",
    "##    #..#  ",
    "#     #..#  ",
    "       #..# ",
    "       ###  ",
)


def _arrow_pixels() -> Pixels:
    pixels = np.zeros((len(_ARROW), len(_ARROW[0]), 4), np.uint8)
    for y, row in enumerate(_ARROW):
        for x, ch in enumerate(row):
            if ch == "#":
                pixels[y, x] = (0, 0, 0, 255)
            elif ch == ".":
                pixels[y, x] = (255, 255, 255, 255)
    pixels.flags.writeable = False
    return pixels


#: The arrow drawn at the pointer (straight BGRA, hotspot at its tip).
ARROW_CURSOR: Pixels = _arrow_pixels()


class _Frames(Protocol):
    def fileno(self) -> int: ...
    def drain(self) -> int: ...


class _Stream(Protocol):
    """One monitor's PipeWire stream, as Mutter's and the portal's sessions describe it."""

    x: int
    y: int
    width: int
    height: int

    def frames(self) -> PipeWireFrames: ...


class PipeWireFrames(_Frames, Protocol):
    def latest(self) -> Pixels: ...


class StreamDamage:
    """The frames of one monitor's PipeWire stream as drawing notifications
    (:class:`~deskpilot.capture.DamageSource`): Mutter (directly or behind the ScreenCast
    portal) sends a frame only when something on that monitor was drawn. With the pointer
    sent as metadata, its moves do not count."""

    def __init__(self, frames: _Frames) -> None:
        self._frames = frames
        #: When frames were last drained (time.perf_counter(); 0.0 before any).
        self.last_damage = 0.0

    def fileno(self) -> int:
        return self._frames.fileno()

    def drain(self) -> int:
        count = self._frames.drain()
        if count:
            self.last_damage = time.perf_counter()
        return count

    def close(self) -> None:
        """Nothing of its own to release: the stream belongs to the backend."""


def stream_index(streams: Sequence[_Stream], rect: Rect, what: str) -> int:
    """The 1-based index of the stream whose monitor contains ``rect`` whole (PipeWire
    streams one monitor each); ``what`` names them in the error."""
    for i, s in enumerate(streams, start=1):
        if s.x <= rect.left and s.y <= rect.top and rect.right <= s.x + s.width \
                and rect.bottom <= s.y + s.height:
            return i
    raise CaptureError(f"{rect.as_tuple()} is not inside one {what}", rect=list(rect.as_tuple()))


def stream_view(stream: _Stream, rect: Rect, name: str) -> Pixels:
    """``rect`` (physical desktop pixels, inside ``stream``'s monitor) of the stream's newest
    frame, as a view; refused when the frame no longer has the monitor's size."""
    frame = stream.frames().latest()
    if frame.shape[:2] != (stream.height, stream.width):
        raise CaptureError(
            f"the {name} stream is {frame.shape[1]}x{frame.shape[0]}, its monitor "
            f"{stream.width}x{stream.height}: the display configuration changed; open a new capturer",
            stream=name)
    x, y = rect.left - stream.x, rect.top - stream.y
    view: Pixels = frame[y : y + rect.height, x : x + rect.width]
    return view


class MutterBackend:
    """Frames of every monitor of a GNOME Wayland session, through Mutter's ScreenCast.

    ``cursor``: draw the arrow at the pointer position the Mutter input backend last sent.
    Raises :class:`~deskpilot.PlatformError` when the session bus has no Mutter ScreenCast,
    :class:`ImportError` (jeepney) without the ``wayland`` extra.
    """

    name = "mutter"

    def __init__(self, *, cursor: bool = True) -> None:
        self._session = acquire_mutter(remote_desktop=False)
        self._want_cursor = cursor
        self._closed = False

    @property
    def session(self) -> MutterSession:
        """The shared Mutter session (for the input backend and tests)."""
        return self._session

    def _check_open(self) -> None:
        if self._closed:
            raise CaptureError("the mutter capture backend is closed")
        if self._session.ended:
            # Mutter closed it (the monitors changed): record them again.
            old, self._session = self._session, acquire_mutter(remote_desktop=False)
            release_mutter(old)

    def monitors(self) -> list[Monitor]:
        self._check_open()
        return [
            Monitor(i, Rect(s.x, s.y, s.width, s.height), s.primary, s.connector)
            for i, s in enumerate(self._session.streams, start=1)
        ]

    def _stream(self, monitor: int) -> MonitorStream:
        self._check_open()
        return self._session.streams[monitor - 1]

    def monitor_of(self, rect: Rect) -> int:
        """The 1-based index of the monitor that contains ``rect`` whole."""
        return stream_index(self._session.streams, rect, "monitor: Mutter streams one monitor each")

    def grab_bgra(self, rect: Rect) -> Pixels:
        self._check_open()
        stream = self._session.streams[self.monitor_of(rect) - 1]
        return stream_view(stream, rect, stream.connector)

    def damage_source(self, monitor: int) -> StreamDamage:
        """The drawing notifications of monitor ``monitor`` (1-based) for the agent's settle."""
        return StreamDamage(self._stream(monitor).frames())

    def pointer(self) -> tuple[int, int] | None:
        """Where the pointer is: the newest position the streams' metadata gave (the user's
        moves included), else where this process's input last put it, else None."""
        self._check_open()
        return pointer_position(self._session)

    def cursor(self) -> CursorImage | None:
        self._check_open()
        position = self.pointer()
        if not self._want_cursor or position is None:
            return None
        return CursorImage(ARROW_CURSOR, "straight", (0, 0), position, serial=1)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        release_mutter(self._session)

