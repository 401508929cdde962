"""numpy reference of the annotation kernels in ``native/annotate.pyx``.

Each function mirrors its compiled twin operation for operation (same float expressions,
same candidate pixels, same integer blend), vectorized over the pixels of one primitive
at a time, so the two backends agree bit for bit and the tests can demand it. It is the
backend when ``DESKPILOT_PURE=1`` or the compiled core is not built, and the yardstick
in ``benchmarks/bench_annotate.py``.

Like the compiled kernels it trusts its arguments: :mod:`deskpilot.imaging._overlay` checks
them (frame, tables, colours, gradient table, font) before either backend runs.

Blending of one channel: ``out = (src * a + dst * (255 - a) + 127) // 255``.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

__all__ = [
    "CORE_VERSION",
    "FIRST_GLYPH",
    "LAST_GLYPH",
    "box_heat",
    "heat_spots",
    "lines",
    "rects",
    "rings",
    "text",
]

#: The reference is always current: it is the source the compiled core is checked against.
CORE_VERSION = "reference"
FIRST_GLYPH = 32
LAST_GLYPH = 126

U8 = npt.NDArray[np.uint8]
F64 = npt.NDArray[np.float64]
I32 = npt.NDArray[np.int32]


def _clamp_index(v: float, hi: int) -> int:
    return 0 if v < 0.0 else hi if v > hi else int(v)


def _blend(
    region: U8,
    mask: npt.NDArray[np.bool_],
    rgb: npt.NDArray[np.int32],
    alpha: npt.NDArray[np.int32] | np.int32,
) -> None:
    """Blend ``rgb`` (n x 3 or 3) with per-pixel ``alpha`` into ``region[mask]``."""
    if not mask.any():
        return
    dst = region[mask].astype(np.int32)
    a = alpha[:, None] if isinstance(alpha, np.ndarray) else alpha
    out = (rgb * a + dst * (255 - a) + 127) // 255
    region[mask] = out.astype(np.uint8)


def _centres(lo: int, hi: int) -> npt.NDArray[np.float64]:
    return np.arange(lo, hi + 1, dtype=np.float64) + 0.5


def heat_spots(frame: U8, spots: F64, lut: U8) -> None:
    """Blend radial gradients centred at ``spots`` rows ``(cx, cy, radius, alpha_q)``."""
    img, arr = frame, spots
    table = lut.astype(np.int32)
    height, width = img.shape[:2]
    if height == 0 or width == 0:
        return
    size = table.shape[0]
    for cx, cy, r, aq_f in arr:
        aq = int(aq_f)
        if not r >= 1e-6 or aq <= 0:
            continue
        r2 = r * r
        k = (size - 1) / r2
        y_lo = _clamp_index(math.floor(cy - r - 0.5) - 1.0, height - 1)
        y_hi = _clamp_index(math.ceil(cy + r - 0.5) + 1.0, height - 1)
        x_lo = _clamp_index(math.floor(cx - r - 0.5) - 1.0, width - 1)
        x_hi = _clamp_index(math.ceil(cx + r - 0.5) + 1.0, width - 1)
        dy = _centres(y_lo, y_hi) - cy
        dx = _centres(x_lo, x_hi) - cx
        d2 = (dx * dx)[None, :] + (dy * dy)[:, None]
        inside = d2 < r2
        idx = (np.where(inside, d2, 0.0) * k + 0.5).astype(np.intp)
        entry = table[idx]
        alpha = (entry[..., 3] * aq + 128) >> 8
        mask = inside & (alpha > 0)
        region = img[y_lo : y_hi + 1, x_lo : x_hi + 1]
        _blend(region, mask, entry[..., :3][mask], alpha[mask])


def box_heat(frame: U8, boxes: I32, lut: U8) -> None:
    """Fill boxes ``(x0, y0, x1, y1, alpha_q)`` with a radial gradient reaching the corners."""
    img, arr = frame, boxes
    table = lut.astype(np.int32)
    height, width = img.shape[:2]
    if height == 0 or width == 0:
        return
    size = table.shape[0]
    for bx0, by0, bx1, by1, aq in (tuple(int(v) for v in row) for row in arr):
        w, h = float(bx1 - bx0), float(by1 - by0)
        if w <= 0.0 or h <= 0.0 or aq <= 0:
            continue
        cx, cy = bx0 + 0.5 * w, by0 + 0.5 * h
        r2 = 0.25 * (w * w + h * h)
        k = (size - 1) / r2
        x0, y0, x1, y1 = max(bx0, 0), max(by0, 0), min(bx1, width), min(by1, height)
        if x1 <= x0 or y1 <= y0:
            continue
        dy = _centres(y0, y1 - 1) - cy
        dx = _centres(x0, x1 - 1) - cx
        d2 = (dx * dx)[None, :] + (dy * dy)[:, None]
        idx = np.minimum((d2 * k + 0.5).astype(np.intp), size - 1)
        entry = table[idx]
        alpha = (entry[..., 3] * aq + 128) >> 8
        mask = alpha > 0
        _blend(img[y0:y1, x0:x1], mask, entry[..., :3][mask], alpha[mask])


def rects(frame: U8, rects: I32) -> None:
    """Rectangles ``(x0, y0, x1, y1, border, r, g, b, a)``; ``border <= 0`` fills."""
    img, arr = frame, rects
    height, width = img.shape[:2]
    for rx0, ry0, rx1, ry1, bw, r, g, b, a in (tuple(int(v) for v in row) for row in arr):
        if a <= 0:
            continue
        x0, y0, x1, y1 = max(rx0, 0), max(ry0, 0), min(rx1, width), min(ry1, height)
        if x1 <= x0 or y1 <= y0:
            continue
        ys = np.arange(y0, y1)[:, None]
        xs = np.arange(x0, x1)[None, :]
        if bw <= 0:
            mask = np.ones((y1 - y0, x1 - x0), dtype=bool)
        else:
            inner = (xs >= rx0 + bw) & (xs < rx1 - bw) & (ys >= ry0 + bw) & (ys < ry1 - bw)
            mask = ~inner
        rgb = np.array([r, g, b], dtype=np.int32)
        _blend(img[y0:y1, x0:x1], mask, rgb, np.int32(a))


def rings(frame: U8, rings: F64) -> None:
    """Rings ``(cx, cy, r_inner, r_outer, r, g, b, a)``: pixels with r_in <= d < r_out."""
    img, arr = frame, rings
    height, width = img.shape[:2]
    if height == 0 or width == 0:
        return
    for cx, cy, r_in, ro, r, g, b, a in arr:
        if not ro > 0.0 or int(a) <= 0:
            continue
        ri2, ro2 = r_in * r_in, ro * ro
        y_lo = _clamp_index(math.floor(cy - ro - 0.5) - 1.0, height - 1)
        y_hi = _clamp_index(math.ceil(cy + ro - 0.5) + 1.0, height - 1)
        x_lo = _clamp_index(math.floor(cx - ro - 0.5) - 1.0, width - 1)
        x_hi = _clamp_index(math.ceil(cx + ro - 0.5) + 1.0, width - 1)
        dy = _centres(y_lo, y_hi) - cy
        dx = _centres(x_lo, x_hi) - cx
        d2 = (dx * dx)[None, :] + (dy * dy)[:, None]
        mask = (d2 < ro2) & (d2 >= ri2)
        rgb = np.array([int(r), int(g), int(b)], dtype=np.int32)
        _blend(img[y_lo : y_hi + 1, x_lo : x_hi + 1], mask, rgb, np.int32(int(a)))


def lines(frame: U8, lines: F64) -> None:
    """Thick segments ``(x0, y0, x1, y1, width, r, g, b, a)`` with round caps."""
    img, arr = frame, lines
    height, width = img.shape[:2]
    if height == 0 or width == 0:
        return
    for x0, y0, x1, y1, lw, r, g, b, a in arr:
        hw = 0.5 * lw
        if not hw > 0.0 or int(a) <= 0:
            continue
        hw2 = hw * hw
        ddx, ddy = x1 - x0, y1 - y0
        len2 = ddx * ddx + ddy * ddy
        y_lo = _clamp_index(math.floor(min(y0, y1) - hw - 0.5) - 1.0, height - 1)
        y_hi = _clamp_index(math.ceil(max(y0, y1) + hw - 0.5) + 1.0, height - 1)
        x_lo = _clamp_index(math.floor(min(x0, x1) - hw - 0.5) - 1.0, width - 1)
        x_hi = _clamp_index(math.ceil(max(x0, x1) + hw - 0.5) + 1.0, width - 1)
        py = _centres(y_lo, y_hi)[:, None]
        px = _centres(x_lo, x_hi)[None, :]
        if len2 > 0.0:
            t = np.clip(((px - x0) * ddx + (py - y0) * ddy) / len2, 0.0, 1.0)
        else:
            t = np.zeros((py.shape[0], px.shape[1]))
        ex = px - (x0 + t * ddx)
        ey = py - (y0 + t * ddy)
        mask = ex * ex + ey * ey <= hw2
        rgb = np.array([int(r), int(g), int(b)], dtype=np.int32)
        _blend(img[y_lo : y_hi + 1, x_lo : x_hi + 1], mask, rgb, np.int32(int(a)))


def text(frame: U8, runs: I32, codes: bytes, font: U8, cell_width: int) -> None:
    """Text runs ``(x, y, start, length, scale, r, g, b, a)`` in a bitmap font."""
    img, arr, font_arr = frame, runs, font
    code_arr = np.frombuffer(codes, dtype=np.uint8)
    height, width = img.shape[:2]
    cw = int(cell_width)
    shifts = np.arange(cw - 1, -1, -1, dtype=np.uint8)
    # Glyph bitmaps as booleans (95, rows, cw).
    bitmaps = ((font_arr[:, :, None] >> shifts[None, None, :]) & 1).astype(bool)
    for x, y, start, length, s, r, g, b, a in (tuple(int(v) for v in row) for row in arr):
        if s <= 0 or a <= 0 or start < 0 or length <= 0 or start + length > code_arr.shape[0]:
            continue
        chars = code_arr[start : start + length].astype(np.intp)
        chars = np.where((chars < FIRST_GLYPH) | (chars > LAST_GLYPH), ord("?"), chars)
        # The whole run as one bitmap, each glyph pixel an s x s block.
        run = np.concatenate([bitmaps[c - FIRST_GLYPH] for c in chars], axis=1)
        run = np.repeat(np.repeat(run, s, axis=0), s, axis=1)
        rh, rw = run.shape
        x0, y0, x1, y1 = max(x, 0), max(y, 0), min(x + rw, width), min(y + rh, height)
        if x1 <= x0 or y1 <= y0:
            continue
        mask = run[y0 - y : y1 - y, x0 - x : x1 - x]
        rgb = np.array([r, g, b], dtype=np.int32)
        _blend(img[y0:y1, x0:x1], mask, rgb, np.int32(a))
