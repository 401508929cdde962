"""The agent's eyes: screenshots as the model sees them, their mapping, and what changed.

:class:`Screen` is the seam between the loop and :class:`deskpilot.capture.Capturer`
(unit tests plug in a simulated desktop). Every call is blocking and thread-bound (an
X connection or GDI DC belongs to the thread that made it), so the loop runs all of
them on one capture thread.

Two ways to look: :meth:`Screen.probe` is the cheap one used while waiting for the
screen to settle (a digest of the raw pixels, no cursor, no resize, plus where the
pointer is); :meth:`Screen.grab` makes the image the model sees. A probe equal to the
one taken with the last image means that image is still what the screen shows, so it
is reused without grabbing or encoding again.

:class:`CapturerScreen` keeps the pixels of its last probe: ``grab_probed`` makes the
image from them (cursor, downscale) instead of grabbing the settled screen a second
time; with ``pixel_digest=False`` the shot's key is the probe's digest of the raw pixels
combined with the cursor's position and shape, so the frame is digested once on the
critical path (the DAMAGE settle digests the image for the record in the encode worker,
while it waits).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from deskpilot import imaging
from deskpilot.capture import CursorImage, DamageBackend, DamageSource, Frame
from deskpilot.geometry import NORM_MAX, Mapping, Rect

__all__ = ["CapturerScreen", "Probe", "Screen", "Shot", "change_box", "expand_rect"]

U8 = npt.NDArray[np.uint8]

#: Half the size of the area around the pointer ignored by change detection (physical
#: pixels): a pointer that only moved is not "the screen changed".
CURSOR_HALF = 32
#: A zoom never shows fewer physical pixels than this per side (a 3x3 px crop is no use).
MIN_ZOOM_PX = 64


@dataclass(slots=True)
class Shot:
    """One captured image, ready to encode: RGB pixels and the mapping of its pixels."""

    rgb: U8
    mapping: Mapping
    digest: int  # of ``rgb`` (cursor drawn in), or see ``pixel_digest``: the key of its encoded PNG
    cursor: tuple[int, int] | None = None  # pointer position, physical pixels
    zoomed: bool = False
    #: The :meth:`Screen.probe` value of the screen this shot shows (set by the loop).
    probe: Probe | None = None
    #: Whether ``digest`` is ``imaging.frame_digest(rgb)`` (False: a key made from the
    #: probe's digest of the raw pixels and the cursor, equal only for equal images).
    pixel_digest: bool = True

    @property
    def size(self) -> tuple[int, int]:
        return (self.mapping.image_width, self.mapping.image_height)


#: ``(digest of the raw pixels without cursor, pointer position or None)``.
Probe = tuple[int, "tuple[int, int] | None"]


class Screen(Protocol):
    """A source of :class:`Shot` s for one working area (monitor)."""

    monitor: int

    @property
    def area(self) -> Rect:
        """The working area: physical pixels of the virtual desktop."""
        ...

    @property
    def image_size(self) -> tuple[int, int]:
        """The size of the images :meth:`grab` makes."""
        ...

    @property
    def cursor_problem(self) -> str | None:
        """Why a frame went without the cursor, the first time it did (None: never)."""
        ...

    @property
    def keeps_probe_pixels(self) -> bool:
        """Whether :meth:`grab_probed` makes its image from the last probe's pixels (no
        second grab): the session then prepares the image while the screen settles."""
        ...

    def probe(self) -> Probe:
        """Cheap: digest of the raw working area (no cursor, no resize) and the pointer."""
        ...

    def grab(self) -> Shot:
        """The working area at the configured model image size, cursor drawn if enabled."""
        ...

    def grab_probed(self, *, pixel_digest: bool = True) -> Shot:
        """The image of the last :meth:`probe`'s pixels where the screen keeps them, else a
        :meth:`grab`; ``pixel_digest=False`` may key the shot by the probe's digest."""
        ...

    def grab_region(self, rect: Rect) -> Shot:
        """``rect`` (physical pixels inside the working area) at native resolution."""
        ...

    def close(self) -> None: ...


