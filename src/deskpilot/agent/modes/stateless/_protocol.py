"""The stateless mode's JSON protocol (seed 004): what the model answers, parsed without ever failing.

The model answers one JSON object per turn::

    {"observation": "what I see and what I am doing (my story)",
     "bboxes": [{"x1": 100, "y1": 80, "x2": 400, "y2": 160, "label": "search field"}],
     "actions": [{"name": "click", "x1": 250, "y1": 120},
                 {"name": "type", "text": "hello"},
                 {"name": "key", "keys": "enter"},
                 {"name": "drag", "x1": 100, "y1": 100, "x2": 300, "y2": 100},
                 {"name": "scroll", "x1": 500, "y1": 500, "direction": "down", "amount": 3},
                 {"name": "done"}]}

Coordinates are integers 0..1000 over the working area; out-of-range values are clamped.
Action names are case-insensitive (``Right-Click`` is ``right_click``); pointer actions
need ``x1, y1`` (``x, y`` also accepted), ``drag`` also ``x2, y2``.

Parsing (seed behaviour, extended): the whole text as JSON; else a fenced ```json block;
else the first balanced ``{...}`` block that is a JSON object (also after removing
trailing commas), preferring the first fence or block that holds ``observation``,
``actions`` or ``bboxes`` over an earlier one without them (an example the model quoted);
else the whole text is the observation and nothing is done.
``<think>`` blocks are removed first. Every item that cannot be used is recorded in
:attr:`VlmOutput.rejected` with the reason, and the model is told about it next turn.
No input makes :func:`parse_vlm_output` raise.
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

import orjson

from deskpilot._errors import ArgumentError, UnknownKeyError
from deskpilot._untrusted import scrub_surrogates
from deskpilot.agent.client._toolcalls import strip_think
from deskpilot.geometry import NORM_MAX
from deskpilot.imaging import ActionMark, BoxMark, scroll_words
from deskpilot.input import parse_combo
from deskpilot.rundir import ReplyRecord

__all__ = [
    "ACTION_NAMES",
    "BBox",
    "Rejection",
    "ReplyAction",
    "VlmOutput",
    "parse_vlm_output",
]

#: Canonical action names, in the order the system prompt lists them.
ACTION_NAMES = (
    "move",
    "click",
    "right_click",
    "double_click",
    "drag",
    "scroll",
    "type",
    "key",
    "done",
)

_ALIASES = {
    "mouse_move": "move",
    "hover": "move",
    "move_mouse": "move",
    "left_click": "click",
    "tap": "click",
    "rightclick": "right_click",
    "context_click": "right_click",
    "doubleclick": "double_click",
    "dblclick": "double_click",
    "double": "double_click",
    "type_text": "type",
    "write": "type",
    "text": "type",
    "press": "key",
    "press_key": "key",
    "hotkey": "key",
    "keys": "key",
    "scroll_up": "scroll",
    "scroll_down": "scroll",
    "scroll_left": "scroll",
    "scroll_right": "scroll",
    "finish": "done",
    "stop": "done",
}
_IMPLIED_DIRECTION = {
    "scroll_up": "up",
    "scroll_down": "down",
    "scroll_left": "left",
    "scroll_right": "right",
}
_DIRECTIONS = {"up": (0, -1), "down": (0, 1), "left": (-1, 0), "right": (1, 0)}

#: Bounds that keep one reply from doing something absurd.
MAX_TEXT_CHARS = 2000
MAX_SCROLL_NOTCHES = 25
DEFAULT_SCROLL_NOTCHES = 3
#: How much of the input the fallbacks look at (a runaway reply must not cost seconds).
MAX_SCAN_CHARS = 200_000
MAX_BLOCK_CANDIDATES = 32
MAX_SCAN_STEPS = 100_000
MAX_ITEMS_SCANNED = 256

Source = Literal["json", "fenced", "block", "text"]


@dataclass(frozen=True, slots=True)
class ReplyAction:
    """One action as the stateless reply names it, in 0..1000 coordinates of the working
    area (the engine maps it to the typed :class:`deskpilot.actions.Action` it performs)."""

    name: str
    x1: int | None = None
    y1: int | None = None
    x2: int | None = None
    y2: int | None = None
    text: str | None = None  # type
    keys: str | None = None  # key
    dx: int = 0  # scroll notches, > 0 right
    dy: int = 0  # scroll notches, > 0 down

    @property
    def is_pointer(self) -> bool:
        return self.x1 is not None and self.y1 is not None

    def as_dict(self) -> dict[str, Any]:
        """The seed's action dict (``name``, ``x1``...), only the fields that apply."""
        out: dict[str, Any] = {"name": self.name}
        for key in ("x1", "y1", "x2", "y2", "text", "keys"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        if self.name == "scroll":
            out["dx"], out["dy"] = self.dx, self.dy
        return out

    def describe(self) -> str:
        """Short text for feedback and labels: ``click 500,300``, ``type "hi"``."""
        if self.name == "type":
            return f"type {orjson.dumps(self.text or '').decode()}"
        if self.name == "key":
            return f"key {self.keys}"
        parts = [self.name]
        if self.name == "scroll":
            parts.append(scroll_words(self.dx, self.dy))
        if self.is_pointer:
            parts.append(f"{self.x1},{self.y1}")
        if self.x2 is not None and self.y2 is not None:
            parts[-1] += f">{self.x2},{self.y2}"
        return " ".join(parts)

    def mark(self) -> ActionMark:
        """The overlay mark of this action (heat, marker and label)."""
        detail = ""
        if self.name == "type":
            detail = self.text or ""
        elif self.name == "key":
            detail = self.keys or ""
        elif self.name == "scroll":
            detail = scroll_words(self.dx, self.dy)
        return ActionMark(self.name, self.x1, self.y1, self.x2, self.y2, detail=detail)


@dataclass(frozen=True, slots=True)
class BBox:
    """A model-provided box (regions of interest), 0..1000, ordered corners."""

    x1: int
    y1: int
    x2: int
    y2: int
    label: str = ""

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"x1": self.x1, "y1": self.y1, "x2": self.x2, "y2": self.y2}
        if self.label:
            out["label"] = self.label
        return out

    def mark(self) -> BoxMark:
        return BoxMark(self.x1, self.y1, self.x2, self.y2, self.label)


