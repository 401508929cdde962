"""What the agent does to the desktop, as one typed value, and the one way to check a model's arguments.

Every tool set (``seed000``, ``seed001``, ``extended``, ``qwen``, UI-TARS), the stateless
protocol and team mode turn what the model wrote into an :data:`Action`; the safety policy
checks it, the input controller performs it, and the run record stores
:meth:`to_record` of it as a turn's ``"action"`` (read back with :func:`from_record` by
replay and the report).

An action holds *physical* pixels (what the input backend is sent) and, where the model
named a place, the normalized 0..1000 box it gave (``source``; not part of the record,
which has always kept physical pixels only).

The record is the JSON that run directories have held since their first version, and
recorded runs (tests/golden) must replay byte for byte. The tool sets wrote it in three
key orders, so an action remembers its :data:`RecordStyle`:

``"standard"``
    the point first: ``{"kind": "click", "x": .., "y": .., "button": .., "count": .., "label": ..}``
    (seed000/seed001/extended, team, stateless); an action at the pointer has no x/y.
``"qwen"``
    the amounts first, the point last (``{"kind": "scroll", "dy": .., "dx": .., "x": .., "y": ..}``),
    ``"at": "pointer"`` when the model gave no point; a drag's end before its start.
``"uitars"``
    the amounts first, the point last; nothing when there is no point.

The style never changes what an action *is*: it is left out of equality.

Argument checks (:func:`integer`, :func:`number`, :func:`coordinate`, :func:`box`,
:func:`label`, :func:`text`, :func:`key_combo`) raise :class:`~deskpilot.ArgumentError`
whose ``kind`` and message the model reads back in the tool's ``{"ok": false}`` payload.

This module sits at the geometry floor: it imports only :mod:`deskpilot._errors`,
:mod:`deskpilot.geometry` and the standard library (key names are checked by a
``resolve`` function the input layer hands in).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias, cast

if sys.version_info >= (3, 11):
    from typing import Required, TypedDict
else:  # pragma: no cover - 3.10's typing has no Required (its backport's TypedDict reads it)
    from typing_extensions import Required, TypedDict

from deskpilot._errors import ArgumentError, InvalidBoxError, UnknownKeyError
from deskpilot.geometry import Box, clamp_norm, parse_box

__all__ = [
    "PASSIVE",
    "Action",
    "ActionRecord",
    "ArgumentError",
    "Click",
    "Drag",
    "Hold",
    "KeyPress",
    "MoveMouse",
    "Point",
    "RecordStyle",
    "Scroll",
    "TypeText",
    "Wait",
    "Zoom",
    "box",
    "combo_names",
    "coordinate",
    "from_record",
    "integer",
    "key_combo",
    "label",
    "number",
    "text",
]

#: What :meth:`Action.to_record` returns: the physical action, in pixels of the virtual
#: desktop (the turn record's ``"action"``; key order follows the record style). Written
#: in the call form so that ``Required`` is read at run time here too (this module
#: postpones its annotations). ``deskpilot.rundir`` holds it with the other records.
ActionRecord = TypedDict(  # noqa: UP013 - the call form keeps Required real (see above)
    "ActionRecord",
    {
        "kind": Required[str],
        "x": int,
        "y": int,
        # "pointer": a qwen-style click or scroll wherever the pointer is.
        "at": str,
        "button": str,
        "count": int,
        "label": str,
        "hold": str,
        "start": list[int],
        "end": list[int],
        "steps": int,
        "duration": float,
        "dy": int,
        "dx": int,
        "text": str,
        "key": str,
        "seconds": float,
        "box": list[int],
    },
    total=False,
)

#: A physical pixel (x, y) on the virtual desktop.
Point: TypeAlias = tuple[int, int]
#: How the record of an action orders its keys (module doc).
RecordStyle = Literal["standard", "qwen", "uitars"]
Button = Literal["left", "right", "middle"]

_POINTER = {"at": "pointer"}


def _point_keys(point: Point | None, style: RecordStyle) -> dict[str, Any]:
    if point is not None:
        return {"x": point[0], "y": point[1]}
    return dict(_POINTER) if style == "qwen" else {}


def _place(
    kind: str, point: Point | None, rest: dict[str, Any], style: RecordStyle, tail: dict[str, Any] | None = None
) -> ActionRecord:
    """``kind``, then the point and ``rest`` in the style's order, then ``tail``."""
    record: dict[str, Any] = {"kind": kind}
    where = _point_keys(point, style)
    if style == "standard":
        record |= where
        record |= rest
    else:
        record |= rest
        record |= where
    if tail:
        record |= tail
    # Assembled key by key in the style's order; the keys are ActionRecord's.
    return cast(ActionRecord, record)


