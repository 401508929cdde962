"""numpy reference of every compiled kernel (the specification, and the DESKPILOT_PURE backend).

Each function has exactly the signature and the arithmetic of its counterpart in
``native/imaging.pyx``; the public wrappers in ``_api.py`` validate arguments, clip regions
and hand both backends the same already-checked arrays. The test-suite runs the same
bodies against both and requires bit-identical results, so any change here must be made
there too (and vice versa).

Conventions shared with the compiled core:

* images are ``(H, W, C)`` uint8 arrays whose pixel stride is ``C`` bytes and channel stride
  1 byte; the row stride may be anything (a crop of a bigger frame);
* fixed-point area averaging with 14-bit weights: vertical pass
  ``v = (sum w * src + 64) >> 7`` (7 fractional bits), horizontal pass
  ``out = (sum w * v + 2**20) >> 21`` (see :mod:`deskpilot.imaging._weights`);
* ``div255(v) = (v + 128 + ((v + 128) >> 8)) >> 8`` is ``round(v / 255)`` for
  ``0 <= v <= 255 * 255`` (alpha blending).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = [
    "CORE_VERSION",
    "DIGEST_INDEX_KEY",
    "DIGEST_MULTIPLIER",
    "DIGEST_MULTIPLIER_2",
    "change_bounds",
    "composite",
    "digest",
    "mix64",
    "png_filter",
    "resample",
    "swizzle",
]

U8 = npt.NDArray[np.uint8]
CORE_VERSION = "reference"

# Cursor kinds and PNG filter modes as the kernels number them (see _api.py for names).
KIND_PREMULTIPLIED, KIND_STRAIGHT, KIND_MASKED, KIND_MONO = 0, 1, 2, 3
FILTER_NONE, FILTER_SUB, FILTER_UP, FILTER_AVG, FILTER_PAETH, FILTER_ADAPTIVE = range(6)

# frame_digest: every 8-byte little-endian word w_i (rows zero-padded to whole words, i
# counting across rows) contributes m = w_i ^ (i * KEY); m *= MUL1; m ^= m >> 32;
# m *= MUL2; m ^= m >> 29, summed mod 2**64, then the shape is mixed in. Each step is a
# bijection of w_i, so a change confined to one word always changes the digest, and the
# two multiplies make the change of the sum depend on the word's value and position (a
# single multiply would make equal bit flips in different words collide). The sum is
# order-free, which keeps this reference vectorized.
DIGEST_INDEX_KEY = 0x9E3779B97F4A7C15
DIGEST_MULTIPLIER = 0xD6E8FEB86659FD93
DIGEST_MULTIPLIER_2 = 0xFF51AFD7ED558CCD
_MASK64 = (1 << 64) - 1


def mix64(z: int) -> int:
    """splitmix64's finalizer (a bijection on 64-bit integers)."""
    z &= _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return z ^ (z >> 31)


def resample(src: U8, out: U8, channel_map: npt.NDArray[np.intp], xw: Any, yw: Any) -> None:
    """Area-average ``src`` (H, W, Cin) into ``out`` (h, w, Cout); out[..., c] reads channel_map[c].

    ``xw`` / ``yw`` are the :class:`~deskpilot.imaging._weights.AxisWeights` of each axis
    (padded taps carry weight 0, so they are simply summed along).
    """
    height, width = src.shape[0], src.shape[1]
    src32 = src.astype(np.int32)
    vertical = np.zeros((out.shape[0], width, src.shape[2]), np.int32)
    for tap in range(yw.weights.shape[1]):
        rows = np.minimum(yw.starts.astype(np.intp) + tap, height - 1)
        vertical += yw.weights[:, tap, None, None].astype(np.int32) * src32[rows]
    fixed = ((vertical + 64) >> 7)[:, :, channel_map]
    horizontal = np.full(out.shape, 1 << 20, np.int32)
    for tap in range(xw.weights.shape[1]):
        cols = np.minimum(xw.starts.astype(np.intp) + tap, width - 1)
        horizontal += xw.weights[None, :, tap, None].astype(np.int32) * fixed[:, cols, :]
    out[...] = horizontal >> 21


def swizzle(src: U8, out: U8, channel_map: npt.NDArray[np.intp]) -> None:
    """Same-size copy with channels reordered: out[..., c] = src[..., channel_map[c]]."""
    out[...] = src[:, :, channel_map]


def _div255(v: npt.NDArray[np.uint32]) -> npt.NDArray[np.uint32]:
    shifted = v + np.uint32(128)
    result: npt.NDArray[np.uint32] = ((shifted + (shifted >> 8)) >> 8).astype(np.uint32)
    return result