class CapturerScreen:
    """:class:`Screen` over :class:`deskpilot.capture.Capturer`."""

    def __init__(
        self,
        *,
        size: tuple[int, int],
        monitor: int = 1,
        backend: str = "auto",
        cursor: bool = True,
    ) -> None:
        from deskpilot.capture import Capturer

        self.monitor = monitor
        self.size = size
        self.cursor = cursor
        self._capturer = Capturer(backend=backend, monitor=monitor, cursor=cursor)
        self._probed: tuple[int, Any, CursorImage | None] | None = None

    @property
    def area(self) -> Rect:
        """The working area: physical pixels of the virtual desktop."""
        return self._capturer.area

    @property
    def image_size(self) -> tuple[int, int]:
        return self.size

    #: The probe keeps the raw pixels it digested (native scaling): :meth:`grab_probed` uses them.
    keeps_probe_pixels = True

    @property
    def backend_name(self) -> str:
        """The capture backend's name (``mss``, ``gdi``, ``mutter``, ``wlroots``)."""
        return str(self._capturer.backend.name)

    def backend_damage(self) -> DamageSource | None:
        """The capture backend's own drawing notifications for the working area's monitor
        (Mutter: a stream frame means something was drawn; wlroots: screencopy's damage),
        or None where it has none."""
        backend = self._capturer.backend
        return backend.damage_source(self._capturer.monitor.index) if isinstance(backend, DamageBackend) else None

    def probe(self) -> Probe:
        if self._capturer.scaling != "native":
            self._probed = None
            pointer = None
            if self.cursor:
                image = self._capturer.read_cursor()
                pointer = image.position if image is not None else None
            return (self._capturer.digest(), pointer)
        digest, bgra, cursor = self._capturer.probe()
        self._probed = (digest, bgra, cursor)
        return (digest, cursor.position if cursor is not None else None)

    @property
    def cursor_problem(self) -> str | None:
        """Why a frame went without the cursor, the first time it did (None: never)."""
        return self._capturer.cursor_problem

    def grab(self) -> Shot:
        self._probed = None
        frame = self._capturer.grab(size=self.size)
        return Shot(frame.rgb, frame.mapping, imaging.frame_digest(frame.rgb), _cursor(frame))

    def grab_probed(self, *, pixel_digest: bool = True) -> Shot:
        """The image of the last :meth:`probe`'s pixels (no second grab); a fresh
        :meth:`grab` when something else grabbed since (the pixels are used once).

        ``pixel_digest=False`` keys the shot by the probe's digest and the cursor
        instead of a pass over the image (for callers that digest it off the critical
        path, if at all)."""
        probed, self._probed = self._probed, None
        if probed is None:
            return self.grab()
        digest, bgra, cursor = probed
        frame = self._capturer.frame_from(bgra, cursor, size=self.size)
        if pixel_digest:
            return Shot(frame.rgb, frame.mapping, imaging.frame_digest(frame.rgb), _cursor(frame))
        key = _shot_digest(digest, cursor, frame.size)
        return Shot(frame.rgb, frame.mapping, key, _cursor(frame), pixel_digest=False)

    def grab_region(self, rect: Rect) -> Shot:
        self._probed = None
        frame = self._capturer.grab()
        area: Rect = frame.area
        inside = rect.intersect(area) or area
        x0, y0 = inside.left - area.left, inside.top - area.top
        rgb = np.ascontiguousarray(frame.rgb[y0 : y0 + inside.height, x0 : x0 + inside.width])
        mapping = Mapping(inside, inside.width, inside.height)
        return Shot(rgb, mapping, imaging.frame_digest(rgb), _cursor(frame), zoomed=True)

    def close(self) -> None:
        self._capturer.close()


