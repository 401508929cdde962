"""Overlays of the stateless mode (seed 004): what the model did, burned into what it sees next.

The model of the stateless mode keeps no history; it learns what it did last turn from the
screenshot itself. Drawn onto an RGB frame in place, in this order (the seed panel's layers):

1. blue heat of the model's own boxes (a radial gradient filling each box) and their border,
2. orange heat of the actions: a radial gradient at every pointer position (both drag
   ends), over the last ``trail_turns`` turns; older turns fade linearly
   (``alpha * (N - age) / N``) and shrink (radius and drag ends toward their midpoint by
   ``trail_shrink ** age``),
3. markers of this turn's actions (rings, drag lines) and labels: the action's number,
   name and 0..1000 coordinates next to it; keyboard actions are listed bottom-left.

Everything is computed once into an :class:`OverlayPlan` (small arrays of primitives) and
drawn by the compiled kernels (``deskpilot._native.annotate``, without the GIL) or by the
numpy reference that matches them bit for bit; ``DESKPILOT_PURE=1`` forces the reference
and :data:`OVERLAY_BACKEND` says which one is active::

    from deskpilot.imaging import ActionMark, Annotator, BoxMark, annotate

    annotate(rgb, [ActionMark("click", 500, 300)], [BoxMark(100, 80, 400, 160, "search")])  # one turn
    annotator = Annotator()                      # default style, 4-turn trail
    annotator.annotate(rgb, [ActionMark("click", 500, 300)])

Colours are ``(r, g, b, a)`` tuples 0..255. The seed's ``UI_CONFIG`` form of a style (CSS
colour strings, the panel's sections) is read and written by :mod:`deskpilot.panel`.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from deskpilot._errors import ConfigError, ImagingError
from deskpilot.actions import Action, Click, Drag, Hold, KeyPress, MoveMouse, Scroll, TypeText
from deskpilot.geometry import Box
from deskpilot.imaging import _overlay_reference
from deskpilot.imaging._backend import (
    ANNOTATE_MODULE,
    AnnotateKernels,
    Backend,
    load_annotate_kernels,
    require_native,
)

__all__ = [
    "OVERLAY_BACKEND",
    "POINTER_ACTIONS",
    "ActionMark",
    "Annotator",
    "BoxMark",
    "OverlayPlan",
    "OverlayStyle",
    "Primitives",
    "action_mark",
    "annotate",
    "draw_plan",
    "gradient_table",
    "plan_overlay",
    "scroll_words",
]

Rgba = tuple[int, int, int, int]
U8 = npt.NDArray[np.uint8]

#: Actions drawn at a screen position (heat + marker + label next to it).
POINTER_ACTIONS = frozenset({"move", "click", "right_click", "double_click", "drag", "scroll"})

#: Entries of a gradient table; indexed by the squared relative distance t^2.
GRADIENT_SIZE = 1024

# X11 misc-fixed 6x10 (public domain), ASCII 32..126: 10 rows per glyph, one byte per row,
# bit 5 = leftmost of the 6 columns. Baked in so that labels need no font library.
FONT_CELL = (6, 10)
_FONT_HEX = (
    "0000000000000000000000080808080800080000001414140000000000000014143e143e1414000000081c28"
    "1c0a1c08000000122a1408142a24000000102828102a241a0000000808080000000000000004081010100804"
    "000000100804040408100000000022143e1422000000000008083e08080000000000000000000c0810000000"
    "00003e0000000000000000000000081c08000002020408102020000000081422222214080000000818280808"
    "083e0000001c22020c10203e0000003e02040c02221c000000040c14243e04040000003e202c3202221c0000"
    "000c10202c32221c0000003e0204040810100000001c22221c22221c0000001c22261a02041800000000081c"
    "0800081c08000000081c08000c081000000204081008040200000000003e003e000000000010080402040810"
    "0000001c2204080800080000001c22262a2c201c000000081422223e22220000003c12121c12123c0000001c"
    "22202020221c0000003c12121212123c0000003e20203c20203e0000003e20203c2020200000001c22202026"
    "221c0000002222223e2222220000001c08080808081c0000000e040404042418000000222428302824220000"
    "002020202020203e0000002222362a2222220000002222322a2622220000001c22222222221c0000003c2222"
    "3c2020200000001c222222222a1c0200003c22223c2824220000001c22201c02221c0000003e080808080808"
    "0000002222222222221c000000222222141414080000002222222a2a36220000002222140814222200000022"
    "2214080808080000003e02040810203e0000001c10101010101c000000202010080402020000001c04040404"
    "041c00000008142200000000000000000000000000003e00080400000000000000000000001c021e221e0000"
    "0020202c3222322c00000000001c2220221c00000002021a2622261a00000000001c223e201c0000000c1210"
    "3c10101000000000001e22221e02221c0020202c322222220000000800180808081c00000002000602020212"
    "120c00202022243824220000001808080808081c0000000000342a2a2a2200000000002c3222222200000000"
    "001c2222221c00000000002c3222322c20200000001a2622261a02020000002c3220202000000000001c201c"
    "023c00000010103c1010120c0000000000222222261a00000000002222141408000000000022222a2a140000"
    "000000221408142200000000002222261a02221c0000003e0408103e00000006080418040806000000080808"
    "0808080800000018040806080418000000122a24000000000000"
)
FONT: U8 = np.frombuffer(bytes.fromhex("".join(_FONT_HEX)), dtype=np.uint8).reshape(
    95, FONT_CELL[1]
)


OVERLAY_BACKEND, _KERNELS = load_annotate_kernels()


def _kernels_for(backend: Backend | None) -> AnnotateKernels:
    if backend is None:
        return _KERNELS
    if backend == "reference":
        return cast(AnnotateKernels, _overlay_reference)
    if backend == "native":
        # Asked for by name (tests, benchmarks): load it even under DESKPILOT_PURE.
        if OVERLAY_BACKEND == "native":
            return _KERNELS
        return cast(AnnotateKernels, require_native(ANNOTATE_MODULE))
    raise ImagingError(f"backend must be 'native' or 'reference', got {backend!r}")


# -------------------------------------------------------------------- argument checking
#
# The kernels (compiled and reference) trust their arguments, as deskpilot.imaging._api's
# do: everything a kernel assumes is checked here, once per call, with an ImagingError
# that says what was wrong.

_MAX_GRADIENT = 65536  # the compiled kernels index the table with 32-bit integers


def _check_frame(frame: Any) -> U8:
    if not isinstance(frame, np.ndarray):
        raise ImagingError(f"frame must be a numpy array, got {type(frame).__name__}")
    if frame.dtype != np.uint8 or frame.ndim != 3 or frame.shape[2] != 3:
        raise ImagingError(
            f"frame must be an RGB HxWx3 uint8 array, got {frame.dtype} {frame.shape}",
            dtype=str(frame.dtype),
            shape=frame.shape,
        )
    if frame.strides[2] != 1 or frame.strides[1] != 3:
        raise ImagingError(
            f"frame pixels must be packed RGB (rows may be strided), got strides {frame.strides}",
            strides=frame.strides,
        )
    if not frame.flags.writeable:
        raise ImagingError("frame is read-only: annotation draws in place")
    return frame


def _check_table(
    table: Any, name: str, columns: int, dtype: type[np.generic], colours: int | None
) -> npt.NDArray[Any]:
    """A C-contiguous (n, columns) table; finite if float; ``table[:, colours:]`` in 0..255."""
    try:
        arr = np.ascontiguousarray(table, dtype=dtype)
    except (TypeError, ValueError, OverflowError) as exc:
        raise ImagingError(f"{name} is not a table of numbers: {exc}") from exc
    if arr.ndim != 2 or arr.shape[1] != columns:
        raise ImagingError(
            f"{name} must have shape (n, {columns}), got {arr.shape}", shape=arr.shape
        )
    if arr.size:
        if dtype is np.float64 and not np.isfinite(arr).all():
            raise ImagingError(f"{name} has a non-finite value")
        if colours is not None:
            rgba = arr[:, colours:]
            if rgba.min() < 0 or rgba.max() > 255:
                raise ImagingError(f"{name} colours must be 0..255")
    return arr


def _check_alpha_q(arr: npt.NDArray[Any], column: int, name: str) -> None:
    # 0..256 keeps the compiled kernels' integer blend inside 16 bits (and a float cast defined).
    if arr.size and (arr[:, column].min() < 0 or arr[:, column].max() > 256):
        raise ImagingError(f"{name} alpha_q must be 0..256")


def _check_spots(spots: Any) -> npt.NDArray[np.float64]:
    arr = _check_table(spots, "spots", 4, np.float64, None)
    _check_alpha_q(arr, 3, "spots")
    return arr


def _check_boxes(boxes: Any) -> npt.NDArray[np.int32]:
    arr = _check_table(boxes, "boxes", 5, np.int32, None)
    _check_alpha_q(arr, 4, "boxes")
    return arr


def _check_rects(rects: Any) -> npt.NDArray[np.int32]:
    return _check_table(rects, "rects", 9, np.int32, 5)


def _check_rings(rings: Any) -> npt.NDArray[np.float64]:
    return _check_table(rings, "rings", 8, np.float64, 4)


def _check_lines(lines: Any) -> npt.NDArray[np.float64]:
    return _check_table(lines, "lines", 9, np.float64, 5)


def _check_lut(lut: Any) -> U8:
    arr = np.ascontiguousarray(lut, dtype=np.uint8)
    if arr.ndim != 2 or arr.shape[1] != 4 or not 2 <= arr.shape[0] <= _MAX_GRADIENT:
        raise ImagingError(
            f"gradient table must have shape (2..{_MAX_GRADIENT}, 4), got {arr.shape}",
            shape=arr.shape,
        )
    return arr


def _check_text(runs: Any, codes: Any) -> tuple[npt.NDArray[np.int32], bytes]:
    if not isinstance(codes, (bytes, bytearray, memoryview)):
        raise ImagingError(f"codes must be bytes, got {type(codes).__name__}")
    # Runs pointing outside ``codes`` are skipped by the kernels (like pixels off the frame).
    return _check_table(runs, "runs", 9, np.int32, 5), bytes(codes)


def _check_font(font: Any, cell_width: Any) -> tuple[U8, int]:
    arr = np.ascontiguousarray(font, dtype=np.uint8)
    if (
        arr.ndim != 2
        or arr.shape[0] != _overlay_reference.LAST_GLYPH - _overlay_reference.FIRST_GLYPH + 1
    ):
        raise ImagingError(f"font must have shape (95, rows), got {arr.shape}", shape=arr.shape)
    if isinstance(cell_width, bool) or not isinstance(cell_width, (int, np.integer)):
        raise ImagingError(f"cell_width must be an integer, got {cell_width!r}")
    if not 1 <= int(cell_width) <= 8:
        raise ImagingError(f"cell_width must be 1..8, got {cell_width}")
    return arr, int(cell_width)


class Primitives:
    """The annotation kernels one primitive batch at a time, behind the same checks as
    :func:`draw_plan` (for tests, benchmarks and custom overlays).

    ``backend`` ``None`` is the active one (:data:`OVERLAY_BACKEND`); ``"native"`` or
    ``"reference"`` picks one. Every method draws onto ``frame`` (RGB HxWx3 uint8) in place.
    """

    def __init__(self, backend: Backend | None = None) -> None:
        self._kernels = _kernels_for(backend)

    def heat_spots(self, frame: U8, spots: npt.ArrayLike, lut: npt.ArrayLike) -> None:
        """Radial gradients at rows ``(cx, cy, radius, alpha_q 0..256)``; ``lut`` indexed by t^2."""
        self._kernels.heat_spots(_check_frame(frame), _check_spots(spots), _check_lut(lut))

    def box_heat(self, frame: U8, boxes: npt.ArrayLike, lut: npt.ArrayLike) -> None:
        """Boxes ``(x0, y0, x1, y1, alpha_q)`` filled with a radial gradient reaching the corners."""
        self._kernels.box_heat(_check_frame(frame), _check_boxes(boxes), _check_lut(lut))

    def rects(self, frame: U8, rects: npt.ArrayLike) -> None:
        """Rectangles ``(x0, y0, x1, y1, border, r, g, b, a)``; ``border <= 0`` fills."""
        self._kernels.rects(_check_frame(frame), _check_rects(rects))

    def rings(self, frame: U8, rings: npt.ArrayLike) -> None:
        """Rings ``(cx, cy, r_inner, r_outer, r, g, b, a)``; ``r_inner = 0`` is a disc."""
        self._kernels.rings(_check_frame(frame), _check_rings(rings))

    def lines(self, frame: U8, lines: npt.ArrayLike) -> None:
        """Segments ``(x0, y0, x1, y1, width, r, g, b, a)`` with round caps."""
        self._kernels.lines(_check_frame(frame), _check_lines(lines))

    def text(
        self,
        frame: U8,
        runs: npt.ArrayLike,
        codes: bytes | bytearray | memoryview,
        font: npt.ArrayLike,
        cell_width: int,
    ) -> None:
        """Text runs ``(x, y, start, length, scale, r, g, b, a)`` in a (95, rows) bitmap font."""
        img = _check_frame(frame)
        table, data = _check_text(runs, codes)
        glyphs, width = _check_font(font, cell_width)
        self._kernels.text(img, table, data, glyphs, width)


# ----------------------------------------------------------------------------- gradients

GradientStops = tuple[tuple[float, Rgba], ...]


@lru_cache(maxsize=32)
def gradient_table(stops: GradientStops, size: int = GRADIENT_SIZE) -> U8:
    """A radial gradient as a ``(size, 4)`` RGBA table indexed by ``t^2 * (size - 1)``.

    ``t`` is the distance from the centre over the radius. Colours are interpolated with
    premultiplied alpha (a stop fading to transparent keeps its hue); before the first stop
    the first colour holds, after the last the last. The result is read-only and cached.
    """
    if size < 2:
        raise ImagingError(f"gradient table needs at least 2 entries, got {size}")
    if not stops:
        raise ImagingError("gradient needs at least one stop")
    t = np.sqrt(np.arange(size, dtype=np.float64) / (size - 1))
    pos = np.array([s[0] for s in stops], dtype=np.float64)
    cols = np.array([s[1] for s in stops], dtype=np.float64)
    alpha = cols[:, 3] / 255.0
    premul = np.concatenate([cols[:, :3] * alpha[:, None], alpha[:, None]], axis=1)
    out = np.empty((size, 4), dtype=np.float64)
    for c in range(4):
        out[:, c] = np.interp(t, pos, premul[:, c]) if len(stops) > 1 else premul[0, c]
    a = out[:, 3]
    rgb = np.where(a[:, None] > 0, out[:, :3] / np.maximum(a[:, None], 1e-12), 0.0)
    # Fully transparent entries take the nearest stop's colour (irrelevant, but stable).
    table = np.empty((size, 4), dtype=np.uint8)
    table[:, :3] = np.clip(np.rint(rgb), 0, 255).astype(np.uint8)
    table[:, 3] = np.clip(np.rint(a * 255.0), 0, 255).astype(np.uint8)
    table.setflags(write=False)
    return table


# ----------------------------------------------------------------------------- the marks


@dataclass(frozen=True, slots=True)
class ActionMark:
    """One action of a turn in model coordinates (0..1000 over the frame).

    ``kind`` is the action name (``click``, ``drag``, ``type``, ...). Pointer actions carry
    ``x1, y1`` (a drag also ``x2, y2``); ``detail`` is shown in the label ("hello" for a
    ``type``, "down 3" for a ``scroll``).
    """

    kind: str
    x1: int | None = None
    y1: int | None = None
    x2: int | None = None
    y2: int | None = None
    detail: str = ""

    @property
    def points(self) -> tuple[tuple[int, int], ...]:
        """The positions that get heat: one, two for a drag, none for keyboard actions."""
        if self.x1 is None or self.y1 is None:
            return ()
        if self.x2 is not None and self.y2 is not None:
            return ((self.x1, self.y1), (self.x2, self.y2))
        return ((self.x1, self.y1),)


def scroll_words(dx: int, dy: int) -> str:
    """``down 3``, ``left 2``, ``up 1 right 4``: a scroll's notches in words."""
    words = []
    if dy:
        words.append(f"{'down' if dy > 0 else 'up'} {abs(dy)}")
    if dx:
        words.append(f"{'right' if dx > 0 else 'left'} {abs(dx)}")
    return " ".join(words)


