"""Public pixel functions: validate, clip, then hand checked arrays to the active kernels.

Every kernel (compiled or reference) may assume what this module guarantees: uint8 arrays,
non-empty, pixel stride == channel count, channel stride 1 (row stride arbitrary), regions
inside the frame, outputs of the right shape that do not overlap the input. Anything else
is rejected here with an :class:`~deskpilot.errors.ImagingError` that says what was wrong;
inputs in a layout the kernels cannot walk (a column-strided view, Fortran order) are
copied once rather than rejected.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any, Literal, get_args

import numpy as np
import numpy.typing as npt

from deskpilot._errors import ImagingError
from deskpilot.geometry import Rect
from deskpilot.imaging import _png
from deskpilot.imaging._backend import load_kernels
from deskpilot.imaging._weights import axis_weights

__all__ = [
    "BACKEND",
    "PNG_FILTERS",
    "CursorKind",
    "Region",
    "bgra_to_rgb",
    "changed_region",
    "composite_cursor",
    "crop",
    "downscale",
    "encode_png",
    "frame_digest",
    "prepare",
]

U8 = npt.NDArray[np.uint8]
Region = tuple[int, int, int, int] | Rect
PngFilter = Literal["adaptive", "none", "sub", "up", "avg", "paeth"]
# Same literal as deskpilot.capture.CursorKind (a test keeps them equal); not imported from
# there because capture imports imaging, and pixel code must not depend on backends.
CursorKind = Literal["premultiplied", "straight", "masked", "mono"]

BACKEND, _kernels = load_kernels()

#: Filter names accepted by :func:`encode_png`, with the kernels' mode numbers (the PNG
#: filter types 0-4, and 5 = per-row adaptive choice).
PNG_FILTERS: dict[str, int] = {
    "none": 0,
    "sub": 1,
    "up": 2,
    "avg": 3,
    "paeth": 4,
    "adaptive": 5,
}
_CURSOR_KINDS: dict[str, int] = {"premultiplied": 0, "straight": 1, "masked": 2, "mono": 3}
assert set(_CURSOR_KINDS) == set(get_args(CursorKind))
_PNG_COLOUR_TYPES = {1: 0, 2: 4, 3: 2, 4: 6}  # channels -> grey, grey+alpha, RGB, RGBA
_BGRA_TO_RGB = np.array([2, 1, 0], dtype=np.intp)
_IDENTITY_MAPS = {c: np.arange(c, dtype=np.intp) for c in (1, 2, 3, 4)}


# -- argument checking ---------------------------------------------------------------------


def _int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise ImagingError(f"{what} must be an integer, got {value!r}", value=repr(value))
    return int(value)


def _image(
    value: Any,
    what: str,
    channels: Sequence[int],
    *,
    allow_2d: bool = False,
    writable: bool = False,
) -> U8:
    """An (H, W, C) uint8 view the kernels can walk; grayscale HxW becomes HxWx1."""
    if not isinstance(value, np.ndarray):
        if writable:
            raise ImagingError(f"{what} must be a numpy array, got {type(value).__name__}")
        try:
            value = np.asarray(value)
        except Exception as exc:  # numpy raises many kinds for non-array-likes
            raise ImagingError(f"{what} is not array-like: {exc}") from exc
    if value.dtype != np.uint8:
        raise ImagingError(f"{what} must be uint8, got dtype {value.dtype}", dtype=str(value.dtype))
    if value.ndim == 2 and allow_2d:
        value = value[:, :, None]
    if value.ndim != 3 or value.shape[2] not in channels:
        expected = " or ".join(f"HxWx{c}" for c in channels) + (" or HxW" if allow_2d else "")
        raise ImagingError(
            f"{what} must be {expected} uint8, got shape {value.shape}", shape=value.shape
        )
    height, width, depth = value.shape
    if height == 0 or width == 0:
        raise ImagingError(f"{what} is empty (shape {value.shape})", shape=value.shape)
    if value.strides[2] != 1 or value.strides[1] != depth:
        if writable:
            raise ImagingError(
                f"{what} must have packed pixels (strides (*, {depth}, 1)) to be modified in "
                f"place, got strides {value.strides}",
                strides=value.strides,
            )
        value = np.ascontiguousarray(value)
    if writable and not value.flags.writeable:
        raise ImagingError(f"{what} is read-only; it is modified in place")
    return value  # type: ignore[no-any-return]


def _region(region: Any, height: int, width: int) -> tuple[int, int, int, int]:
    if isinstance(region, Rect):
        x, y, w, h = region.as_tuple()
    else:
        try:
            x, y, w, h = (_int(v, "region value") for v in region)
        except (TypeError, ValueError) as exc:
            if isinstance(exc, ImagingError):
                raise
            raise ImagingError(f"region must be (x, y, w, h), got {region!r}") from exc
    if w <= 0 or h <= 0:
        raise ImagingError(f"region {(x, y, w, h)} is empty", region=(x, y, w, h))
    if x < 0 or y < 0 or x + w > width or y + h > height:
        raise ImagingError(
            f"region {(x, y, w, h)} is not inside the {width}x{height} image",
            region=(x, y, w, h),
            image=(width, height),
        )
    return x, y, w, h


def _size(size: Any) -> tuple[int, int]:
    try:
        w, h = size
    except (TypeError, ValueError) as exc:
        raise ImagingError(f"size must be (width, height), got {size!r}") from exc
    w, h = _int(w, "size width"), _int(h, "size height")
    if w <= 0 or h <= 0:
        raise ImagingError(f"size must be positive, got {(w, h)}", size=(w, h))
    return w, h


def _output(out: Any, shape: tuple[int, int, int], source: U8) -> U8:
    if out is None:
        return np.empty(shape, np.uint8)
    if not isinstance(out, np.ndarray) or out.dtype != np.uint8:
        raise ImagingError("out must be a uint8 numpy array")
    if out.shape != shape:
        raise ImagingError(f"out has shape {out.shape}, expected {shape}", shape=out.shape)
    if not out.flags.c_contiguous or not out.flags.writeable:
        raise ImagingError("out must be a writable C-contiguous array")
    if np.may_share_memory(out, source):
        raise ImagingError("out must not overlap the input image")
    return out


def _resample_into(src: U8, out: U8, channel_map: npt.NDArray[np.intp]) -> U8:
    height, width = src.shape[:2]
    if out.shape[:2] == (height, width):
        _kernels.swizzle(src, out, channel_map)
        return out
    xw = axis_weights(width, out.shape[1])
    yw = axis_weights(height, out.shape[0])
    _kernels.resample(src, out, channel_map, xw, yw)
    return out


# -- public functions ----------------------------------------------------------------------


def prepare(
    bgra: U8,
    *,
    region: Region | Sequence[int] | None = None,
    size: tuple[int, int] | None = None,
    out: U8 | None = None,
) -> U8:
    """Crop, area-average to ``size`` = (w, h) and convert BGRA -> RGB in one pass.

    ``bgra`` is an HxWx4 uint8 frame (C-contiguous or a row-strided view of a bigger one);
    ``region`` = (x, y, w, h) in its pixels, the whole frame by default; ``size`` defaults
    to the region's size (then it is a plain copy + swizzle). Area averaging uses exact
    fractional coverage (OpenCV INTER_AREA / StretchBlt HALFTONE) and is within ±1 of the
    exact float64 average; enlarging uses the same coverage rule. Pass ``out`` (an
    h x w x 3 C-contiguous uint8 array) to reuse the output buffer between grabs.
    """
    src = _image(bgra, "bgra", (4,))
    if region is not None:
        x, y, w, h = _region(region, src.shape[0], src.shape[1])
        src = src[y : y + h, x : x + w]
    width, height = (src.shape[1], src.shape[0]) if size is None else _size(size)
    return _resample_into(src, _output(out, (height, width, 3), src), _BGRA_TO_RGB)


def bgra_to_rgb(bgra: U8, *, out: U8 | None = None) -> U8:
    """HxWx4 BGRA (alpha dropped) -> a new (or ``out``) HxWx3 RGB array."""
    src = _image(bgra, "bgra", (4,))
    return _resample_into(src, _output(out, (*src.shape[:2], 3), src), _BGRA_TO_RGB)


def crop(img: U8, region: Region | Sequence[int], *, copy: bool = True) -> U8:
    """The (x, y, w, h) part of an HxW[xC] image; a C-contiguous copy, or a view if ``copy=False``."""
    if not isinstance(img, np.ndarray):
        raise ImagingError(f"img must be a numpy array, got {type(img).__name__}")
    if img.ndim not in (2, 3) or img.shape[0] == 0 or img.shape[1] == 0:
        raise ImagingError(f"img must be a non-empty HxW or HxWxC array, got shape {img.shape}")
    x, y, w, h = _region(region, img.shape[0], img.shape[1])
    view = img[y : y + h, x : x + w]
    return np.array(view, order="C", copy=True) if copy else view


def downscale(img: U8, size: tuple[int, int], *, out: U8 | None = None) -> U8:
    """Area-average an HxW[xC] uint8 image (C = 1..4, channels kept) to ``size`` = (w, h).

    Exact fractional coverage (OpenCV INTER_AREA), within ±1 of the exact float64 average.
    A larger ``size`` enlarges with the same coverage rule; an equal one copies.
    """
    was_2d = isinstance(img, np.ndarray) and img.ndim == 2
    src = _image(img, "img", (1, 2, 3, 4), allow_2d=True)
    width, height = _size(size)
    channels = src.shape[2]
    if was_2d and out is not None and isinstance(out, np.ndarray) and out.ndim == 2:
        out = out[:, :, None]
    result = _resample_into(
        src, _output(out, (height, width, channels), src), _IDENTITY_MAPS[channels]
    )
    return result[:, :, 0] if was_2d else result


def composite_cursor(
    bgra: U8, cursor: U8, x: int, y: int, *, kind: CursorKind
) -> tuple[int, int, int, int] | None:
    """Draw a cursor image into an HxWx4 BGRA frame in place, clipped at every edge.

    ``(x, y)`` is where the cursor image's top-left corner lands in frame pixels (hotspot
    already subtracted; may be negative or past the frame). Kinds (see
    :data:`deskpilot.capture.CursorKind`): ``premultiplied`` / ``straight`` HxWx4 BGRA
    with alpha (the frame is treated as opaque); ``masked``: HxWx4 BGRA colour whose alpha
    byte is the AND mask (0 = replace with the colour, non-zero = XOR the colour into the
    screen); ``mono``: HxWx2, plane 0 the AND mask, plane 1 the XOR mask (0 or non-zero):
    AND 0 XOR 0 black, AND 0 XOR 1 white, AND 1 XOR 0 transparent, AND 1 XOR 1 inverts
    the screen. Returns the frame rectangle (x, y, w, h) that was drawn, or None when the
    cursor lies entirely outside the frame. The frame's alpha byte is only changed by the
    alpha kinds.
    """
    code = _CURSOR_KINDS.get(kind) if isinstance(kind, str) else None
    if code is None:
        raise ImagingError(
            f"kind must be one of {sorted(_CURSOR_KINDS)}, got {kind!r}", kind=repr(kind)
        )
    frame = _image(bgra, "bgra", (4,), writable=True)
    pixels = _image(cursor, "cursor", (2,) if kind == "mono" else (4,))
    x, y = _int(x, "x"), _int(y, "y")
    left, top = max(x, 0), max(y, 0)
    right = min(x + pixels.shape[1], frame.shape[1])
    bottom = min(y + pixels.shape[0], frame.shape[0])
    if right <= left or bottom <= top:
        return None
    if np.may_share_memory(frame, pixels):
        pixels = pixels.copy()
    _kernels.composite(
        frame[top:bottom, left:right],
        pixels[top - y : bottom - y, left - x : right - x],
        code,
    )
    return (left, top, right - left, bottom - top)


class _Scratch(threading.local):
    """One filter buffer per thread, reused across encodes (no 4 MB page-faulting per frame)."""

    def __init__(self) -> None:
        self.buffer = np.empty(0, np.uint8)

    def get(self, size: int) -> U8:
        if self.buffer.size < size:
            self.buffer = np.empty(size, np.uint8)
        return self.buffer[:size]


_scratch = _Scratch()


def encode_png(img: U8, *, level: int = 1, filter: PngFilter = "adaptive") -> bytes:
    """Encode an HxWx3 RGB (or HxWx4 RGBA, HxW / HxWx1 grey, HxWx2 grey+alpha) uint8 image.

    ``filter``: ``adaptive`` picks per row the PNG filter with the smallest sum of absolute
    residuals; ``none``/``sub``/``up``/``avg``/``paeth`` force one. ``level`` 0-9: levels 0-3
    use ISA-L (fastest; 1 is the sweet spot for screenshots), 4-9 stdlib zlib (smaller,
    much slower). The GIL is released while filtering and compressing.
    """
    src = _image(img, "img", (1, 2, 3, 4), allow_2d=True)
    level = _int(level, "level")
    if not 0 <= level <= 9:
        raise ImagingError(f"level must be 0..9, got {level}", level=level)
    mode = PNG_FILTERS.get(filter) if isinstance(filter, str) else None
    if mode is None:
        raise ImagingError(f"filter must be one of {sorted(PNG_FILTERS)}, got {filter!r}")
    height, width, channels = src.shape
    stride = 1 + width * channels
    filtered = _scratch.get(height * stride).reshape(height, stride)
    _kernels.png_filter(src, mode, filtered)
    idat = _png.deflate(filtered.reshape(-1).data, level)
    return _png.assemble_png(width, height, _PNG_COLOUR_TYPES[channels], idat)


def frame_digest(img: U8) -> int:
    """A 64-bit digest of an image's pixels and shape, to tell cheaply whether a frame changed.

    Any HxW or HxWxC uint8 array (a BGRA grab directly, strided views too). Equal pixels
    give equal digests on both backends; a change confined to 8 neighbouring bytes
    always changes it.
    """
    return _kernels.digest(_image(img, "img", range(1, 65), allow_2d=True))


def changed_region(a: U8, b: U8) -> tuple[int, int, int, int] | None:
    """The bounding box (x, y, w, h) of the pixels where ``a`` and ``b`` differ, or None.

    Same-shape HxW or HxWxC uint8 images (BGRA grabs directly, strided views too); a pixel
    differs when any of its channels does.
    """
    first = _image(a, "a", range(1, 65), allow_2d=True)
    second = _image(b, "b", range(1, 65), allow_2d=True)
    if first.shape != second.shape:
        raise ImagingError(
            f"images differ in shape: {first.shape} vs {second.shape}",
            shapes=(first.shape, second.shape),
        )
    return _kernels.change_bounds(first, second)
