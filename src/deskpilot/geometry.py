"""The coordinate contract: model-facing 0..1000 coordinates <-> physical pixels.

Every model-facing coordinate is an integer 0..1000 over the image the model saw
(x to the right, y down). The image covers a *working area*: a rectangle of the
virtual desktop in physical pixels (a whole monitor, or a crop of it, whose origin
may be negative on a multi-monitor desktop). Physical pixels appear only at the
edges, in capture and input.

Formula (documented because replay and audits depend on it). For a working area
``(left, top, width, height)``:

* normalized -> physical: ``px = left + min(width - 1, floor(nx * width / 1000))``
  (``nx`` clamped to 0..1000 first, the same for y; ``nan``, infinities and numbers
  no double holds are refused, never clamped). 1000 is the far edge of the
  image, so it maps into the last pixel rather than one past it.
* physical -> normalized: ``nx = round((px - left + 0.5) * 1000 / width)``, the
  centre of the pixel.

Going physical -> normalized -> physical lands within one pixel whenever a
normalized unit spans at most two pixels (``width <= 2000``); 1920 px wide
monitors land within 1 px. Image pixels map through the same area:
``px = left + floor((ix + 0.5) * width / image_width)``.
"""

from __future__ import annotations

import math
import numbers
import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, SupportsFloat

import orjson

from deskpilot._errors import GeometryError, InvalidBoxError

__all__ = [
    "NORM_MAX",
    "Box",
    "Mapping",
    "Rect",
    "clamp_norm",
    "crop_rect",
    "parse_box",
]

NORM_MAX = 1000


def _integer(value: Any, what: str) -> int:
    """``value`` as a plain int: ints and integer-likes such as numpy integers
    (``operator.index``); bools, floats and anything else raise :class:`GeometryError`."""
    if isinstance(value, bool):
        raise GeometryError(f"{what} must be an integer, got {value!r}", **{what: repr(value)})
    try:
        return operator.index(value)
    except TypeError:
        raise GeometryError(
            f"{what} must be an integer, got {type(value).__name__} {value!r}", **{what: repr(value)}
        ) from None


def _shown(value: Any) -> str:
    """``repr(value)``, cut short: a 400-digit number is quoted back to the model, bounded."""
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:20]}...({len(text)} characters)"


def _finite(value: float | SupportsFloat, where: str) -> float:
    """``value`` as a finite float, or :class:`InvalidBoxError`.

    Refused rather than clamped to an edge (clamping ``nan`` or ``inf`` would click the
    screen's border): ``nan``, infinities, and numbers no double holds (``1e1000`` reads
    as ``inf``; a 400-digit integer overflows). The peer trycua/cua refuses the same
    values (libs/python/agent/tests/test_uitars_coordinate_security.py).
    """
    try:
        number = float(value)
    except OverflowError:
        raise InvalidBoxError(f"{where} {_shown(value)} is too large to be a coordinate") from None
    if not math.isfinite(number):
        raise InvalidBoxError(f"{where} {_shown(value)} is not a finite number")
    return number


def clamp_norm(value: float | SupportsFloat) -> int:
    """Round and clamp one model coordinate into 0..1000.

    A finite value past an edge is clamped onto it (a model pointing at the border
    overshoots a little); a non-finite or overflowing one raises :class:`InvalidBoxError`.
    """
    if isinstance(value, (str, bytes)) or not isinstance(value, (numbers.Real, SupportsFloat)):
        raise InvalidBoxError(f"coordinate {value!r} is not a number")
    number = _finite(value, "coordinate")
    return max(0, min(NORM_MAX, round(number)))


@dataclass(frozen=True, slots=True)
class Rect:
    """A rectangle in physical pixels of the virtual desktop (origin may be negative)."""

    left: int
    top: int
    width: int
    height: int

    def __post_init__(self) -> None:
        # Plain ints whatever came in (numpy integers from array maths included), so
        # records built from a Rect serialize and compare like any other.
        for name in ("left", "top", "width", "height"):
            object.__setattr__(self, name, _integer(getattr(self, name), name))
        if self.width <= 0 or self.height <= 0:
            raise GeometryError(f"empty rectangle {self.width}x{self.height}", rect=self.as_tuple())

    @property
    def right(self) -> int:
        """Exclusive right edge."""
        return self.left + self.width

    @property
    def bottom(self) -> int:
        """Exclusive bottom edge."""
        return self.top + self.height

    def as_tuple(self) -> tuple[int, int, int, int]:
        return (self.left, self.top, self.width, self.height)

    def contains(self, x: int, y: int) -> bool:
        return self.left <= x < self.right and self.top <= y < self.bottom

    def intersect(self, other: Rect) -> Rect | None:
        left, top = max(self.left, other.left), max(self.top, other.top)
        right, bottom = min(self.right, other.right), min(self.bottom, other.bottom)
        if right <= left or bottom <= top:
            return None
        return Rect(left, top, right - left, bottom - top)