@dataclass(frozen=True, slots=True)
class Click:
    """``count`` presses of ``button`` at ``point`` (None: where the pointer is), with
    ``hold`` (a combo like ``"ctrl"``) held around them."""

    point: Point | None
    button: Button = "left"
    count: int = 1
    #: What the model called the element; None when the tool takes no label (not recorded).
    label: str | None = None
    hold: str | None = None
    source: Box | None = field(default=None, compare=False)
    style: RecordStyle = field(default="standard", compare=False)

    kind: Literal["click"] = field(default="click", init=False, repr=False)

    def to_record(self) -> ActionRecord:
        tail: dict[str, Any] = {}
        if self.label is not None:
            tail["label"] = self.label
        if self.hold:
            tail["hold"] = self.hold
        return _place("click", self.point, {"button": self.button, "count": self.count}, self.style, tail)


@dataclass(frozen=True, slots=True)
class MoveMouse:
    point: Point
    source: Box | None = field(default=None, compare=False)
    style: RecordStyle = field(default="standard", compare=False)

    kind: Literal["move"] = field(default="move", init=False, repr=False)

    def to_record(self) -> ActionRecord:
        return {"kind": "move", "x": self.point[0], "y": self.point[1]}


@dataclass(frozen=True, slots=True)
class Drag:
    """Left button down at ``start`` (None: where the pointer is), moved to ``end``, up.

    ``steps`` / ``duration`` are recorded when the mode chose them (stateless); the tool
    sets use the controller's defaults and record neither.
    """

    start: Point | None
    end: Point
    label: str | None = None
    steps: int | None = None
    duration: float | None = None
    source: tuple[Box, Box] | None = field(default=None, compare=False)
    style: RecordStyle = field(default="standard", compare=False)

    kind: Literal["drag"] = field(default="drag", init=False, repr=False)

    def to_record(self) -> ActionRecord:
        record: ActionRecord = {"kind": "drag"}
        if self.style == "qwen":
            record["end"] = list(self.end)
        if self.start is not None:
            record["start"] = list(self.start)
        if self.style != "qwen":
            record["end"] = list(self.end)
        if self.label is not None:
            record["label"] = self.label
        if self.steps is not None:
            record["steps"] = self.steps
        if self.duration is not None:
            record["duration"] = self.duration
        return record


@dataclass(frozen=True, slots=True)
class Scroll:
    """Wheel notches at ``point`` (None: where the pointer is); ``dy > 0`` scrolls down,
    ``dx > 0`` right."""

    point: Point | None
    dy: int = 0
    dx: int = 0
    source: Box | None = field(default=None, compare=False)
    style: RecordStyle = field(default="standard", compare=False)

    kind: Literal["scroll"] = field(default="scroll", init=False, repr=False)

    def to_record(self) -> ActionRecord:
        return _place("scroll", self.point, {"dy": self.dy, "dx": self.dx}, self.style)


@dataclass(frozen=True, slots=True)
class TypeText:
    text: str

    kind: Literal["type"] = field(default="type", init=False, repr=False)

    def to_record(self) -> ActionRecord:
        return {"kind": "type", "text": self.text}


@dataclass(frozen=True, slots=True)
class KeyPress:
    """A key or a combo (``"ctrl+shift+t"``), pressed in order and released in reverse."""

    combo: str

    kind: Literal["key"] = field(default="key", init=False, repr=False)

    def to_record(self) -> ActionRecord:
        return {"kind": "key", "key": self.combo}


@dataclass(frozen=True, slots=True)
class Hold:
    """``combo`` held down for ``seconds``, then released (a click with keys held is a
    :class:`Click` with ``hold``)."""

    combo: str
    seconds: float

    kind: Literal["hold"] = field(default="hold", init=False, repr=False)

    def to_record(self) -> ActionRecord:
        return {"kind": "hold", "key": self.combo, "seconds": self.seconds}


@dataclass(frozen=True, slots=True)
class Wait:
    """Nothing is sent: the agent waits, then looks again (never in a turn's ``action``)."""

    seconds: float

    kind: Literal["wait"] = field(default="wait", init=False, repr=False)

    def to_record(self) -> ActionRecord:
        return {"kind": "wait", "seconds": self.seconds}


