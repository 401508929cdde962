"""Per-axis area-average weights, shared by the compiled core and the reference.

Area averaging (StretchBlt HALFTONE, OpenCV INTER_AREA) gives every destination pixel
``j`` the source interval ``[j * s, (j + 1) * s)`` with ``s = src / dst`` and weights each
source pixel by the fraction of that interval it covers. A 1-px stroke therefore turns
grey instead of vanishing (Pillow's BOX filter gives whole source pixels weight 0 or 1).
The same formula upscales (``s < 1``): a destination pixel then covers parts of at most
two source pixels.

Weights are fixed point with :data:`WEIGHT_ONE` = 2**16 per destination pixel and are
computed with exact integer arithmetic, so both backends use bit-identical weights:
multiplying every position by ``dst`` makes the interval ``[j * src, (j + 1) * src)``
integral, the covered part of source pixel ``i`` is ``clamp((i + 1) * dst) - clamp(i * dst)``
and the weight is the difference of the *rounded cumulative* coverage. The weights of one
destination pixel therefore sum to exactly :data:`WEIGHT_ONE` (a flat area stays exactly
flat) and every partial sum is within half a unit of the exact value, which keeps the
result within ±1 of the exact float64 average (see ``downscale``'s error budget).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import numpy.typing as npt

__all__ = ["WEIGHT_BITS", "WEIGHT_ONE", "AxisWeights", "axis_weights"]

WEIGHT_BITS = 16
WEIGHT_ONE = 1 << WEIGHT_BITS


@dataclass(frozen=True, slots=True)
class AxisWeights:
    """Taps of one axis: destination ``j`` reads ``counts[j]`` source pixels from ``starts[j]``.

    ``weights[j, t]`` (uint32, sum per row == WEIGHT_ONE) belongs to source pixel
    ``starts[j] + t``; entries past ``counts[j]`` are zero. ``starts + counts <= src``.
    """

    src: int
    dst: int
    starts: npt.NDArray[np.int32]
    counts: npt.NDArray[np.int32]
    weights: npt.NDArray[np.uint32]

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
    taps = starts[:, None] + np.arange(max_taps, dtype=np.int64)[None, :]
    # covered length (in 1/dst units) of source pixels [start, start + t) inside dst j
    edge = np.clip((taps + 1) * dst, lo[:, None], hi[:, None]) - lo[:, None]
    cumulative = _rounded_cumulative(edge, src)
    previous = np.concatenate([np.zeros((dst, 1), np.int64), cumulative[:, :-1]], axis=1)
    weights = cumulative - previous
    weights[np.arange(max_taps)[None, :] >= counts[:, None]] = 0
    result = AxisWeights(
        src=src,
        dst=dst,
        starts=starts.astype(np.int32),
        counts=counts.astype(np.int32),
        weights=weights.astype(np.uint32),
    )
    for array in (result.starts, result.counts, result.weights):
        array.flags.writeable = False
    return result
