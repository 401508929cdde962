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

# `from ... import name as name`: the room's internal interface (ARCHITECTURE.md, "Faces"),
# what other rooms of deskpilot import from here; not for users, so not in __all__.
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
from deskpilot.imaging._backend import env_flag as env_flag
from deskpilot.imaging._backend import reference_kernels_message as reference_kernels_message
from deskpilot.imaging._overlay import (
    OVERLAY_BACKEND,
    ActionMark,
    Annotator,
    BoxMark,
    OverlayStyle,
    annotate,
)
from deskpilot.imaging._overlay import GradientStops as GradientStops
from deskpilot.imaging._overlay import Rgba as Rgba
from deskpilot.imaging._overlay import action_mark as action_mark
from deskpilot.imaging._overlay import scroll_words as scroll_words
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
