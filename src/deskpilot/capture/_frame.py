"""One captured frame: RGB pixels plus everything needed to act on what they show."""

from __future__ import annotations

import base64
from typing import Any

import numpy as np
import numpy.typing as npt

from deskpilot import imaging
from deskpilot.geometry import Mapping, Rect
from deskpilot.imaging import PngFilter

__all__ = ["Frame"]


class Frame:
    """An RGB image of a working area of the desktop.

    ``rgb`` is HxWx3 uint8 (C-contiguous, owned by this frame: the capturer reuses the
    buffer only once nothing refers to it any more). ``area`` is the physical rectangle
    it shows, ``mapping`` converts between image, model (0..1000) and physical
    coordinates, ``cursor`` is the pointer's physical position when the cursor was
    captured (else None), ``timestamp`` the ``time.time()`` of the grab and
    ``timings`` the seconds each phase took (``capture``, ``cursor``, ``prepare``).
    """

    __slots__ = ("_png", "area", "cursor", "mapping", "monitor", "rgb", "timestamp", "timings")

    def __init__(
        self,
        rgb: npt.NDArray[np.uint8],
        area: Rect,
        *,
        cursor: tuple[int, int] | None = None,
        timestamp: float = 0.0,
        monitor: int = 0,
        timings: dict[str, float] | None = None,
    ) -> None:
        if rgb.ndim != 3 or rgb.shape[2] != 3 or rgb.dtype != np.uint8:
            raise ValueError(f"rgb must be an HxWx3 uint8 array, got {rgb.shape} {rgb.dtype}")
        self.rgb = rgb
        self.area = area
        self.mapping = Mapping(area, int(rgb.shape[1]), int(rgb.shape[0]))
        self.cursor = cursor
        self.timestamp = timestamp
        self.monitor = monitor
        self.timings: dict[str, float] = dict(timings or {})
        self._png: dict[tuple[int, PngFilter], bytes] = {}

    @property
    def size(self) -> tuple[int, int]:
        """Image size (width, height)."""
        return (int(self.rgb.shape[1]), int(self.rgb.shape[0]))

    @property
    def scale(self) -> tuple[float, float]:
        """Physical pixels per image pixel on each axis."""
        return self.mapping.scale

    def png(self, level: int = 1, filter: PngFilter = "adaptive") -> bytes:
        """The frame as PNG bytes (encoded once per level and filter, then cached)."""
        key = (level, filter)
        data = self._png.get(key)
        if data is None:
            data = self._png[key] = imaging.encode_png(self.rgb, level=level, filter=filter)
        return data

    def data_url(self, level: int = 1, filter: PngFilter = "adaptive") -> str:
        """``data:image/png;base64,...`` for a chat message's image_url."""
        return "data:image/png;base64," + base64.b64encode(self.png(level, filter)).decode("ascii")

    # -- coordinates (all delegated to the mapping: one formula, in geometry.py) --------

    def norm_to_physical(self, nx: float, ny: float) -> tuple[int, int]:
        """A model point (0..1000 over this image) -> the physical pixel to act on."""
        return self.mapping.norm_to_physical(nx, ny)

    def physical_to_norm(self, px: int, py: int) -> tuple[int, int]:
        return self.mapping.physical_to_norm(px, py)

    def image_to_physical(self, ix: float, iy: float) -> tuple[int, int]:
        """An image pixel -> the physical pixel under its centre."""
        return self.mapping.image_to_physical(ix, iy)

    def physical_to_image(self, px: int, py: int) -> tuple[int, int]:
        return self.mapping.physical_to_image(px, py)

    def describe(self) -> dict[str, Any]:
        """The observation record: monitor, origin, physical size, image size, scale."""
        return {"monitor": self.monitor, **self.mapping.describe(), "cursor": list(self.cursor) if self.cursor else None}

    def __repr__(self) -> str:
        w, h = self.size
        a = self.area
        return f"<Frame {w}x{h} of {a.width}x{a.height}+{a.left}+{a.top} monitor={self.monitor}>"
