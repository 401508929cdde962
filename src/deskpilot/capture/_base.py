"""What a capture backend provides to the :class:`~deskpilot.capture.Capturer` facade.

Backends only make OS calls and hand raw buffers over; all pixel work (crop, cursor
compositing, downscale, RGB, PNG) happens in :mod:`deskpilot.imaging`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from deskpilot.geometry import Rect

__all__ = [
    "CaptureBackend",
    "CursorDrawingBackend",
    "CursorImage",
    "CursorKind",
    "DamageBackend",
    "DamageSource",
    "Monitor",
    "PointerBackend",
    "ScalingBackend",
]

#: How a cursor image is encoded (see :func:`deskpilot.imaging.composite_cursor`):
#: ``premultiplied`` / ``straight``: HxWx4 BGRA with alpha;
#: ``masked``: HxWx4 BGRA colour whose alpha byte is the AND mask (0 = replace, 0xFF = XOR screen);
#: ``mono``: HxWx2 uint8, plane 0 the AND mask and plane 1 the XOR mask (0 or 1 per pixel).
CursorKind = Literal["premultiplied", "straight", "masked", "mono"]


@dataclass(frozen=True, slots=True)
class Monitor:
    """One monitor in physical pixels of the virtual desktop."""

    index: int  # 1-based, as in mss; 0 is reserved for "all monitors"
    rect: Rect
    primary: bool
    name: str = ""


@dataclass(frozen=True, slots=True)
class CursorImage:
    """The pointer's picture and where it is, in physical virtual-desktop pixels."""

    pixels: npt.NDArray[np.uint8]
    kind: CursorKind
    hotspot: tuple[int, int]
    position: tuple[int, int]  # the pointer (hotspot) position
    serial: int = 0  # changes when the cursor shape changes (cache key)


class CaptureBackend(Protocol):
    """A source of raw BGRA frames."""

    name: str

    def monitors(self) -> list[Monitor]:
        """All monitors, primary flagged; indexes are 1-based."""
        ...

    def grab_bgra(self, rect: Rect) -> npt.NDArray[np.uint8]:
        """Pixels of ``rect`` as an HxWx4 BGRA uint8 array (may be a view into a buffer
        the backend reuses: valid until the next call)."""
        ...

    def cursor(self) -> CursorImage | None:
        """The current cursor, or None if it is hidden or the backend cannot read it."""
        ...

    def close(self) -> None:
        """Release every OS resource (DCs, bitmaps, X connections). Idempotent."""
        ...


@runtime_checkable
class ScalingBackend(CaptureBackend, Protocol):
    """A backend that also lets the OS downscale while it copies (GDI's StretchBlt:
    ``Capturer(scaling="gdi")``)."""

    def grab_scaled(self, rect: Rect, size: tuple[int, int]) -> npt.NDArray[np.uint8]:
        """Pixels of ``rect`` scaled to ``size`` (width, height), HxWx4 BGRA uint8."""
        ...


class DamageSource(Protocol):
    """Drawing notifications on the working area, for the agent's adaptive settle
    (:func:`deskpilot.agent._settle.settle_on_damage`): X11 DAMAGE
    (:class:`deskpilot._x11.DamageWatcher`), a Mutter stream's frames, wlroots screencopy
    damage. ``fileno`` becomes readable when some arrived; ``drain`` reads them without
    blocking and returns how many of them were drawing on the working area (drawing
    elsewhere, a clock outside the captured area, does not count)."""

    #: When the last drawing on the working area was drained (``time.perf_counter()``; 0.0:
    #: none yet): a probe older than it is stale.
    last_damage: float

    def fileno(self) -> int: ...
    def drain(self) -> int: ...
    def close(self) -> None: ...


@runtime_checkable
class DamageBackend(CaptureBackend, Protocol):
    """A backend whose compositor says when something was drawn (Mutter's screencast sends
    a frame only then; wlroots' screencopy damage): the settle waits on it instead of polling."""

    def damage_source(self, monitor: int) -> DamageSource:
        """The drawing notifications of monitor ``monitor`` (1-based; 0: the whole desktop)."""
        ...


@runtime_checkable
class CursorDrawingBackend(CaptureBackend, Protocol):
    """A backend whose frames have the pointer drawn in by the compositor (headless sway):
    it keeps the pointer out of the settle's digest itself."""

    def digest_without_cursor(self, bgra: npt.NDArray[np.uint8], area: Rect) -> int:
        """The digest of ``bgra`` (the grab of ``area``) with the drawn pointer kept out."""
        ...


@runtime_checkable
class PointerBackend(CaptureBackend, Protocol):
    """A backend that knows where the pointer is without drawing it (Mutter's cursor
    metadata): the kill switch's corner reads it."""

    def pointer(self) -> tuple[int, int] | None:
        """The pointer in physical desktop pixels, None while unknown."""
        ...
