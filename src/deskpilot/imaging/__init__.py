"""Pixel work of deskpilot: crop, BGRA->RGB, area-average resize, cursor, PNG, change detection.

Backed by the compiled core (``deskpilot._native.imaging``, hot loops without the GIL) or,
when it is not built or ``DESKPILOT_PURE=1`` is set, by a numpy reference that computes
bit-identical results; :data:`BACKEND` says which one is active::

    from deskpilot import imaging
    rgb = imaging.prepare(bgra, region=(0, 0, 1920, 1080), size=(1536, 864))
    png = imaging.encode_png(rgb, level=1)
    if imaging.changed_region(before, after) is None: ...
    imaging.annotate(rgb, [imaging.ActionMark("click", 500, 300)])  # the stateless mode's overlays

All functions raise :class:`~deskpilot.errors.ImagingError` (a ``ValueError``) for a bad
shape, dtype, region or size instead of reading out of bounds.
"""

from __future__ import annotations

from deskpilot.imaging._api import (
    BACKEND,
    PNG_FILTERS,
    CursorKind,
    PngFilter,
    Region,
    bgra_to_rgb,
    changed_region,
    composite_cursor,
    crop,
    downscale,
    encode_png,
    frame_digest,
    prepare,
)
from deskpilot.imaging._overlay import (
    OVERLAY_BACKEND,
    ActionMark,
    Annotator,
    BoxMark,
    OverlayStyle,
    annotate,
)
from deskpilot.imaging._png import DEFLATE_ENGINE

__all__ = [
    "BACKEND",
    "DEFLATE_ENGINE",
    "OVERLAY_BACKEND",
    "PNG_FILTERS",
    "ActionMark",
    "Annotator",
    "BoxMark",
    "CursorKind",
    "OverlayStyle",
    "PngFilter",
    "Region",
    "annotate",
    "bgra_to_rgb",
    "changed_region",
    "composite_cursor",
    "crop",
    "downscale",
    "encode_png",
    "frame_digest",
    "prepare",
]
