"""Pieces both team variants share: coordinates, tool specs, argument readers, call parsing.

Seeds 002 and 003 describe the same design with different names (commander/operator
vs planner/executor, ``justification``/``label`` vs ``reasoning``/``element_name``). The
names are data (:mod:`~deskpilot.agent.modes.team._variants`); a parsed call is one of the
argument dataclasses below whatever the variant, so the engine has one code path.

Parsing never crashes on model output: every problem becomes a
:class:`~deskpilot.agent.tools._core.ArgumentError` whose ``kind`` is the seeds' error vocabulary
(``unknown_tool``, ``invalid_json``, ``invalid_args``, ``missing_label``,
``missing_box``, ``invalid_box``, ``empty_text``, ``missing_key``, ``invalid_key``).
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from deskpilot import actions
from deskpilot._errors import ArgumentError, InvalidBoxError
from deskpilot.agent.client._toolcalls import ToolCall
from deskpilot.agent.tools._core import key_names
from deskpilot.geometry import NORM_MAX, clamp_norm, parse_box
from deskpilot.geometry import Mapping as GeoMapping

__all__ = [
    "DONE_STATUSES",
    "EXECUTOR_KINDS",
    "PLANNER_KINDS",
    "ArchiveArgs",
    "CompletionArgs",
    "Coordinate",
    "DragArgs",
    "KeyArgs",
    "Kind",
    "ParsedCall",
    "PlanArgs",
    "PointerArgs",
    "ProgressArgs",
    "Role",
    "ScrollArgs",
    "TextArgs",
    "ToolSpec",
    "parse_call",
    "read_coordinate",
    "read_key",
    "read_optional_text",
    "read_required_text",
    "read_text_to_type",
    "read_turns",
]

Role = Literal["planner", "executor"]

#: What a tool does, independent of the variant's name for it.
Kind = Literal[
    "plan",
    "archive",
    "click",
    "double_click",
    "right_click",
    "drag",
    "type",
    "key",
    "scroll_down",
    "scroll_up",
    "progress",
    "complete",
]
PLANNER_KINDS: tuple[Kind, ...] = ("plan", "archive")
EXECUTOR_KINDS: tuple[Kind, ...] = (
    "click",
    "double_click",
    "right_click",
    "drag",
    "type",
    "key",
    "scroll_down",
    "scroll_up",
    "progress",
    "complete",
)

#: Progress statuses that hand control back to the planner (seed 003's list).
DONE_STATUSES = frozenset({"DONE", "COMPLETED", "COMPLETE"})


@dataclass(frozen=True, slots=True)
class Coordinate:
    """A model point on the seeds' normalized 0..1000 grid over the screenshot."""

    x: int
    y: int

    def __post_init__(self) -> None:
        for name, value in (("x", self.x), ("y", self.y)):
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= NORM_MAX:
                raise ValueError(
                    f"Coordinate.{name} must be an integer 0..{NORM_MAX}, got {value!r}"
                )

    @classmethod
    def clamped(cls, x: float, y: float) -> Coordinate:
        """Round and clamp into the grid (the seeds clamp before converting)."""
        return cls(clamp_norm(x), clamp_norm(y))

    def to_physical(self, mapping: GeoMapping) -> tuple[int, int]:
        """The physical pixel this point names (the project's geometry contract)."""
        return mapping.norm_to_physical(self.x, self.y)

    def as_list(self) -> list[int]:
        return [self.x, self.y]

    def __str__(self) -> str:
        return f"({self.x}, {self.y})"


# ---------------------------------------------------------------------- arguments
# One frozen dataclass per tool kind, the same for every variant: a variant only names the
# JSON arguments differently (``justification`` or ``reasoning``; see
# :class:`~deskpilot.agent.modes.team._tool_specs.ArgumentNames`), the engine reads these fields.


@dataclass(frozen=True, slots=True)
class PointerArgs:
    """click, double_click, right_click: the element and where it is."""

    reason: str
    target: str
    position: Coordinate


@dataclass(frozen=True, slots=True)
class DragArgs:
    reason: str
    target: str
    start: Coordinate
    end: Coordinate