@dataclass(frozen=True, slots=True)
class Rejection:
    """An item of the reply that was not used, and why (``index`` is 0-based in its list)."""

    kind: Literal["json", "observation", "action", "bbox"]
    reason: str
    index: int | None = None
    item: str = ""  # a short excerpt of what was refused

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "reason": self.reason}
        if self.index is not None:
            out["index"] = self.index
        if self.item:
            out["item"] = self.item
        return out

    def describe(self) -> str:
        where = f"{self.kind} {self.index + 1}" if self.index is not None else self.kind
        return f"{where}: {self.reason}"


@dataclass(frozen=True, slots=True)
class VlmOutput:
    """One parsed reply."""

    observation: str
    bboxes: tuple[BBox, ...] = ()
    actions: tuple[ReplyAction, ...] = ()
    rejected: tuple[Rejection, ...] = ()
    source: Source = "text"
    #: The JSON text that was used (``None`` when the reply held none).
    json_text: str | None = None
    raw: str = field(default="", repr=False)

    @property
    def done(self) -> bool:
        return any(a.name == "done" for a in self.actions)

    def as_record(self) -> ReplyRecord:
        return {
            "observation": self.observation,
            "bboxes": [b.as_dict() for b in self.bboxes],
            "actions": [a.as_dict() for a in self.actions],
            "rejected": [r.as_dict() for r in self.rejected],
            "source": self.source,
        }


# ---------------------------------------------------------------------- locating the JSON

_FENCE = re.compile(r"```[ \t]*(?:json|JSON|javascript|js)?[ \t]*\r?\n?(.*?)```", re.DOTALL)
_TRAILING_COMMA = re.compile(r",(\s*[}\]])")


def _loads_object(text: str) -> dict[str, Any] | None:
    try:
        value = orjson.loads(text)
    except (orjson.JSONDecodeError, TypeError, ValueError):
        # The standard library also reads what orjson refuses and models do write:
        # NaN/Infinity and integers beyond 64 bits.
        try:
            # It also reads a lone surrogate escape ("\\ud800") into a str no UTF-8
            # writer takes: those become U+FFFD here, once, for every later consumer.
            value = scrub_surrogates(json.loads(text))
        except (ValueError, RecursionError):
            return None
    return value if isinstance(value, dict) else None