def action_mark(action: Action) -> ActionMark:
    """The overlay mark of a performed action, at the 0..1000 point(s) the model gave
    (``action.source``; an action without one gets no heat)."""
    if isinstance(action, Click):
        kind = "right_click" if action.button == "right" else ("double_click" if action.count == 2 else "click")
        return ActionMark(kind, *_source_point(action.source))
    if isinstance(action, MoveMouse):
        return ActionMark("move", *_source_point(action.source))
    if isinstance(action, Scroll):
        return ActionMark("scroll", *_source_point(action.source), detail=scroll_words(action.dx, action.dy))
    if isinstance(action, Drag):
        if action.source is None:
            return ActionMark("drag")
        start, end = action.source
        return ActionMark("drag", start.x1, start.y1, end.x1, end.y1)
    if isinstance(action, TypeText):
        return ActionMark("type", detail=action.text)
    if isinstance(action, (KeyPress, Hold)):
        return ActionMark(action.kind, detail=action.combo)
    return ActionMark(action.kind)


def _source_point(box: Box | None) -> tuple[int | None, int | None]:
    return (None, None) if box is None else (box.x1, box.y1)


@dataclass(frozen=True, slots=True)
class BoxMark:
    """A model-provided box (regions of interest) in 0..1000 coordinates, with an optional label."""

    x1: int
    y1: int
    x2: int
    y2: int
    label: str = ""


