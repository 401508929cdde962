"""Seed 002: the commander/operator variant (team leader + operator specialist).

Names, arguments and defaults as the seed lists them: the commander (text only) has
``spawn_operator`` and ``compress_memory``; the operator (sees the screen) has ten tools
and reports in the SITREP format (OBJ, DOD, OBS, ACT). Review every 5 turns, compress
at 8 active actions, 30 steps, commander 0.35 / 1200 tokens, operator 0.5 / 1024.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from deskpilot.agent._prompts import load_prompt
from deskpilot.agent.team._common import (
    Coordinate,
    ToolSpec,
    read_coordinate,
    read_key,
    read_optional_text,
    read_required_text,
    read_text_to_type,
    read_turns,
)

__all__ = [
    "ClickArgs",
    "CompressMemoryArgs",
    "DragArgs",
    "PressKeyArgs",
    "ReportCompletionArgs",
    "ReportProgressArgs",
    "ScrollArgs",
    "SpawnOperatorArgs",
    "TypeTextArgs",
]


@dataclass(frozen=True, slots=True)
class ClickArgs:
    justification: str
    label: str
    position: Coordinate

    @property
    def reason(self) -> str:
        return self.justification

    @property
    def target(self) -> str:
        return self.label


@dataclass(frozen=True, slots=True)
class DragArgs:
    justification: str
    label: str
    start: Coordinate
    end: Coordinate

    @property
    def reason(self) -> str:
        return self.justification

    @property
    def target(self) -> str:
        return self.label


@dataclass(frozen=True, slots=True)
class TypeTextArgs:
    justification: str
    text: str

    @property
    def reason(self) -> str:
        return self.justification


@dataclass(frozen=True, slots=True)
class PressKeyArgs:
    justification: str
    key: str

    @property
    def reason(self) -> str:
        return self.justification


@dataclass(frozen=True, slots=True)
class ScrollArgs:
    justification: str

    @property
    def reason(self) -> str:
        return self.justification


@dataclass(frozen=True, slots=True)
class ReportCompletionArgs:
    evidence: str


@dataclass(frozen=True, slots=True)
class ReportProgressArgs:
    objective_id: str
    status: str
    evidence: str

    @property
    def goal(self) -> str:
        return self.objective_id

    @property
    def state(self) -> str:
        return self.status


@dataclass(frozen=True, slots=True)
class CompressMemoryArgs:
    compression_summary: str
    loop_analysis: str
    archived_turns: tuple[int, ...]

    @property
    def summary(self) -> str:
        return self.compression_summary

    @property
    def patterns(self) -> str:
        return self.loop_analysis


@dataclass(frozen=True, slots=True)
class SpawnOperatorArgs:
    operator_instructions: str
    rationale: str

    @property
    def instructions(self) -> str:
        return self.operator_instructions


# ---------------------------------------------------------------------- parsers


def _label(args: Mapping[str, Any]) -> str:
    return read_required_text(
        args, "label", missing="missing_label", hint="name the element, e.g. 'Save button'"
    )


def _click(args: Mapping[str, Any]) -> ClickArgs:
    return ClickArgs(
        read_optional_text(args, "justification"), _label(args), read_coordinate(args, "position")
    )


def _drag(args: Mapping[str, Any]) -> DragArgs:
    return DragArgs(
        read_optional_text(args, "justification"),
        _label(args),
        read_coordinate(args, "start"),
        read_coordinate(args, "end"),
    )


def _type(args: Mapping[str, Any]) -> TypeTextArgs:
    return TypeTextArgs(read_optional_text(args, "justification"), read_text_to_type(args))


def _key(args: Mapping[str, Any]) -> PressKeyArgs:
    return PressKeyArgs(read_optional_text(args, "justification"), read_key(args))


def _scroll(args: Mapping[str, Any]) -> ScrollArgs:
    return ScrollArgs(read_optional_text(args, "justification"))


def _complete(args: Mapping[str, Any]) -> ReportCompletionArgs:
    return ReportCompletionArgs(
        read_required_text(
            args, "evidence", hint="describe what on screen proves the mission is done"
        )
    )


def _progress(args: Mapping[str, Any]) -> ReportProgressArgs:
    return ReportProgressArgs(
        read_required_text(args, "objective_id"),
        read_required_text(args, "status", hint="IN_PROGRESS, DONE or BLOCKED")
        .upper()
        .replace(" ", "_"),
        read_required_text(args, "evidence"),
    )


def _compress(args: Mapping[str, Any]) -> CompressMemoryArgs:
    return CompressMemoryArgs(
        read_required_text(args, "compression_summary"),
        read_optional_text(args, "loop_analysis"),
        read_turns(args),
    )


def _spawn(args: Mapping[str, Any]) -> SpawnOperatorArgs:
    return SpawnOperatorArgs(
        read_required_text(args, "operator_instructions"), read_optional_text(args, "rationale")
    )


# ---------------------------------------------------------------------- schemas

_JUSTIFICATION = {
    "type": "string",
    "description": "Why this action, in one sentence (what you expect to happen).",
}
_POINT = {
    "type": "array",
    "items": {"type": "integer", "minimum": 0, "maximum": 1000},
    "minItems": 2,
    "maxItems": 2,
    "description": "[x, y] on the 0-1000 grid of the screenshot (0,0 top-left; 1000,1000 bottom-right).",
}
_LABEL = {"type": "string", "description": "Visible name of the UI element, e.g. 'Save button'."}


def _obj(props: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": required}


def _click_spec(name: str, kind: Any, verb: str) -> ToolSpec:
    return ToolSpec(
        name,
        kind,
        "executor",
        f"{verb} a UI element at position [x, y] (0-1000 grid).",
        _obj(
            {"justification": _JUSTIFICATION, "label": _LABEL, "position": _POINT},
            ["justification", "label", "position"],
        ),
        _click,
    )


PLANNER_TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "spawn_operator",
        "plan",
        "planner",
        "Brief the operator with ONE concrete objective and how to verify it on screen. "
        "Switches the team to EXECUTION mode.",
        _obj(
            {
                "operator_instructions": {
                    "type": "string",
                    "description": "The objective, the steps, and the visible definition of done (DOD).",
                },
                "rationale": {
                    "type": "string",
                    "description": "Why this objective now (progress, blockers).",
                },
            },
            ["operator_instructions", "rationale"],
        ),
        _spawn,
    ),
    ToolSpec(
        "compress_memory",
        "archive",
        "planner",
        "Archive completed turns into one semantic summary so the active history stays short.",
        _obj(
            {
                "compression_summary": {
                    "type": "string",
                    "description": "What the archived turns achieved.",
                },
                "loop_analysis": {
                    "type": "string",
                    "description": "Repeated actions or loops seen, or 'none'.",
                },
                "archived_turns": {
                    "type": "array",
                    "items": {"type": "integer"},
                    "description": "Turn numbers from ACTIVE history to archive.",
                },
            },
            ["compression_summary", "loop_analysis", "archived_turns"],
        ),
        _compress,
    ),
)

EXECUTOR_TOOLS: tuple[ToolSpec, ...] = (
    _click_spec("click_element", "click", "Left-click"),
    _click_spec("double_click_element", "double_click", "Double-click"),
    _click_spec("right_click_element", "right_click", "Right-click (context menu)"),
    ToolSpec(
        "drag_element",
        "drag",
        "executor",
        "Press at start, move to end, release (drag and drop, sliders, selections).",
        _obj(
            {"justification": _JUSTIFICATION, "label": _LABEL, "start": _POINT, "end": _POINT},
            ["justification", "label", "start", "end"],
        ),
        _drag,
    ),
    ToolSpec(
        "type_text",
        "type",
        "executor",
        "Type text into the focused field exactly as given. Click the field first.",
        _obj(
            {"justification": _JUSTIFICATION, "text": {"type": "string"}}, ["justification", "text"]
        ),
        _type,
    ),
    ToolSpec(
        "press_key",
        "key",
        "executor",
        "Press a key or combo: enter, tab, escape, backspace, delete, space, arrows, home, end, "
        "pageup, pagedown, f1-f12, windows, or combos like ctrl+c, alt+f4, ctrl+shift+esc.",
        _obj(
            {"justification": _JUSTIFICATION, "key": {"type": "string"}}, ["justification", "key"]
        ),
        _key,
    ),
    ToolSpec(
        "scroll_down",
        "scroll_down",
        "executor",
        "Scroll down one wheel notch at the centre of the screen.",
        _obj({"justification": _JUSTIFICATION}, ["justification"]),
        _scroll,
    ),
    ToolSpec(
        "scroll_up",
        "scroll_up",
        "executor",
        "Scroll up one wheel notch at the centre of the screen.",
        _obj({"justification": _JUSTIFICATION}, ["justification"]),
        _scroll,
    ),
    ToolSpec(
        "report_progress",
        "progress",
        "executor",
        "Report an objective's status to the team leader: DONE (milestone reached, with visible "
        "proof) or BLOCKED (after 2 failed attempts) hands control back to the leader.",
        _obj(
            {
                "objective_id": {
                    "type": "string",
                    "description": "Which objective (as the brief names it).",
                },
                "status": {"type": "string", "enum": ["IN_PROGRESS", "DONE", "BLOCKED"]},
                "evidence": {
                    "type": "string",
                    "description": "What the screenshot shows that proves the status.",
                },
            },
            ["objective_id", "status", "evidence"],
        ),
        _progress,
    ),
    ToolSpec(
        "report_completion",
        "complete",
        "executor",
        "The WHOLE mission is complete. Evidence must describe, in at least 100 characters, what "
        "the screenshot shows that proves it; shorter evidence is refused.",
        _obj({"evidence": {"type": "string", "minLength": 100}}, ["evidence"]),
        _complete,
    ),
)

# ---------------------------------------------------------------------- prompts

PLANNER_PROMPT = load_prompt("team_commander")
EXECUTOR_PROMPT = load_prompt("team_operator")