def _lenient_object(text: str) -> dict[str, Any] | None:
    found = _loads_object(text)
    if found is None and "," in text:
        # Models often leave a trailing comma; JSON does not allow it.
        found = _loads_object(_TRAILING_COMMA.sub(r"\1", text))
    return found


_SPECIAL = re.compile(r'["{}\\]')


class _Budget:
    """How many special characters the block search may still visit (bounds its time)."""

    def __init__(self, steps: int) -> None:
        self.steps = steps


def _balanced_end(text: str, start: int, budget: _Budget) -> int | None:
    """Index just past the ``}`` that closes the ``{`` at ``start`` (strings respected)."""
    depth = 0
    in_string = False
    escaped_at = -2
    # Only quotes, braces and backslashes matter; the regex skips everything else in C.
    for match in _SPECIAL.finditer(text, start):
        budget.steps -= 1
        if budget.steps < 0:
            return None
        i = match.start()
        ch = text[i]
        if in_string:
            if ch == "\\":
                if escaped_at != i - 1:
                    escaped_at = i
                    continue
            elif ch == '"' and escaped_at != i - 1:
                in_string = False
            escaped_at = -2
        elif ch == '"':
            in_string = True
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return i + 1
    return None


#: Keys of the reply object; a candidate block holding one of them is the answer, not an
#: example or a stray object the model wrote before it.
_REPLY_KEYS = ("observation", "actions", "bboxes", "action", "boxes")


def _is_reply(found: dict[str, Any]) -> bool:
    return any(key in found for key in _REPLY_KEYS)


def _locate(text: str, *, last: bool = False) -> tuple[dict[str, Any], Source, str] | None:
    """The reply object in ``text``: the first candidate that looks like a reply, or with
    ``last`` the last one (a thinking model's reasoning drafts its answer before it gives
    it: the final answer is the last complete block, read from the text's tail)."""
    stripped = text.strip()
    found = _loads_object(stripped)
    if found is not None:
        return found, "json", stripped
    if last:
        return _locate_last(stripped[-MAX_SCAN_CHARS:]) or _locate_first(stripped[:MAX_SCAN_CHARS])
    return _locate_first(stripped[:MAX_SCAN_CHARS])


def _locate_last(scan: str) -> tuple[dict[str, Any], Source, str] | None:
    """The last complete reply-like object (fenced or a balanced block) in ``scan``."""
    best: tuple[int, tuple[dict[str, Any], Source, str]] | None = None
    for match in _FENCE.finditer(scan):
        body = match.group(1).strip()
        found = _lenient_object(body)
        if found is not None and _is_reply(found):
            best = (match.start(), (found, "fenced", body))
    # Balanced blocks from the end: the first reply-like one found is the last in the text.
    budget = _Budget(MAX_SCAN_STEPS)
    start = scan.rfind("{")
    tries = 0
    while start != -1 and tries < MAX_BLOCK_CANDIDATES and budget.steps > 0:
        tries += 1
        end = _balanced_end(scan, start, budget)
        if end is not None:
            block = scan[start:end]
            found = _lenient_object(block)
            if found is not None and _is_reply(found):
                if best is None or start > best[0]:
                    best = (start, (found, "block", block))
                break
        start = scan.rfind("{", 0, start)
    return None if best is None else best[1]


def _locate_first(scan: str) -> tuple[dict[str, Any], Source, str] | None:
    # The first candidate that looks like a reply (has "observation", "actions" or
    # "bboxes") wins; without one, the first candidate that parses (seed behaviour).
    first_parsed: tuple[dict[str, Any], Source, str] | None = None
    for match in _FENCE.finditer(scan):
        body = match.group(1).strip()
        found = _lenient_object(body)
        if found is not None:
            if _is_reply(found):
                return found, "fenced", body
            first_parsed = first_parsed or (found, "fenced", body)
    start = scan.find("{")
    tries = 0
    budget = _Budget(MAX_SCAN_STEPS)
    while start != -1 and tries < MAX_BLOCK_CANDIDATES and budget.steps > 0:
        tries += 1
        end = _balanced_end(scan, start, budget)
        if end is not None:
            block = scan[start:end]
            found = _lenient_object(block)
            if found is not None:
                if _is_reply(found):
                    return found, "block", block
                first_parsed = first_parsed or (found, "block", block)
                # Objects nested in a block that is not the reply are not the reply either.
                start = scan.find("{", end)
                continue
        start = scan.find("{", start + 1)
    # The seed's regex: from the first "{" to the last "}".
    first, last = scan.find("{"), scan.rfind("}")
    if first != -1 and last > first:
        block = scan[first : last + 1]
        found = _lenient_object(block)
        if found is not None and (first_parsed is None or _is_reply(found)):
            return found, "block", block
    return first_parsed