@dataclass(frozen=True, slots=True)
class TextArgs:
    reason: str
    text: str


@dataclass(frozen=True, slots=True)
class KeyArgs:
    reason: str
    key: str


@dataclass(frozen=True, slots=True)
class ScrollArgs:
    reason: str


@dataclass(frozen=True, slots=True)
class ProgressArgs:
    """A goal's status report; ``state`` is upper case with underscores (``IN_PROGRESS``)."""

    goal: str
    state: str
    evidence: str


@dataclass(frozen=True, slots=True)
class CompletionArgs:
    evidence: str


@dataclass(frozen=True, slots=True)
class PlanArgs:
    instructions: str
    rationale: str


@dataclass(frozen=True, slots=True)
class ArchiveArgs:
    summary: str
    patterns: str
    archived_turns: tuple[int, ...]


# ---------------------------------------------------------------------- argument readers


def read_required_text(
    args: Mapping[str, Any], name: str, *, missing: str = "invalid_args", hint: str = ""
) -> str:
    """A non-empty string argument (stripped); ``missing`` is the error kind when absent."""
    value = args.get(name)
    if value is None or (isinstance(value, str) and not value.strip()):
        raise ArgumentError(missing, f"{name} is required{': ' + hint if hint else ''}")
    if not isinstance(value, str):
        raise ArgumentError(
            "invalid_args", f"{name} must be a string, got {type(value).__name__}: {value!r}"[:300]
        )
    return value.strip()


def read_text_to_type(args: Mapping[str, Any], name: str = "text") -> str:
    """Text to type, exactly as given (the type tool checks its length)."""
    return actions.text(args, limit=None, key=name)


def read_optional_text(args: Mapping[str, Any], name: str) -> str:
    """A free-text argument the seeds ask for but never check (reasoning, rationale):
    absent means ``""``; a number is written as text; a list or object is refused."""
    value = args.get(name)
    if value is None:
        return ""
    if isinstance(value, (bool, dict, list)):
        raise ArgumentError("invalid_args", f"{name} must be text, got {type(value).__name__}")
    return str(value).strip()


def read_coordinate(args: Mapping[str, Any], name: str) -> Coordinate:
    """A point: ``[x, y]`` (the seeds' form), ``{"x", "y"}``, a JSON string of either, or a
    box ``[x1, y1, x2, y2]`` (its centre). ``position`` also accepts top-level ``x``/``y``
    (small models flatten it)."""
    value = args.get(name)
    if value is None and name == "position" and "x" in args and "y" in args:
        value = [args["x"], args["y"]]
    if isinstance(value, str) and value.strip() and value.strip()[0] not in "[{":
        # "500, 300" or "(500, 300)": numbers in a string
        numbers = re.findall(r"-?\d+(?:\.\d+)?", value)
        if len(numbers) in (2, 4):
            value = [float(n) for n in numbers]
    try:
        box = parse_box(value)
    except InvalidBoxError as exc:
        raise ArgumentError(exc.kind, f"{name}: {exc}") from None
    cx, cy = box.center
    return Coordinate(cx, cy)


def read_key(args: Mapping[str, Any], name: str = "key") -> str:
    """A key or combo (``enter``, ``ctrl+c``); checked against the key vocabulary now so an
    unknown key is reported before anything is pressed."""
    value = args.get(name)
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        value = "+".join(value)
    if value is None or (isinstance(value, str) and not value.strip()):
        raise ArgumentError(
            "missing_key", f"{name} is required, e.g. 'enter', 'tab', 'ctrl+c', 'alt+f4'"
        )
    if not isinstance(value, str):
        raise ArgumentError(
            "invalid_args", f"{name} must be a string like 'ctrl+c', got {value!r}"[:300]
        )
    actions.combo_names(value, key_names)
    return value.strip()


_RANGE = re.compile(r"^\s*(-?\d+)\s*(?:-|\.\.|to)\s*(-?\d+)\s*$")


