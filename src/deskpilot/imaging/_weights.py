"""Per-axis area-average weights, shared by the compiled core and the reference.

Area averaging (StretchBlt HALFTONE, OpenCV INTER_AREA) gives every destination pixel
``j`` the source interval ``[j * s, (j + 1) * s)`` with ``s = src / dst`` and weights each
source pixel by the fraction of that interval it covers. A 1-px stroke therefore turns
grey instead of vanishing (Pillow's BOX filter gives whole source pixels weight 0 or 1).
The same formula upscales (``s < 1``): a destination pixel then covers parts of at most
two source pixels.

Weights are fixed point with :data:`WEIGHT_ONE` = 2**14 per destination pixel (small
enough for int16 multiply-add instructions) and are computed with exact integer
arithmetic, so both backends use bit-identical weights: multiplying every position by
``dst`` makes the interval ``[j * src, (j + 1) * src)`` integral, the covered part of source
pixel ``i`` is ``clamp((i + 1) * dst) - clamp(i * dst)`` and the weight is the difference of
the *rounded cumulative* coverage. The weights of one destination pixel therefore sum to
exactly :data:`WEIGHT_ONE` (a flat area stays exactly flat) and every partial sum is within
half a unit of the exact value.

Error budget (per channel, in output units): the final rounding (0.5), the 7-bit rounding
between the passes (1/256), and the weight quantization, at most
``0.5 * 2**-14 * 255 * (taps - 1)`` per axis -- about 0.03 for the 3 taps of a 1.25x
downscale -- so results are within ±1 of the exact float64 average for any realistic
scale factor (the bound reaches 1 only past ~250 taps, i.e. shrinking 250x).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import numpy.typing as npt

__all__ = ["WEIGHT_BITS", "WEIGHT_ONE", "AxisWeights", "axis_weights"]

WEIGHT_BITS = 14
WEIGHT_ONE = 1 << WEIGHT_BITS


@dataclass(frozen=True, slots=True)
class AxisWeights:
    """Taps of one axis: destination ``j`` reads ``counts[j]`` source pixels from ``starts[j]``.

    ``weights[j, t]`` (int16, sum per row == WEIGHT_ONE) belongs to source pixel
    ``starts[j] + t``; entries past ``counts[j]`` are zero and the number of columns is
    even (the compiled vertical pass takes rows two at a time). ``starts + counts <= src``.

    The same taps aligned to even source pixels, for the compiled horizontal pass that
    multiplies two neighbouring pixels at once: destination ``j`` reads source pixel pairs
    ``pair_starts[j] + q`` (pixels ``2 * (pair_starts[j] + q)`` and the next one) with
    weights ``pair_weights[j, q]``, for ``q`` < the uniform ``pair_weights.shape[1]``
    (zero-padded). ``pair_weights_wide`` holds the same numbers ready for 256-bit
    registers: for destination pixels ``2k`` and ``2k + 1``, tap pair ``q``, the weight pair
    of ``2k`` repeated four times (one per channel) then that of ``2k + 1``.
    """

    src: int
    dst: int
    starts: npt.NDArray[np.int32]
    counts: npt.NDArray[np.int32]
    weights: npt.NDArray[np.int16]
    pair_starts: npt.NDArray[np.int32]
    pair_weights: npt.NDArray[np.int16]
    pair_weights_wide: npt.NDArray[np.int16]

    @property
    def max_taps(self) -> int:
        return int(self.weights.shape[1])


def _rounded_cumulative(numerator: npt.NDArray[np.int64], src: int) -> npt.NDArray[np.int64]:
    """round(WEIGHT_ONE * numerator / src), exactly, half up (numerator in 0..src)."""
    result: npt.NDArray[np.int64] = (2 * WEIGHT_ONE * numerator + src) // (2 * src)
    return result


@lru_cache(maxsize=64)
def axis_weights(src: int, dst: int) -> AxisWeights:
    """Area-average weights mapping ``src`` pixels onto ``dst`` pixels (cached per pair)."""
    if src <= 0 or dst <= 0:
        raise ValueError(f"axis sizes must be positive, got src={src} dst={dst}")
    j = np.arange(dst, dtype=np.int64)
    lo = j * src  # destination interval in units of 1/dst source pixels
    hi = lo + src
    starts = lo // dst
    ends = (hi + dst - 1) // dst  # exclusive; ceil
    counts = ends - starts
    max_taps = int(counts.max())
    max_taps += max_taps % 2
    taps = starts[:, None] + np.arange(max_taps, dtype=np.int64)[None, :]
    # covered length (in 1/dst units) of source pixels [start, start + t) inside dst j
    edge = np.clip((taps + 1) * dst, lo[:, None], hi[:, None]) - lo[:, None]
    cumulative = _rounded_cumulative(edge, src)
    previous = np.concatenate([np.zeros((dst, 1), np.int64), cumulative[:, :-1]], axis=1)
    weights = cumulative - previous
    weights[np.arange(max_taps)[None, :] >= counts[:, None]] = 0
    odd = starts % 2
    pairs = int(((odd + counts + 1) // 2).max())
    aligned = np.zeros((dst, 2 * pairs), np.int64)
    columns = np.arange(max_taps)[None, :] + odd[:, None]
    keep = columns < 2 * pairs
    aligned[np.nonzero(keep)[0], columns[keep]] = weights[keep]
    paired = aligned.reshape(dst, pairs, 2)
    even = np.zeros((dst + dst % 2, pairs, 2), np.int64)
    even[:dst] = paired
    # (k, q, pixel 2k or 2k+1, channel, pair) -> (k, q, 16)
    wide = np.broadcast_to(
        even.reshape(-1, 2, pairs, 1, 2).transpose(0, 2, 1, 3, 4),
        (even.shape[0] // 2, pairs, 2, 4, 2),
    ).reshape(-1, pairs, 16)
    result = AxisWeights(
        src=src,
        dst=dst,
        starts=starts.astype(np.int32),
        counts=counts.astype(np.int32),
        weights=weights.astype(np.int16),
        pair_starts=(starts // 2).astype(np.int32),
        pair_weights=paired.astype(np.int16),
        pair_weights_wide=np.ascontiguousarray(wide, dtype=np.int16),
    )
    for array in (
        result.starts,
        result.counts,
        result.weights,
        result.pair_starts,
        result.pair_weights,
        result.pair_weights_wide,
    ):
        array.flags.writeable = False
    return result