# ---------------------------------------------------------------------- items


class _Reject(ArgumentError):
    """An item that cannot be used: it goes to :attr:`VlmOutput.rejected` with ``reason``
    (the tool sets' ``invalid_args``; the model reads the reason next turn). It never
    leaves this module: :func:`parse_vlm_output` turns it into a :class:`Rejection`."""

    def __init__(self, reason: str) -> None:
        super().__init__("invalid_args", reason)
        self.reason = reason


def _excerpt(value: Any, limit: int = 120) -> str:
    try:
        text = orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()
    except (TypeError, orjson.JSONEncodeError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _coord(item: Mapping[str, Any], names: tuple[str, ...], what: str) -> int | None:
    for name in names:
        if name in item:
            return _clamped(item[name], f"{what} {name}")
    return None


def _clamped(value: Any, what: str) -> int:
    if isinstance(value, bool):
        raise _Reject(f"{what} must be a number 0..1000, got {_excerpt(value)}")
    if isinstance(value, int):
        if abs(value) > sys.float_info.max:
            # An integer no double holds (a 400-digit number) is as absurd as inf: refused,
            # not clamped onto the edge (trycua/cua refuses it too).
            raise _Reject(f"{what} must be a finite number, got {_excerpt(value)}")
        return max(0, min(NORM_MAX, value))
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            raise _Reject(f"{what} must be a number 0..1000, got {_excerpt(value)}") from None
    if isinstance(value, float):
        if not math.isfinite(value):
            raise _Reject(f"{what} must be a finite number, got {_excerpt(value)}")
        return max(0, min(NORM_MAX, round(value)))
    raise _Reject(f"{what} must be a number 0..1000, got {_excerpt(value)}")


def _int_value(value: Any, what: str) -> int:
    if isinstance(value, bool):
        raise _Reject(f"{what} must be an integer, got {_excerpt(value)}")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            raise _Reject(f"{what} must be an integer, got {_excerpt(value)}") from None
    if isinstance(value, float) and math.isfinite(value):
        return round(value)
    raise _Reject(f"{what} must be an integer, got {_excerpt(value)}")


def _string(item: Mapping[str, Any], names: tuple[str, ...]) -> Any:
    for name in names:
        if name in item:
            return item[name]
    return None


def _action_name(item: Mapping[str, Any]) -> tuple[str, str]:
    raw = _string(item, ("name", "action", "type"))
    if not isinstance(raw, str) or not raw.strip():
        raise _Reject('action needs a "name" (one of ' + ", ".join(ACTION_NAMES) + ")")
    key = re.sub(r"[\s\-]+", "_", raw.strip().lower())
    name = key if key in ACTION_NAMES else _ALIASES.get(key, "")
    if not name:
        raise _Reject(f"unknown action {raw.strip()[:40]!r}; known: {', '.join(ACTION_NAMES)}")
    return name, key


def _parse_action(item: Any) -> ReplyAction:
    if not isinstance(item, dict):
        raise _Reject(f"an action must be an object, got {type(item).__name__}")
    name, written = _action_name(item)
    if name == "done":
        return ReplyAction("done")
    if name == "type":
        return _parse_type(item)
    if name == "key":
        return _parse_key(item)
    return _parse_pointer(item, name, written)


def _parse_type(item: Mapping[str, Any]) -> ReplyAction:
    text = _string(item, ("text", "value", "content", "string"))
    if not isinstance(text, str):
        raise _Reject('type needs "text" (a string)')
    if not text:
        raise _Reject('type needs a non-empty "text"')
    if len(text) > MAX_TEXT_CHARS:
        raise _Reject(f"type text is longer than {MAX_TEXT_CHARS} characters")
    return ReplyAction("type", text=text)


def _parse_key(item: Mapping[str, Any]) -> ReplyAction:
    keys = _string(item, ("keys", "key", "combo", "hotkey", "text"))
    if isinstance(keys, list) and keys and all(isinstance(k, str) for k in keys):
        keys = "+".join(keys)
    if not isinstance(keys, str) or not keys.strip():
        raise _Reject('key needs "keys", e.g. "enter" or "ctrl+s"')
    keys = keys.strip()
    try:
        parse_combo(keys)
    except UnknownKeyError as exc:
        raise _Reject(f"key: {exc}") from None
    return ReplyAction("key", keys=keys)


def _parse_pointer(item: Mapping[str, Any], name: str, written: str) -> ReplyAction:
    """A pointer action (move, the clicks, drag) or a scroll, at x1/y1 (0..1000)."""
    x1 = _coord(item, ("x1", "x"), name)
    y1 = _coord(item, ("y1", "y"), name)
    if name == "scroll":
        return _parse_scroll(item, written, x1, y1)
    if x1 is None or y1 is None:
        raise _Reject(f"{name} needs x1 and y1 (0..1000)")
    if name == "drag":
        x2 = _coord(item, ("x2",), name)
        y2 = _coord(item, ("y2",), name)
        if x2 is None or y2 is None:
            raise _Reject("drag needs x2 and y2 (0..1000) for the end point")
        return ReplyAction("drag", x1, y1, x2, y2)
    return ReplyAction(name, x1, y1)


def _parse_scroll(item: Mapping[str, Any], written: str, x1: int | None, y1: int | None) -> ReplyAction:
    if (x1 is None) != (y1 is None):
        raise _Reject("scroll needs both x1 and y1, or neither (the centre)")
    if x1 is None or y1 is None:
        x1 = y1 = NORM_MAX // 2
    dx = _int_value(item["dx"], "scroll dx") if "dx" in item else 0
    dy = _int_value(item["dy"], "scroll dy") if "dy" in item else 0
    direction = item.get("direction", _IMPLIED_DIRECTION.get(written))
    if direction is not None:
        if not isinstance(direction, str) or direction.strip().lower() not in _DIRECTIONS:
            raise _Reject(
                f"scroll direction must be up, down, left or right, got {_excerpt(direction)}"
            )
        amount = (
            _int_value(item["amount"], "scroll amount")
            if "amount" in item
            else DEFAULT_SCROLL_NOTCHES
        )
        if amount <= 0:
            raise _Reject(f"scroll amount must be >= 1, got {amount}")
        ux, uy = _DIRECTIONS[direction.strip().lower()]
        dx, dy = dx + ux * amount, dy + uy * amount
    if dx == 0 and dy == 0:
        raise _Reject('scroll needs "direction" (up/down/left/right) or dy/dx notches')
    clamp = MAX_SCROLL_NOTCHES
    return ReplyAction("scroll", x1, y1, dx=max(-clamp, min(clamp, dx)), dy=max(-clamp, min(clamp, dy)))


def _parse_bbox(item: Any) -> BBox:
    if isinstance(item, (list, tuple)):
        if len(item) != 4:
            raise _Reject(f"a bbox list needs 4 numbers [x1, y1, x2, y2], got {len(item)}")
        values = [_clamped(v, "bbox") for v in item]
        label = ""
    elif isinstance(item, dict):
        coords = []
        for key in ("x1", "y1", "x2", "y2"):
            if key not in item:
                raise _Reject("a bbox needs x1, y1, x2, y2 (0..1000)")
            coords.append(_clamped(item[key], f"bbox {key}"))
        values = coords
        raw_label = _string(item, ("label", "name", "text", "description"))
        label = raw_label.strip()[:80] if isinstance(raw_label, str) else ""
    else:
        raise _Reject(f"a bbox must be an object with x1, y1, x2, y2, got {type(item).__name__}")
    x1, y1, x2, y2 = values
    return BBox(min(x1, x2), min(y1, y2), max(x1, x2), max(y1, y2), label)


def _items(
    value: Any, kind: Literal["action", "bbox"], key: str, rejected: list[Rejection]
) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, dict):
        return [value]  # one item given without the list
    if not isinstance(value, list):
        rejected.append(Rejection(kind, f'"{key}" must be a list', item=_excerpt(value)))
        return []
    return value