def _shot_digest(raw: int, cursor: CursorImage | None, size: tuple[int, int]) -> int:
    """The key of a shot's PNG from what made it: the raw pixels' digest (already taken
    by the probe), the cursor drawn in (position, and shape by serial or, without one,
    by its pixels) and the image size. Equal keys mean equal images; hashing these few
    values replaces a second pass over the image."""
    if cursor is None:
        return hash((raw, size)) & 0xFFFFFFFFFFFFFFFF
    shape: int | bytes = cursor.serial if cursor.serial else cursor.pixels.tobytes()
    return hash((raw, size, cursor.position, cursor.hotspot, shape)) & 0xFFFFFFFFFFFFFFFF


def _cursor(frame: Frame) -> tuple[int, int] | None:
    pos = frame.cursor
    if pos is None:
        return None
    return (int(pos[0]), int(pos[1]))


def expand_rect(rect: Rect, within: Rect, minimum: int = MIN_ZOOM_PX) -> Rect:
    """``rect`` grown around its centre to at least ``minimum`` px per side, kept inside ``within``."""
    width = min(within.width, max(rect.width, minimum))
    height = min(within.height, max(rect.height, minimum))
    cx, cy = rect.left + rect.width // 2, rect.top + rect.height // 2
    left = min(max(cx - width // 2, within.left), within.right - width)
    top = min(max(cy - height // 2, within.top), within.bottom - height)
    return Rect(left, top, width, height)


def _cursor_box(mapping: Mapping, pos: tuple[int, int] | None) -> tuple[int, int, int, int] | None:
    """The image-pixel box (x0, y0, x1, y1), exclusive, around a physical pointer position."""
    if pos is None:
        return None
    sx, sy = mapping.scale
    ix, iy = mapping.physical_to_image(*pos)
    hx, hy = int(CURSOR_HALF / sx) + 1, int(CURSOR_HALF / sy) + 1
    w, h = mapping.image_width, mapping.image_height
    return (max(0, ix - hx), max(0, iy - hy), min(w, ix + hx), min(h, iy + hy))


def change_box(before: Shot, after: Shot) -> tuple[list[int] | None, bool]:
    """What changed between two full-view shots: a normalized ``[x1, y1, x2, y2]`` box (or
    None) and whether the only change was the pointer moving.

    The areas under the pointer in both shots are ignored when the plain comparison
    finds a change that touches them (a click moves the pointer; that alone is no
    visible effect of the action).
    """
    if before.rgb.shape != after.rgb.shape:
        return [0, 0, NORM_MAX, NORM_MAX], False
    if before.probe is not None and after.probe is not None and before.probe[0] == after.probe[0]:
        # Same raw pixels (the probe digest has no cursor in it): only the pointer moved, if anything.
        return None, before.probe[1] != after.probe[1]
    if before.digest == after.digest:
        return None, False
    region = imaging.changed_region(before.rgb, after.rgb)
    if region is None:
        return None, False
    boxes = [b for b in (_cursor_box(before.mapping, before.cursor), _cursor_box(after.mapping, after.cursor)) if b]
    if boxes and any(_overlaps(region, b) for b in boxes):
        a, b = before.rgb.copy(), after.rgb.copy()
        for x0, y0, x1, y1 in boxes:
            a[y0:y1, x0:x1] = 0
            b[y0:y1, x0:x1] = 0
        masked = imaging.changed_region(a, b)
        if masked is None:
            return None, True
        region = masked
    return _normalize(region, after.mapping), False


def _overlaps(region: tuple[int, int, int, int], box: tuple[int, int, int, int]) -> bool:
    x, y, w, h = region
    x0, y0, x1, y1 = box
    return x < x1 and x0 < x + w and y < y1 and y0 < y + h


def _normalize(region: tuple[int, int, int, int], mapping: Mapping) -> list[int]:
    x, y, w, h = region
    iw, ih = mapping.image_width, mapping.image_height
    return [
        x * NORM_MAX // iw,
        y * NORM_MAX // ih,
        min(NORM_MAX, -(-(x + w) * NORM_MAX // iw)),
        min(NORM_MAX, -(-(y + h) * NORM_MAX // ih)),
    ]
