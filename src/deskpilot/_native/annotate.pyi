"""Annotation kernels (compiled from native/annotate.pyx); call them through deskpilot.imaging.

The wrappers in deskpilot.imaging._overlay (draw_plan, Primitives) check every argument
first; the kernels trust it: a writable frame with packed RGB pixels (rows may be strided),
C-contiguous tables of the width and dtype below with finite values, colours 0..255,
alpha_q 0..256, a gradient table of 2..65536 RGBA entries, the (95, rows) font and
cell_width 1..8. The numpy reference deskpilot.imaging._overlay_reference has the same
functions and draws identical bytes.

Every kernel draws a batch of one primitive onto an RGB HxWx3 uint8 frame in place, with
the GIL released, clipped at every edge. Blending: ``(src*a + dst*(255-a) + 127) // 255``.
"""

import numpy as np
import numpy.typing as npt

_U8 = npt.NDArray[np.uint8]
_F64 = npt.NDArray[np.float64]
_I32 = npt.NDArray[np.int32]

CORE_VERSION: str
FIRST_GLYPH: int
LAST_GLYPH: int

def heat_spots(frame: _U8, spots: _F64, lut: _U8) -> None:
    """Radial gradients at rows ``(cx, cy, radius, alpha_q 0..256)``; ``lut`` indexed by t^2."""

def box_heat(frame: _U8, boxes: _I32, lut: _U8) -> None:
    """Boxes ``(x0, y0, x1, y1, alpha_q)`` filled with a radial gradient reaching the corners."""

def rects(frame: _U8, rects: _I32) -> None:
    """Rectangles ``(x0, y0, x1, y1, border, r, g, b, a)``; ``border <= 0`` fills."""

def rings(frame: _U8, rings: _F64) -> None:
    """Rings ``(cx, cy, r_inner, r_outer, r, g, b, a)``; ``r_inner = 0`` is a disc."""

def lines(frame: _U8, lines: _F64) -> None:
    """Segments ``(x0, y0, x1, y1, width, r, g, b, a)`` with round caps."""

def text(frame: _U8, runs: _I32, codes: bytes, font: _U8, cell_width: int) -> None:
    """Text runs ``(x, y, start, length, scale, r, g, b, a)`` into ``codes``, (95, rows) font."""