def parse_vlm_output(
    text: Any,
    *,
    max_actions: int = 8,
    max_bboxes: int = 8,
    max_observation_chars: int = 4000,
    from_reasoning: bool = False,
) -> VlmOutput:
    """Parse one model reply (see the module docstring). Never raises.

    ``from_reasoning``: ``text`` is a thinking model's reasoning (its content was empty),
    where it drafts the JSON before the answer: the last complete reply object is acted on,
    not the first (the draft).
    """
    text = _reply_text(text)
    cleaned = strip_think(text)
    rejected: list[Rejection] = []
    located = _locate_reply(text, cleaned, from_reasoning)
    if located is None:
        observation = cleaned[:max_observation_chars]
        if cleaned:
            rejected.append(
                Rejection("json", "no JSON object found: the reply was taken as the observation")
            )
        else:
            rejected.append(Rejection("json", "empty reply"))
        return VlmOutput(observation, rejected=tuple(rejected), source="text", raw=text)
    data, source, json_text = located
    observation = _read_observation(data, max_observation_chars, rejected)
    box_items = _items(data.get("bboxes", data.get("boxes")), "bbox", "bboxes", rejected)
    bboxes = _read_items(box_items, "bbox", max_bboxes, _parse_bbox, rejected)
    action_items = _items(data.get("actions", data.get("action")), "action", "actions", rejected)
    actions = _read_items(action_items, "action", max_actions, _parse_action, rejected)
    if len(box_items) > MAX_ITEMS_SCANNED:
        rejected.append(
            Rejection("bbox", f"{len(box_items) - MAX_ITEMS_SCANNED} more bboxes ignored")
        )
    if len(action_items) > MAX_ITEMS_SCANNED:
        rejected.append(
            Rejection("action", f"{len(action_items) - MAX_ITEMS_SCANNED} more actions ignored")
        )
    return VlmOutput(
        observation, tuple(bboxes), tuple(actions), tuple(rejected), source, json_text, text
    )