def crop_rect(area: Rect, crop: Sequence[float]) -> Rect:
    """Turn a normalized crop ``(x1, y1, x2, y2)`` in 0..1 (seed 004's CAPTURE_CROP) into pixels.

    The result is always inside ``area`` and at least one pixel in each direction.
    """
    if len(crop) != 4:
        raise GeometryError(f"crop needs 4 numbers (x1, y1, x2, y2), got {len(crop)}")
    x1, y1, x2, y2 = (float(v) for v in crop)
    if not all(math.isfinite(v) for v in (x1, y1, x2, y2)):
        raise GeometryError(f"crop {tuple(crop)!r} has a non-finite value")
    x1, x2 = sorted((min(max(x1, 0.0), 1.0), min(max(x2, 0.0), 1.0)))
    y1, y2 = sorted((min(max(y1, 0.0), 1.0), min(max(y2, 0.0), 1.0)))
    left = min(area.width - 1, round(x1 * area.width))
    top = min(area.height - 1, round(y1 * area.height))
    right = max(left + 1, min(area.width, round(x2 * area.width)))
    bottom = max(top + 1, min(area.height, round(y2 * area.height)))
    return Rect(area.left + left, area.top + top, right - left, bottom - top)


@dataclass(frozen=True, slots=True)
class Mapping:
    """Maps one image (what the model saw) onto its working area (physical pixels)."""

    area: Rect
    image_width: int
    image_height: int

    def __post_init__(self) -> None:
        for name in ("image_width", "image_height"):
            object.__setattr__(self, name, _integer(getattr(self, name), name))
        if self.image_width <= 0 or self.image_height <= 0:
            raise GeometryError(f"empty image {self.image_width}x{self.image_height}")

    @property
    def scale(self) -> tuple[float, float]:
        """Physical pixels per image pixel on each axis (>1 when the image is downscaled)."""
        return (self.area.width / self.image_width, self.area.height / self.image_height)

    def norm_to_physical(self, nx: float | SupportsFloat, ny: float | SupportsFloat) -> tuple[int, int]:
        """A model point (0..1000, clamped) -> the physical pixel it names."""
        cx, cy = clamp_norm(nx), clamp_norm(ny)
        a = self.area
        return (
            a.left + min(a.width - 1, cx * a.width // NORM_MAX),
            a.top + min(a.height - 1, cy * a.height // NORM_MAX),
        )

    def physical_to_norm(self, px: int, py: int) -> tuple[int, int]:
        """A physical pixel -> the model coordinate of its centre (clamped into 0..1000)."""
        a = self.area
        return (
            clamp_norm((px - a.left + 0.5) * NORM_MAX / a.width),
            clamp_norm((py - a.top + 0.5) * NORM_MAX / a.height),
        )

    def image_to_physical(self, ix: float, iy: float) -> tuple[int, int]:
        """An image pixel -> the physical pixel under its centre (clamped into the area)."""
        a = self.area
        x = math.floor((ix + 0.5) * a.width / self.image_width)
        y = math.floor((iy + 0.5) * a.height / self.image_height)
        return (a.left + max(0, min(a.width - 1, x)), a.top + max(0, min(a.height - 1, y)))

    def physical_to_image(self, px: int, py: int) -> tuple[int, int]:
        """A physical pixel -> the image pixel that covers its centre."""
        a = self.area
        x = math.floor((px - a.left + 0.5) * self.image_width / a.width)
        y = math.floor((py - a.top + 0.5) * self.image_height / a.height)
        return (max(0, min(self.image_width - 1, x)), max(0, min(self.image_height - 1, y)))

    def norm_box_to_physical(self, box: Box) -> Rect:
        """A model box -> the physical rectangle it covers (at least one pixel)."""
        x1, y1 = self.norm_to_physical(box.x1, box.y1)
        x2, y2 = self.norm_to_physical(box.x2, box.y2)
        return Rect(x1, y1, max(1, x2 - x1 + 1), max(1, y2 - y1 + 1))

    def sub_mapping(self, box: Box, image_width: int, image_height: int) -> Mapping:
        """The mapping of a zoomed view of ``box`` (e.g. the ``zoom`` tool's crop)."""
        return Mapping(self.norm_box_to_physical(box), image_width, image_height)

    def describe(self) -> dict[str, Any]:
        """The record every observation stores so a run can be replayed and audited."""
        sx, sy = self.scale
        return {
            "origin": [self.area.left, self.area.top],
            "physical_size": [self.area.width, self.area.height],
            "image_size": [self.image_width, self.image_height],
            "scale": [round(sx, 6), round(sy, 6)],
        }


@dataclass(frozen=True, slots=True)
class Box:
    """A normalized box (0..1000, x1 <= x2, y1 <= y2); a point has x1 == x2 and y1 == y2."""

    x1: int
    y1: int
    x2: int
    y2: int

    @property
    def center(self) -> tuple[int, int]:
        return ((self.x1 + self.x2) // 2, (self.y1 + self.y2) // 2)

    @property
    def is_point(self) -> bool:
        return self.x1 == self.x2 and self.y1 == self.y2

    def as_list(self) -> list[int]:
        return [self.x1, self.y1, self.x2, self.y2]


def _number(value: Any, where: str) -> float:
    # bool is an int subclass; a model writing [true, false] has not named a point.
    # numbers.Real takes numpy integers and floats too (a caller computing boxes with numpy).
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InvalidBoxError(f"{where} must be a number, got {_shown(value)}")
    return _finite(value, where)


def parse_box(value: Any) -> Box:
    """Parse a model box in any of the three formats into a clamped, ordered :class:`Box`.

    Accepted: ``[x, y]`` (a point), ``[x1, y1, x2, y2]``, ``[[x1, y1], [x2, y2]]``, a
    JSON string of one of these, or a dict with x/y or x1/y1/x2/y2 keys. Values are
    clamped to 0..1000 and inverted corners swapped. Anything else raises
    :class:`InvalidBoxError` whose ``kind`` is ``missing_box`` (nothing given) or
    ``invalid_box``.
    """
    if value is None or (isinstance(value, (str, list, tuple, dict)) and len(value) == 0):
        raise InvalidBoxError("box is missing: give [x, y] or [x1, y1, x2, y2] in 0..1000", kind="missing_box")
    if isinstance(value, str):
        try:
            value = orjson.loads(value)
        except orjson.JSONDecodeError:
            raise InvalidBoxError(f"box {value!r} is not JSON") from None
        return parse_box(value)
    if isinstance(value, dict):
        if {"x1", "y1", "x2", "y2"} <= value.keys():
            value = [value["x1"], value["y1"], value["x2"], value["y2"]]
        elif {"x", "y"} <= value.keys():
            value = [value["x"], value["y"]]
        else:
            raise InvalidBoxError(f"box object needs x/y or x1/y1/x2/y2 keys, got {sorted(value)}")
    if not isinstance(value, (list, tuple)):
        raise InvalidBoxError(f"box must be a list, got {type(value).__name__}")
    if len(value) == 2 and all(isinstance(v, (list, tuple)) for v in value):
        if len(value[0]) != 2 or len(value[1]) != 2:
            raise InvalidBoxError(f"legacy box needs [[x1, y1], [x2, y2]], got {value!r}")
        flat = [*value[0], *value[1]]
    elif len(value) in (2, 4):
        flat = list(value)
    else:
        raise InvalidBoxError(f"box needs 2 or 4 numbers, got {len(value)}: {value!r}")
    nums = [clamp_norm(_number(v, f"box[{i}]")) for i, v in enumerate(flat)]
    if len(nums) == 2:
        return Box(nums[0], nums[1], nums[0], nums[1])
    x1, y1, x2, y2 = nums
    return Box(min(x1, x2), min(y1, y2), max(x1, x2), max(y1, y2))