@dataclass(frozen=True, slots=True)
class Zoom:
    """Nothing is sent: the next image shows ``box`` (0..1000 of the current one) at native
    resolution (never in a turn's ``action``)."""

    box: Box

    kind: Literal["zoom"] = field(default="zoom", init=False, repr=False)

    def to_record(self) -> ActionRecord:
        return {"kind": "zoom", "box": self.box.as_list()}


Action: TypeAlias = Click | MoveMouse | Drag | Scroll | TypeText | KeyPress | Hold | Wait | Zoom

#: Actions that send no input (the policy lets them through, the loop records no action).
PASSIVE = (Wait, Zoom)


# ---------------------------------------------------------------------- reading records


def _int(record: Mapping[str, Any], key: str) -> int:
    value = record.get(key)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"recorded action: {key} must be an integer, got {value!r}")
    return value


def _pair(value: Any, key: str) -> Point:
    if (
        not isinstance(value, (list, tuple))
        or len(value) != 2
        or not all(isinstance(v, int) and not isinstance(v, bool) for v in value)
    ):
        raise ValueError(f"recorded action: {key} must be [x, y], got {value!r}")
    return (value[0], value[1])


def _recorded_point(record: Mapping[str, Any]) -> Point | None:
    if "x" in record or "y" in record:
        return (_int(record, "x"), _int(record, "y"))
    return None


def _style(record: Mapping[str, Any], first_amount: str) -> RecordStyle:
    """Which tool set wrote ``record``: the point after the amounts is qwen's or UI-TARS's."""
    if record.get("at") == "pointer":
        return "qwen"
    keys = list(record)
    if "x" in keys and first_amount in keys and keys.index(first_amount) < keys.index("x"):
        return "uitars"
    return "standard"


def _optional_str(record: Mapping[str, Any], key: str) -> str | None:
    value = record.get(key)
    if value is not None and not isinstance(value, str):
        raise ValueError(f"recorded action: {key} must be a string, got {value!r}")
    return value


def from_record(record: Mapping[str, Any]) -> Action:
    """The :data:`Action` a run record's ``"action"`` (or a stateless ``"physical"``) holds.

    ``from_record(r).to_record() == r``, keys in the same order. Raises ValueError for a
    record no deskpilot version wrote.
    """
    kind = record.get("kind")
    if kind == "click":
        style = _style(record, "button")
        button = record.get("button", "left")
        if button not in ("left", "right", "middle"):
            raise ValueError(f"recorded action: unknown button {button!r}")
        return Click(
            _recorded_point(record),
            button,
            _int(record, "count"),
            label=_optional_str(record, "label"),
            hold=_optional_str(record, "hold"),
            style=style,
        )
    if kind == "move":
        return MoveMouse((_int(record, "x"), _int(record, "y")))
    if kind == "drag":
        keys = list(record)
        start = _pair(record["start"], "start") if "start" in record else None
        qwen = start is not None and keys.index("end") < keys.index("start")
        steps = record.get("steps")
        duration = record.get("duration")
        return Drag(
            start,
            _pair(record.get("end"), "end"),
            label=_optional_str(record, "label"),
            steps=None if steps is None else _int(record, "steps"),
            duration=None if duration is None else float(duration),
            style="qwen" if qwen else "standard",
        )
    if kind == "scroll":
        return Scroll(_recorded_point(record), _int(record, "dy"), _int(record, "dx"), style=_style(record, "dy"))
    if kind == "type":
        value = record.get("text")
        if not isinstance(value, str):
            raise ValueError(f"recorded action: text must be a string, got {value!r}")
        return TypeText(value)
    if kind == "key":
        return KeyPress(str(record.get("key", "")))
    if kind == "hold":
        return Hold(str(record.get("key", "")), float(record.get("seconds", 0.0)))
    if kind == "wait":
        return Wait(float(record.get("seconds", 0.0)))
    if kind == "zoom":
        return Zoom(parse_box(record.get("box")))
    raise ValueError(f"recorded action of unknown kind {kind!r}")


# ---------------------------------------------------------------------- argument checks