# ------------------------------------------------------------------------------ the style

_DEFAULT_HEAT_STOPS: GradientStops = (
    (0.0, (255, 106, 0, 150)),
    (0.45, (255, 140, 0, 90)),
    (1.0, (255, 170, 0, 0)),
)
_DEFAULT_BOX_STOPS: GradientStops = (
    (0.0, (30, 144, 255, 20)),
    (1.0, (30, 144, 255, 80)),
)


@dataclass(frozen=True)
class OverlayStyle:
    """How overlays look (the seed's ``UI_CONFIG`` form: :func:`deskpilot.panel.style_from_ui_config`).

    Sizes are in pixels of the annotated frame; ``label_scale = 0`` picks the font scale
    (and the marker size) from the frame, about 1 per 450 pixels of its shorter side.
    """

    heat_enabled: bool = True
    heat_radius_scale: float = 0.035
    heat_stops: GradientStops = _DEFAULT_HEAT_STOPS
    trail_turns: int = 4
    trail_shrink: float = 0.85
    bbox_enabled: bool = True
    bbox_border: Rgba = (30, 144, 255, 230)
    bbox_border_width: int = 2
    bbox_fill_stops: GradientStops = _DEFAULT_BOX_STOPS
    labels_enabled: bool = True
    markers_enabled: bool = True
    label_scale: int = 0
    action_color: Rgba = (255, 106, 0, 255)
    outline_color: Rgba = (0, 0, 0, 170)
    label_background: Rgba = (0, 0, 0, 175)
    label_color: Rgba = (255, 255, 255, 255)
    box_label_color: Rgba = (170, 215, 255, 255)

    def __post_init__(self) -> None:
        # ``field`` names the attribute, so that a reader of another form of the style (the
        # panel's UI_CONFIG) can say which of its own keys was wrong.
        def bad(name: str, expected: str) -> ConfigError:
            value = getattr(self, name)
            return ConfigError(f"{name} must be {expected}, got {value}", field=name, value=value)

        if not (math.isfinite(self.heat_radius_scale) and 0 < self.heat_radius_scale <= 1):
            raise bad("heat_radius_scale", "in (0, 1]")
        if not 1 <= self.trail_turns <= 64:
            raise bad("trail_turns", "1..64")
        if not (math.isfinite(self.trail_shrink) and 0 < self.trail_shrink <= 1):
            raise bad("trail_shrink", "in (0, 1]")
        if not 0 <= self.bbox_border_width <= 64:
            raise bad("bbox_border_width", "0..64")
        if not 0 <= self.label_scale <= 16:
            raise bad("label_scale", "0..16")

    def ui_scale(self, width: int, height: int) -> int:
        """Font/marker scale for a frame: ``label_scale`` or about 1 per 450 px of the short side."""
        return self.label_scale or max(1, round(min(width, height) / 450))