def composite(frame: U8, cursor: U8, kind: int) -> None:
    """Draw ``cursor`` over the same-size ``frame`` view (both already clipped), in place."""
    dst = frame[:, :, :3].astype(np.uint32)
    if kind == KIND_MONO:
        and_mask = cursor[:, :, 0:1] != 0
        xor_mask = np.where(cursor[:, :, 1:2] != 0, np.uint32(255), np.uint32(0))
        frame[:, :, :3] = np.where(and_mask, dst, np.uint32(0)) ^ xor_mask
        return
    colour = cursor[:, :, :3].astype(np.uint32)
    alpha = cursor[:, :, 3:4].astype(np.uint32)
    if kind == KIND_MASKED:
        frame[:, :, :3] = np.where(alpha != 0, dst ^ colour, colour)
        return
    inverse = 255 - alpha
    if kind == KIND_PREMULTIPLIED:
        blended = np.minimum(colour + _div255(dst * inverse), 255)
    else:
        blended = _div255(colour * alpha + dst * inverse)
    frame_alpha = frame[:, :, 3:4].astype(np.uint32)
    frame[:, :, 3:4] = alpha + _div255(frame_alpha * inverse)
    frame[:, :, :3] = blended


def _filtered_rows(img: U8) -> tuple[npt.NDArray[np.int16], ...]:
    """The five PNG filters applied to every row, as int16 before the mod-256 wrap."""
    height, width, channels = img.shape
    x = img.reshape(height, width * channels).astype(np.int16)
    a = np.zeros_like(x)
    a[:, channels:] = x[:, :-channels]
    b = np.zeros_like(x)
    b[1:] = x[:-1]
    c = np.zeros_like(x)
    c[1:, channels:] = x[:-1, :-channels]
    p = a + b - c
    pa, pb, pc = np.abs(p - a), np.abs(p - b), np.abs(p - c)
    paeth = np.where((pa <= pb) & (pa <= pc), a, np.where(pb <= pc, b, c))
    return (x, x - a, x - b, x - ((a + b) >> 1), x - paeth)


def png_filter(img: U8, mode: int, out: U8) -> None:
    """Write filter byte + filtered scanline per row into ``out`` (H, 1 + W*C).

    ``adaptive`` picks, per row, the filter with the smallest sum of the residuals read
    as signed bytes (libpng's heuristic); ties go to the lower filter number.
    """
    candidates = [(v & 0xFF).astype(np.uint8) for v in _filtered_rows(img)]
    if mode == FILTER_ADAPTIVE:
        costs = np.stack(
            [np.where(v < 128, v, 256 - v.astype(np.int32)).sum(axis=1) for v in candidates]
        )
        choice = np.argmin(costs, axis=0)
    else:
        choice = np.full(img.shape[0], mode)
    stacked = np.stack(candidates)
    out[:, 0] = choice
    out[:, 1:] = stacked[choice, np.arange(img.shape[0])]


def digest(img: U8) -> int:
    """64-bit digest of the pixels and the shape (see DIGEST_* above)."""
    height, width, channels = img.shape
    row_bytes = width * channels
    words_per_row = (row_bytes + 7) // 8
    padded = np.zeros((height, words_per_row * 8), np.uint8)
    padded[:, :row_bytes] = img.reshape(height, row_bytes)
    words = padded.view("<u8").ravel()
    index = np.arange(words.size, dtype=np.uint64) * np.uint64(DIGEST_INDEX_KEY)
    mixed = (words ^ index) * np.uint64(DIGEST_MULTIPLIER)
    mixed ^= mixed >> np.uint64(32)
    mixed *= np.uint64(DIGEST_MULTIPLIER_2)
    mixed ^= mixed >> np.uint64(29)
    total = int(mixed.sum(dtype=np.uint64))
    return mix64(total ^ mix64((height << 40) ^ (width << 8) ^ channels))


def change_bounds(a: U8, b: U8) -> tuple[int, int, int, int] | None:
    """Bounding box (x, y, w, h) of the pixels where two same-shape images differ."""
    differs = (a != b).any(axis=2)
    rows = np.flatnonzero(differs.any(axis=1))
    if rows.size == 0:
        return None
    cols = np.flatnonzero(differs[rows[0] : rows[-1] + 1].any(axis=0))
    x0, x1 = int(cols[0]), int(cols[-1])
    y0, y1 = int(rows[0]), int(rows[-1])
    return (x0, y0, x1 - x0 + 1, y1 - y0 + 1)