def _finite(value: float) -> bool:
    """Whether ``value`` is a finite number a double holds (``math.isfinite`` raises
    OverflowError for an integer too large for one)."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def integer(args: Mapping[str, Any], key: str, *, default: int, low: int, high: int) -> int:
    """A whole number ``low..high`` (a float is truncated); absent or null: ``default``."""
    value = args.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not _finite(value):
        raise ArgumentError("invalid_args", f"{key} must be a whole number {low}..{high}, got {value!r}")
    result = int(value)
    if not low <= result <= high:
        raise ArgumentError("invalid_args", f"{key} must be {low}..{high}, got {value!r}")
    return result


def number(args: Mapping[str, Any], key: str, *, default: float, low: float, high: float) -> float:
    """A number ``low..high``; absent or null: ``default``."""
    value = args.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not _finite(value):
        raise ArgumentError("invalid_args", f"{key} must be a number {low}..{high}, got {value!r}")
    result = float(value)
    if not low <= result <= high:
        raise ArgumentError("invalid_args", f"{key} must be {low}..{high}, got {value!r}")
    return result


def coordinate(args: Mapping[str, Any], key: str) -> int:
    """A required 0..1000 coordinate (a numeric string is read), clamped to the range.

    ``nan``, infinities and numbers too large for a double (``"1e1000"``, a 400-digit
    integer) are refused with ``invalid_args``, never clamped onto an edge.
    """
    value = args.get(key)
    if value is None:
        raise ArgumentError("invalid_args", f"{key} is required (0..1000)")
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise ArgumentError("invalid_args", f"{key} must be a number 0..1000, got {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ArgumentError("invalid_args", f"{key} must be a number 0..1000, got {value!r}")
    try:
        # The value itself, not float(value): an integer too large for a double is
        # refused by clamp_norm instead of raising OverflowError here.
        return clamp_norm(value)
    except InvalidBoxError as exc:
        raise ArgumentError("invalid_args", f"{key}: {exc}") from None


def box(args: Mapping[str, Any], key: str = "box") -> Box:
    """A point or box in any format :func:`deskpilot.geometry.parse_box` reads."""
    try:
        return parse_box(args.get(key))
    except InvalidBoxError as exc:
        message = str(exc) if key == "box" else f"{key}: {exc}"
        raise ArgumentError(exc.kind, message) from None


def label(args: Mapping[str, Any], *, required: bool = True) -> str:
    """The element's name, stripped; ``""`` when optional and absent."""
    value = args.get("label")
    if value is None or (isinstance(value, str) and not value.strip()):
        if required:
            raise ArgumentError("missing_label", "label is required: name the element you act on, e.g. 'Search box'")
        return ""
    if not isinstance(value, str):
        raise ArgumentError("invalid_args", f"label must be a string, got {type(value).__name__}")
    return value.strip()


def text(args: Mapping[str, Any], *, limit: int | None, key: str = "text") -> str:
    """Text to type, exactly as given (a trailing space can matter): a non-empty string of
    at most ``limit`` characters (``agent.max_type_chars``; None: the caller checks later)."""
    value = args.get(key)
    if value is None or value == "":
        raise ArgumentError("empty_text", f"{key} is required and must not be empty")
    if not isinstance(value, str):
        raise ArgumentError("invalid_args", f"{key} must be a string, got {type(value).__name__}")
    if limit is not None and len(value) > limit:
        raise ArgumentError(
            "text_too_long",
            f"{key} has {len(value)} characters; type_text types at most {limit} per call "
            "(agent.max_type_chars): type it in parts",
        )
    return value


def key_combo(
    args: Mapping[str, Any],
    resolve: Callable[[str], list[str]],
    *,
    keys: tuple[str, ...] = ("key",),
    example: str = "'enter', 'tab', 'ctrl+c', 'alt+f4'",
    like: str | None = "'ctrl+c'",
    lists: bool = True,
) -> str:
    """A key or combo, its names canonical (``"Ctrl+C"`` -> ``"ctrl+c"``).

    The first of ``keys`` present is read (``press_key`` also takes ``keys``); a list of
    names is joined with ``+`` when ``lists``. ``resolve`` (the input layer's
    ``parse_combo`` names) raises UnknownKeyError for a name it does not know: the model
    is told ``invalid_key`` with the close matches.
    """
    name = keys[0]
    value: Any = None
    for candidate in keys:
        if candidate in args:
            value = args[candidate]
            break
    if value is None or (isinstance(value, str) and not value.strip()):
        raise ArgumentError("missing_key", f"{name} is required, e.g. {example}")
    if lists and isinstance(value, list) and value and all(isinstance(k, str) for k in value):
        value = "+".join(value)
    if not isinstance(value, str):
        shape = f"a string like {like}" if like else "a string"
        raise ArgumentError("invalid_args", f"{name} must be {shape}, got {value!r}")
    return combo_names(value, resolve)


def combo_names(combo: str, resolve: Callable[[str], list[str]]) -> str:
    """``combo`` with each key's canonical name, or ``invalid_key``."""
    try:
        return "+".join(resolve(combo))
    except UnknownKeyError as exc:
        raise ArgumentError("invalid_key", str(exc)) from None