# ------------------------------------------------------------------------------- the plan


@dataclass(frozen=True)
class OverlayPlan:
    """Every primitive of one annotation, in drawing order, as the kernels' tables."""

    width: int
    height: int
    box_heat: npt.NDArray[np.int32]
    box_borders: npt.NDArray[np.int32]
    spots: npt.NDArray[np.float64]
    lines: npt.NDArray[np.float64]
    rings: npt.NDArray[np.float64]
    label_rects: npt.NDArray[np.int32]
    text_runs: npt.NDArray[np.int32]
    codes: bytes
    heat_lut: U8
    box_lut: U8
    labels: tuple[str, ...] = field(default=())


def _to_px(n: int, size: int) -> float:
    return n * size / 1000.0


def _label_text(text: str, limit: int = 48) -> str:
    # Only the font's ASCII range; longer labels would cover what the model must see.
    clean = "".join(c if " " <= c <= "~" else "?" for c in text.replace("\n", " "))
    return clean if len(clean) <= limit else clean[: limit - 3] + "..."


def _action_label(index: int, mark: ActionMark) -> str:
    pts = ">".join(f"{x},{y}" for x, y in mark.points)
    parts = [str(index), mark.kind]
    if mark.detail:
        parts.append(f'"{mark.detail}"' if mark.kind == "type" else mark.detail)
    if pts:
        parts.append(pts)
    return _label_text(" ".join(parts))


