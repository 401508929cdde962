"""Annotation kernels (compiled from native/annotate.pyx); see deskpilot.imaging._overlay.

Every kernel draws a batch of one primitive onto an RGB HxWx3 uint8 frame in place, with
the GIL released, clipped at every edge. Blending: ``(src*a + dst*(255-a) + 127) // 255``.
"""

from typing import Any

import numpy as np
import numpy.typing as npt

CORE_VERSION: str
FIRST_GLYPH: int
LAST_GLYPH: int

def heat_spots(frame: npt.NDArray[np.uint8], spots: npt.ArrayLike, lut: npt.ArrayLike) -> None:
    """Radial gradients at rows ``(cx, cy, radius, alpha_q 0..256)``; ``lut`` indexed by t^2."""

def box_heat(frame: npt.NDArray[np.uint8], boxes: npt.ArrayLike, lut: npt.ArrayLike) -> None:
    """Boxes ``(x0, y0, x1, y1, alpha_q)`` filled with a radial gradient reaching the corners."""

def rects(frame: npt.NDArray[np.uint8], rects: npt.ArrayLike) -> None:
    """Rectangles ``(x0, y0, x1, y1, border, r, g, b, a)``; ``border <= 0`` fills."""

def rings(frame: npt.NDArray[np.uint8], rings: npt.ArrayLike) -> None:
    """Rings ``(cx, cy, r_inner, r_outer, r, g, b, a)``; ``r_inner = 0`` is a disc."""

def lines(frame: npt.NDArray[np.uint8], lines: npt.ArrayLike) -> None:
    """Segments ``(x0, y0, x1, y1, width, r, g, b, a)`` with round caps."""

def text(
    frame: npt.NDArray[np.uint8],
    runs: npt.ArrayLike,
    codes: bytes | bytearray | memoryview,
    font: npt.NDArray[Any],
    cell_width: int,
) -> None:
    """Text runs ``(x, y, start, length, scale, r, g, b, a)`` in a (95, rows) bitmap font."""
