"""Pixel kernels (compiled from native/imaging.pyx); call them through deskpilot.imaging.

The wrappers in deskpilot.imaging._api validate every argument first: uint8 arrays,
non-empty, pixel stride == channel count, channel stride 1, regions clipped, outputs
C-contiguous. The numpy reference deskpilot.imaging._reference has the same functions
and computes identical bytes. Every loop runs with the GIL released.
"""

import numpy as np
import numpy.typing as npt

from deskpilot.imaging._weights import AxisWeights

_U8 = npt.NDArray[np.uint8]

CORE_VERSION: str
SIMD_AVAILABLE: bool

def simd_enabled() -> bool:
    """True when the AVX2 row kernels are in use (DESKPILOT_NO_SIMD=1 turns them off)."""

def set_simd(enabled: bool) -> bool:
    """Use the AVX2 kernels (if the CPU has them) or the scalar ones; returns the old setting."""

def resample(
    src: _U8, out: _U8, channel_map: npt.NDArray[np.intp], xw: AxisWeights, yw: AxisWeights
) -> None:
    """Area-average src (H, W, Cin) into out (h, w, Cout); out[..., c] reads channel_map[c]."""

def swizzle(src: _U8, out: _U8, channel_map: npt.NDArray[np.intp]) -> None:
    """Same-size copy with channels reordered: out[..., c] = src[..., channel_map[c]]."""

def composite(frame: _U8, cursor: _U8, kind: int) -> None:
    """Draw cursor over the same-size (already clipped) frame view, in place."""

def png_filter(img: _U8, mode: int, out: _U8) -> None:
    """Filter byte + filtered scanline per row into out (H, 1 + W*C); mode 5 = adaptive."""

def digest(img: _U8) -> int:
    """64-bit digest of the pixels and the shape."""

def change_bounds(a: _U8, b: _U8) -> tuple[int, int, int, int] | None:
    """Bounding box (x, y, w, h) of the differing pixels of two same-shape images, or None."""