def read_turns(args: Mapping[str, Any], name: str = "archived_turns") -> tuple[int, ...]:
    """Turn numbers to archive: a list of integers (numeric strings and ``"3-7"`` ranges
    accepted, since small models write them), or one such string (``"1, 2, 5-7"``).
    Order and duplicates are normalised; whether the turns exist is checked by the memory.
    """
    value = args.get(name)
    if value is None:
        raise ArgumentError(
            "invalid_args",
            f"{name} is required: the list of turn numbers to archive, e.g. [1, 2, 3]",
        )
    items: Sequence[Any]
    if isinstance(value, str):
        # "1, 2, 5 - 7" / "5 to 7": glue range operators to their numbers, then split.
        text = re.sub(r"\s*(-|\.\.|\bto\b)\s*(?=\d)", r"\1", value.strip("[]() "))
        items = [p for p in re.split(r"[,;\s]+", text) if p]
    elif isinstance(value, (list, tuple)):
        items = value
    elif isinstance(value, int) and not isinstance(value, bool):
        items = [value]
    else:
        raise ArgumentError(
            "invalid_args", f"{name} must be a list of turn numbers, got {type(value).__name__}"
        )
    turns: set[int] = set()
    for item in items:
        if isinstance(item, bool):
            raise ArgumentError("invalid_args", f"{name}: {item!r} is not a turn number")
        if isinstance(item, int):
            turns.add(item)
            continue
        if isinstance(item, float) and math.isfinite(item) and item.is_integer():
            turns.add(int(item))
            continue
        if isinstance(item, str):
            text = item.strip().removeprefix("Turn_").removeprefix("turn_").removeprefix("turn ")
            match = _RANGE.match(text)
            if match:
                low, high = sorted((int(match.group(1)), int(match.group(2))))
                if high - low > 10_000:
                    raise ArgumentError("invalid_args", f"{name}: range {item!r} is too large")
                turns.update(range(low, high + 1))
                continue
            if re.fullmatch(r"-?\d+", text):
                turns.add(int(text))
                continue
        raise ArgumentError("invalid_args", f"{name}: {item!r} is not a turn number"[:300])
    return tuple(sorted(turns))


# ---------------------------------------------------------------------- specs and parsing


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """One tool of a variant: its seed name, what it does, its schema and its parser."""

    name: str
    kind: Kind
    role: Role
    description: str
    parameters: dict[str, Any]
    parse: Callable[[Mapping[str, Any]], Any]

    def schema(self) -> dict[str, Any]:
        """The OpenAI function-tool definition."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }


@dataclass(frozen=True, slots=True)
class ParsedCall:
    """A tool call decoded into its variant's argument dataclass."""

    call: ToolCall
    spec: ToolSpec
    args: Any

    @property
    def kind(self) -> Kind:
        return self.spec.kind

    @property
    def name(self) -> str:
        return self.spec.name


def parse_call(
    call: ToolCall,
    specs: Mapping[str, ToolSpec],
    *,
    other_role: Mapping[str, ToolSpec] | None = None,
) -> ParsedCall:
    """Decode ``call`` with the tools in ``specs``; raises :class:`ArgumentError` with the seeds'
    error kinds. ``other_role`` (the other role's tools) makes the unknown-tool message say
    that the tool exists but belongs to the other role."""
    spec = specs.get(call.name)
    if spec is None:
        shown = call.name or "<empty>"
        available = ", ".join(specs)
        if other_role is not None and call.name in other_role:
            owner = other_role[call.name].role
            article = "an" if owner[0] in "aeiou" else "a"
            message = f"{shown!r} is {article} {owner} tool and cannot be used here; available: {available}"
        else:
            close = difflib.get_close_matches(call.name, list(specs), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            message = f"unknown tool {shown!r}{hint}; available: {available}"
        raise ArgumentError("unknown_tool", message)
    if call.error is not None:
        raise ArgumentError(call.error, call.error_message or call.error)
    if call.arguments is None:
        raise ArgumentError("invalid_args", "arguments must be a JSON object")
    return ParsedCall(call, spec, spec.parse(call.arguments))