def _reply_text(text: Any) -> str:
    """The reply as text, whatever the server sent (bytes, None, another value)."""
    if isinstance(text, bytes):
        return text.decode("utf-8", "replace")
    if not isinstance(text, str):
        return "" if text is None else str(text)
    return text


def _locate_reply(text: str, cleaned: str, from_reasoning: bool) -> tuple[dict[str, Any], Source, str] | None:
    """The reply object in ``cleaned`` (``text`` without its thinking), or in ``text`` as
    written where stripping the thinking cut it."""
    located = _locate(cleaned, last=from_reasoning)
    if cleaned != text.strip() and (located is None or not _is_reply(located[0])):
        # A think tag inside the reply's own strings ({"observation": "... <think> ..."})
        # made the stripping cut the JSON: use the reply as written, unless it only
        # appears after a think tag (then it is part of the reasoning).
        unstripped = _locate(text, last=from_reasoning)
        if unstripped is not None and _is_reply(unstripped[0]):
            at = text.find(unstripped[2])
            if at >= 0 and "think>" not in text[:at]:
                located = unstripped
    return located


def _read_observation(data: Mapping[str, Any], max_chars: int, rejected: list[Rejection]) -> str:
    obs_value = data.get("observation")
    if isinstance(obs_value, str):
        observation = obs_value.strip()
    elif obs_value is None:
        observation = ""
        rejected.append(Rejection("observation", 'no "observation": keep telling your story in it'))
    else:
        observation = _excerpt(obs_value, max_chars)
        rejected.append(Rejection("observation", '"observation" should be a string'))
    if len(observation) > max_chars:
        observation = observation[:max_chars]
        rejected.append(Rejection("observation", f"observation cut to {max_chars} characters"))
    return observation


_Item = TypeVar("_Item")
_PLURAL = {"action": "actions", "bbox": "bboxes"}


def _read_items(
    items: list[Any],
    kind: Literal["action", "bbox"],
    limit: int,
    parse: Callable[[Any], _Item],
    rejected: list[Rejection],
) -> list[_Item]:
    """The first ``limit`` items that ``parse`` reads (of the first MAX_ITEMS_SCANNED);
    each one refused, or over the limit, is a rejection."""
    read: list[_Item] = []
    for index, item in enumerate(items[:MAX_ITEMS_SCANNED]):
        if len(read) >= limit:
            rejected.append(Rejection(kind, f"over the limit of {limit} {_PLURAL[kind]} per turn", index, _excerpt(item)))
            continue
        try:
            read.append(parse(item))
        except _Reject as exc:
            rejected.append(Rejection(kind, exc.reason, index, _excerpt(item)))
    return read
