"""A team variant's tools (schemas and parsers) built from its wording.

Both variants have the same twelve tools (two for the planner, ten for the executor) with
the same arguments; they differ only in words: the tool names, the JSON names of the
arguments (``justification`` or ``reasoning``, ``label`` or ``element_name``, ...), the
descriptions the model reads and the order the executor's tools are listed in. A
:class:`ToolWording` holds those words; :func:`build_tools` turns it into
:class:`~deskpilot.agent.modes.team._common.ToolSpec` tuples whose parsers return the shared
argument dataclasses of :mod:`~deskpilot.agent.modes.team._common`.

The schemas are request bytes: the golden runs compare them byte for byte, so the key
order of every dict below is part of the format.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from deskpilot.agent.modes.team._common import (
    EXECUTOR_KINDS,
    PLANNER_KINDS,
    ArchiveArgs,
    CompletionArgs,
    DragArgs,
    KeyArgs,
    Kind,
    PlanArgs,
    PointerArgs,
    ProgressArgs,
    Role,
    ScrollArgs,
    TextArgs,
    ToolSpec,
    read_coordinate,
    read_key,
    read_optional_text,
    read_required_text,
    read_text_to_type,
    read_turns,
)

__all__ = ["ArgumentHelp", "ArgumentNames", "ToolWording", "build_tools"]

Parser = Callable[[Mapping[str, Any]], Any]


@dataclass(frozen=True, slots=True)
class ArgumentNames:
    """The JSON names a variant gives the arguments that vary between the variants."""

    reason: str
    target: str
    goal: str
    state: str
    instructions: str
    rationale: str
    summary: str
    patterns: str


@dataclass(frozen=True, slots=True)
class ArgumentHelp:
    """The schema descriptions of those arguments (what the model is told to put there)."""

    reason: str
    goal: str
    instructions: str
    rationale: str
    summary: str
    patterns: str
    archived_turns: str


@dataclass(frozen=True, slots=True)
class ToolWording:
    """Every word a variant uses for its tools."""

    #: The tool's name for each kind (``"click"`` -> ``"click_element"``).
    names: Mapping[Kind, str]
    #: The tool descriptions, per kind.
    descriptions: Mapping[Kind, str]
    arguments: ArgumentNames
    help: ArgumentHelp
    #: The order the executor's tools are listed in (the request's ``tools`` array).
    executor_order: tuple[Kind, ...]
    #: What the variant calls the whole job in the completion hint ("mission", "task").
    job: str

    def __post_init__(self) -> None:
        kinds = (*PLANNER_KINDS, *EXECUTOR_KINDS)
        if set(self.names) != set(kinds) or set(self.descriptions) != set(kinds):
            raise ValueError("a tool wording names and describes every tool kind")
        if sorted(self.executor_order) != sorted(EXECUTOR_KINDS):
            raise ValueError(f"executor_order must list each of {EXECUTOR_KINDS} once")


# ---------------------------------------------------------------------- schema pieces

_POINT = {
    "type": "array",
    "items": {"type": "integer", "minimum": 0, "maximum": 1000},
    "minItems": 2,
    "maxItems": 2,
    "description": "[x, y] on the 0-1000 grid of the screenshot (0,0 top-left; 1000,1000 bottom-right).",
}
_TARGET_HELP = "Visible name of the UI element, e.g. 'Save button'."
_STATUS_EVIDENCE_HELP = "What the screenshot shows that proves the status."
_STATUSES = ["IN_PROGRESS", "DONE", "BLOCKED"]


def _text(description: str) -> dict[str, Any]:
    return {"type": "string", "description": description}


def _obj(props: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": required}


def _schemas(w: ToolWording) -> dict[Kind, dict[str, Any]]:
    n, h = w.arguments, w.help
    reason = _text(h.reason)
    target = _text(_TARGET_HELP)

    # A fresh dict per tool: each ToolSpec owns its schema.
    def pointer() -> dict[str, Any]:
        return _obj(
            {n.reason: reason, n.target: target, "position": _POINT},
            [n.reason, n.target, "position"],
        )

    def scroll() -> dict[str, Any]:
        return _obj({n.reason: reason}, [n.reason])

    return {
        "plan": _obj(
            {n.instructions: _text(h.instructions), n.rationale: _text(h.rationale)},
            [n.instructions, n.rationale],
        ),
        "archive": _obj(
            {
                n.summary: _text(h.summary),
                n.patterns: _text(h.patterns),
                "archived_turns": {
                    "type": "array",
                    "items": {"type": "integer"},
                    "description": h.archived_turns,
                },
            },
            [n.summary, n.patterns, "archived_turns"],
        ),
        "click": pointer(),
        "double_click": pointer(),
        "right_click": pointer(),
        "drag": _obj(
            {n.reason: reason, n.target: target, "start": _POINT, "end": _POINT},
            [n.reason, n.target, "start", "end"],
        ),
        "type": _obj({n.reason: reason, "text": {"type": "string"}}, [n.reason, "text"]),
        "key": _obj({n.reason: reason, "key": {"type": "string"}}, [n.reason, "key"]),
        "scroll_down": scroll(),
        "scroll_up": scroll(),
        "progress": _obj(
            {
                n.goal: _text(h.goal),
                n.state: {"type": "string", "enum": _STATUSES},
                "evidence": _text(_STATUS_EVIDENCE_HELP),
            },
            [n.goal, n.state, "evidence"],
        ),
        "complete": _obj({"evidence": {"type": "string", "minLength": 100}}, ["evidence"]),
    }


# ---------------------------------------------------------------------- parsers


def _parsers(w: ToolWording) -> dict[Kind, Parser]:
    n = w.arguments

    def reason(args: Mapping[str, Any]) -> str:
        return read_optional_text(args, n.reason)

    def target(args: Mapping[str, Any]) -> str:
        return read_required_text(
            args, n.target, missing="missing_label", hint="name the element, e.g. 'Save button'"
        )

    def pointer(args: Mapping[str, Any]) -> PointerArgs:
        return PointerArgs(reason(args), target(args), read_coordinate(args, "position"))

    def drag(args: Mapping[str, Any]) -> DragArgs:
        return DragArgs(
            reason(args),
            target(args),
            read_coordinate(args, "start"),
            read_coordinate(args, "end"),
        )

    def scroll(args: Mapping[str, Any]) -> ScrollArgs:
        return ScrollArgs(reason(args))

    def progress(args: Mapping[str, Any]) -> ProgressArgs:
        return ProgressArgs(
            read_required_text(args, n.goal),
            read_required_text(args, n.state, hint="IN_PROGRESS, DONE or BLOCKED")
            .upper()
            .replace(" ", "_"),
            read_required_text(args, "evidence"),
        )

    def complete(args: Mapping[str, Any]) -> CompletionArgs:
        hint = f"describe what on screen proves the {w.job} is done"
        return CompletionArgs(read_required_text(args, "evidence", hint=hint))

    def plan(args: Mapping[str, Any]) -> PlanArgs:
        return PlanArgs(read_required_text(args, n.instructions), read_optional_text(args, n.rationale))

    def archive(args: Mapping[str, Any]) -> ArchiveArgs:
        return ArchiveArgs(
            read_required_text(args, n.summary), read_optional_text(args, n.patterns), read_turns(args)
        )

    return {
        "plan": plan,
        "archive": archive,
        "click": pointer,
        "double_click": pointer,
        "right_click": pointer,
        "drag": drag,
        "type": lambda args: TextArgs(reason(args), read_text_to_type(args)),
        "key": lambda args: KeyArgs(reason(args), read_key(args)),
        "scroll_down": scroll,
        "scroll_up": scroll,
        "progress": progress,
        "complete": complete,
    }


def build_tools(wording: ToolWording) -> tuple[tuple[ToolSpec, ...], tuple[ToolSpec, ...]]:
    """The planner's and the executor's tools, in the variant's order."""
    schemas, parsers = _schemas(wording), _parsers(wording)

    def spec(kind: Kind, role: Role) -> ToolSpec:
        return ToolSpec(
            wording.names[kind], kind, role, wording.descriptions[kind], schemas[kind], parsers[kind]
        )

    planner = tuple(spec(kind, "planner") for kind in PLANNER_KINDS)
    executor = tuple(spec(kind, "executor") for kind in wording.executor_order)
    return planner, executor