class _Builder:
    def __init__(self, width: int, height: int, style: OverlayStyle) -> None:
        self.width, self.height, self.style = width, height, style
        self.scale = style.ui_scale(width, height)
        self.box_heat: list[tuple[int, ...]] = []
        self.box_borders: list[tuple[int, ...]] = []
        self.spots: list[tuple[float, ...]] = []
        self.lines: list[tuple[float, ...]] = []
        self.rings: list[tuple[float, ...]] = []
        self.label_rects: list[tuple[int, ...]] = []
        self.text_runs: list[tuple[int, ...]] = []
        self.codes = bytearray()
        self.labels: list[str] = []

    def label(self, text: str, x: int, y: int, color: Rgba) -> None:
        s = self.scale
        cw, ch = FONT_CELL[0] * s, FONT_CELL[1] * s
        pad = s
        w, h = len(text) * cw + 2 * pad, ch + 2 * pad
        x = max(0, min(x, self.width - w))
        y = max(0, min(y, self.height - h))
        bg = self.style.label_background
        self.label_rects.append((x, y, x + w, y + h, 0, *bg))
        self.text_runs.append((x + pad, y + pad, len(self.codes), len(text), s, *color))
        self.codes += text.encode("ascii")
        self.labels.append(text)

    def label_size(self, text: str) -> tuple[int, int]:
        s = self.scale
        return len(text) * FONT_CELL[0] * s + 2 * s, FONT_CELL[1] * s + 2 * s

    def plan(self) -> OverlayPlan:
        def table(
            rows: list[tuple[Any, ...]], cols: int, dtype: type[np.generic]
        ) -> npt.NDArray[Any]:
            return np.array(rows, dtype=dtype).reshape(len(rows), cols)

        st = self.style
        return OverlayPlan(
            width=self.width,
            height=self.height,
            box_heat=table(self.box_heat, 5, np.int32),
            box_borders=table(self.box_borders, 9, np.int32),
            spots=table(self.spots, 4, np.float64),
            lines=table(self.lines, 9, np.float64),
            rings=table(self.rings, 8, np.float64),
            label_rects=table(self.label_rects, 9, np.int32),
            text_runs=table(self.text_runs, 9, np.int32),
            codes=bytes(self.codes),
            heat_lut=gradient_table(st.heat_stops),
            box_lut=gradient_table(st.bbox_fill_stops),
            labels=tuple(self.labels),
        )


def plan_overlay(
    width: int,
    height: int,
    actions: Sequence[ActionMark] = (),
    boxes: Sequence[BoxMark] = (),
    *,
    style: OverlayStyle | None = None,
    previous: Sequence[Sequence[ActionMark]] = (),
) -> OverlayPlan:
    """Lay out the overlays of one turn on a ``width x height`` frame.

    ``actions`` are this turn's; ``previous`` the earlier turns' (oldest first), of which
    the last ``trail_turns - 1`` leave a fading heat trail.
    """
    if width <= 0 or height <= 0:
        raise ImagingError(f"cannot annotate an empty {width}x{height} frame")
    st = style or OverlayStyle()
    b = _Builder(width, height, st)
    s = b.scale

    if st.bbox_enabled:
        for box in boxes:
            x0 = min(width - 1, math.floor(_to_px(box.x1, width)))
            y0 = min(height - 1, math.floor(_to_px(box.y1, height)))
            x1 = max(x0 + 1, min(width, math.ceil(_to_px(box.x2, width))))
            y1 = max(y0 + 1, min(height, math.ceil(_to_px(box.y2, height))))
            b.box_heat.append((x0, y0, x1, y1, 256))
            if st.bbox_border_width > 0:
                b.box_borders.append((x0, y0, x1, y1, st.bbox_border_width, *st.bbox_border))

    if st.heat_enabled:
        turns = (
            [*list(previous)[max(0, len(previous) - (st.trail_turns - 1)) :], actions]
            if st.trail_turns > 1
            else [actions]
        )
        n = st.trail_turns
        radius = st.heat_radius_scale * max(width, height)
        for i, turn in enumerate(turns):
            age = len(turns) - 1 - i
            alpha_q = round(256 * (n - age) / n)
            shrink = st.trail_shrink**age
            for mark in turn:
                pts = [(_to_px(x, width), _to_px(y, height)) for x, y in mark.points]
                if len(pts) == 2 and shrink < 1.0:
                    mx, my = (pts[0][0] + pts[1][0]) / 2, (pts[0][1] + pts[1][1]) / 2
                    pts = [(mx + (px - mx) * shrink, my + (py - my) * shrink) for px, py in pts]
                for px, py in pts:
                    b.spots.append((px, py, radius * shrink, float(alpha_q)))

    ring_out, ring_w = 6.0 * s, 1.5 * s
    outline, color = st.outline_color, st.action_color
    legend: list[str] = []
    for index, mark in enumerate(actions, start=1):
        pts = [(_to_px(x, width), _to_px(y, height)) for x, y in mark.points]
        if not pts:
            legend.append(_action_label(index, mark))
            continue
        if st.markers_enabled:
            if len(pts) == 2:
                (ax, ay), (bx, by) = pts
                b.lines.append((ax, ay, bx, by, 3.0 * s + 2.0, *outline))
                b.lines.append((ax, ay, bx, by, 1.5 * s, *color[:3], color[3]))
                b.rings.append((bx, by, 0.0, 3.5 * s + 1.0, *outline))
                b.rings.append((bx, by, 0.0, 3.5 * s, *color))
            px, py = pts[0]
            b.rings.append((px, py, ring_out - ring_w - 1.0, ring_out + 1.0, *outline))
            b.rings.append((px, py, ring_out - ring_w, ring_out, *color))
            if mark.kind == "double_click":
                b.rings.append((px, py, ring_out + 1.5 * s, ring_out + 3.0 * s, *color))
            if mark.kind in ("click", "double_click", "right_click"):
                b.rings.append((px, py, 0.0, 1.5 * s, *color))
        if st.labels_enabled:
            text = _action_label(index, mark)
            w, h = b.label_size(text)
            px, py = pts[-1] if mark.kind == "drag" else pts[0]
            gap = int(ring_out + 3 * s)
            lx = int(px) + gap if int(px) + gap + w <= width else int(px) - gap - w
            b.label(text, lx, int(py) - h // 2, st.label_color)

    if st.labels_enabled:
        if st.bbox_enabled:
            for index, box in enumerate(boxes, start=1):
                text = _label_text(f"b{index} {box.label}".rstrip())
                x0 = math.floor(_to_px(box.x1, width)) + st.bbox_border_width
                y0 = math.floor(_to_px(box.y1, height)) + st.bbox_border_width
                b.label(text, x0, y0, st.box_label_color)
        _, h = b.label_size("")
        y = height - h - s
        for text in reversed(legend):
            b.label(text, s, y, st.label_color)
            y -= h + s
    return b.plan()


def draw_plan(frame: U8, plan: OverlayPlan, *, backend: Backend | None = None) -> None:
    """Draw a plan onto ``frame`` (RGB HxWx3 uint8, in place) with the chosen kernels."""
    img = _check_frame(frame)
    if img.shape[0] != plan.height or img.shape[1] != plan.width:
        raise ImagingError(
            f"plan was laid out for {plan.width}x{plan.height}, frame is {img.shape[1]}x{img.shape[0]}",
            plan=(plan.width, plan.height),
            frame=(img.shape[1], img.shape[0]),
        )
    k = _kernels_for(backend)
    # Every table is checked before the first pixel changes: a bad plan leaves the frame as it was.
    box_heat, box_lut = _check_boxes(plan.box_heat), _check_lut(plan.box_lut)
    box_borders = _check_rects(plan.box_borders)
    spots, heat_lut = _check_spots(plan.spots), _check_lut(plan.heat_lut)
    lines, rings = _check_lines(plan.lines), _check_rings(plan.rings)
    label_rects = _check_rects(plan.label_rects)
    runs, codes = _check_text(plan.text_runs, plan.codes)
    k.box_heat(img, box_heat, box_lut)
    k.rects(img, box_borders)
    k.heat_spots(img, spots, heat_lut)
    k.lines(img, lines)
    k.rings(img, rings)
    k.rects(img, label_rects)
    k.text(img, runs, codes, FONT, FONT_CELL[0])


def annotate(
    frame: U8,
    actions: Sequence[ActionMark] = (),
    boxes: Sequence[BoxMark] = (),
    *,
    style: OverlayStyle | None = None,
    previous: Sequence[Sequence[ActionMark]] = (),
    backend: Backend | None = None,
) -> U8:
    """Draw one turn's overlays onto ``frame`` in place and return it (see the module doc)."""
    img = _check_frame(frame)
    plan = plan_overlay(img.shape[1], img.shape[0], actions, boxes, style=style, previous=previous)
    draw_plan(img, plan, backend=backend)
    return frame


class Annotator:
    """Annotates turn after turn, keeping the heat trail of the last ``trail_turns`` turns."""

    def __init__(
        self, style: OverlayStyle | None = None, *, backend: Backend | None = None
    ) -> None:
        self.style = style or OverlayStyle()
        self.backend = backend
        self._previous: deque[tuple[ActionMark, ...]] = deque(
            maxlen=max(1, self.style.trail_turns - 1)
        )

    @property
    def previous(self) -> tuple[tuple[ActionMark, ...], ...]:
        """Earlier turns' actions still in the trail, oldest first."""
        return tuple(self._previous) if self.style.trail_turns > 1 else ()

    def plan(
        self, width: int, height: int, actions: Iterable[ActionMark], boxes: Iterable[BoxMark] = ()
    ) -> OverlayPlan:
        """Lay out this turn without drawing or advancing the trail."""
        return plan_overlay(
            width, height, tuple(actions), tuple(boxes), style=self.style, previous=self.previous
        )

    def annotate(
        self, frame: U8, actions: Iterable[ActionMark], boxes: Iterable[BoxMark] = ()
    ) -> U8:
        """Draw this turn onto ``frame`` in place, then remember its actions for the trail."""
        acts = tuple(actions)
        annotate(
            frame,
            acts,
            tuple(boxes),
            style=self.style,
            previous=self.previous,
            backend=self.backend,
        )
        self.push(acts)
        return frame

    def push(self, actions: Iterable[ActionMark]) -> None:
        """Remember a turn's actions for the trail (done by :meth:`annotate`)."""
        self._previous.append(tuple(actions))

    def clear(self) -> None:
        self._previous.clear()
