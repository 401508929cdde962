"""Seed 003: the planner/executor variant.

Names, arguments and defaults as the seed lists them: the planner (text only) has
``update_execution_plan`` and ``archive_completed_actions``; the executor (sees the
screen) has ten tools and answers in the structured format (LAST_ACTION_RESULT,
CURRENT_GOAL, SUCCESS_CRITERIA, SCREEN_SHOWS, NEXT_STEP). Review every 7 turns, compress
at 12 active actions, 50 steps, planner 0.35 / 1800 tokens, executor 0.5 / 1400.
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
    "ArchiveHistoryArgs",
    "ClickArgs",
    "DragArgs",
    "PressKeyArgs",
    "ReportCompletionArgs",
    "ReportProgressArgs",
    "ScrollArgs",
    "TypeTextArgs",
    "UpdatePlanArgs",
]


@dataclass(frozen=True, slots=True)
class ClickArgs:
    reasoning: str
    element_name: str
    position: Coordinate

    @property
    def reason(self) -> str:
        return self.reasoning

    @property
    def target(self) -> str:
        return self.element_name


@dataclass(frozen=True, slots=True)
class DragArgs:
    reasoning: str
    element_name: str
    start: Coordinate
    end: Coordinate

    @property
    def reason(self) -> str:
        return self.reasoning

    @property
    def target(self) -> str:
        return self.element_name


@dataclass(frozen=True, slots=True)
class TypeTextArgs:
    reasoning: str
    text: str

    @property
    def reason(self) -> str:
        return self.reasoning


@dataclass(frozen=True, slots=True)
class PressKeyArgs:
    reasoning: str
    key: str

    @property
    def reason(self) -> str:
        return self.reasoning


@dataclass(frozen=True, slots=True)
class ScrollArgs:
    reasoning: str

    @property
    def reason(self) -> str:
        return self.reasoning


@dataclass(frozen=True, slots=True)
class ReportCompletionArgs:
    evidence: str


@dataclass(frozen=True, slots=True)
class ReportProgressArgs:
    goal_identifier: str
    completion_status: str
    evidence: str

    @property
    def goal(self) -> str:
        return self.goal_identifier

    @property
    def state(self) -> str:
        return self.completion_status


@dataclass(frozen=True, slots=True)
class ArchiveHistoryArgs:
    summary: str
    patterns_detected: str
    archived_turns: tuple[int, ...]

    @property
    def patterns(self) -> str:
        return self.patterns_detected


@dataclass(frozen=True, slots=True)
class UpdatePlanArgs:
    instructions: str
    reasoning: str

    @property
    def rationale(self) -> str:
        return self.reasoning


# ---------------------------------------------------------------------- parsers


def _element(args: Mapping[str, Any]) -> str:
    return read_required_text(
        args, "element_name", missing="missing_label", hint="name the element, e.g. 'Save button'"
    )


def _click(args: Mapping[str, Any]) -> ClickArgs:
    return ClickArgs(
        read_optional_text(args, "reasoning"), _element(args), read_coordinate(args, "position")
    )


def _drag(args: Mapping[str, Any]) -> DragArgs:
    return DragArgs(
        read_optional_text(args, "reasoning"),
        _element(args),
        read_coordinate(args, "start"),
        read_coordinate(args, "end"),
    )


def _type(args: Mapping[str, Any]) -> TypeTextArgs:
    return TypeTextArgs(read_optional_text(args, "reasoning"), read_text_to_type(args))


def _key(args: Mapping[str, Any]) -> PressKeyArgs:
    return PressKeyArgs(read_optional_text(args, "reasoning"), read_key(args))


def _scroll(args: Mapping[str, Any]) -> ScrollArgs:
    return ScrollArgs(read_optional_text(args, "reasoning"))


def _complete(args: Mapping[str, Any]) -> ReportCompletionArgs:
    return ReportCompletionArgs(
        read_required_text(args, "evidence", hint="describe what on screen proves the task is done")
    )


def _progress(args: Mapping[str, Any]) -> ReportProgressArgs:
    return ReportProgressArgs(
        read_required_text(args, "goal_identifier"),
        read_required_text(args, "completion_status", hint="IN_PROGRESS, DONE or BLOCKED")
        .upper()
        .replace(" ", "_"),
        read_required_text(args, "evidence"),
    )


def _archive(args: Mapping[str, Any]) -> ArchiveHistoryArgs:
    return ArchiveHistoryArgs(
        read_required_text(args, "summary"),
        read_optional_text(args, "patterns_detected"),
        read_turns(args),
    )


def _update(args: Mapping[str, Any]) -> UpdatePlanArgs:
    return UpdatePlanArgs(
        read_required_text(args, "instructions"), read_optional_text(args, "reasoning")
    )


# ---------------------------------------------------------------------- schemas

_REASONING = {
    "type": "string",
    "description": "Why this action: what you saw and what you expect to happen.",
}
_POINT = {
    "type": "array",
    "items": {"type": "integer", "minimum": 0, "maximum": 1000},
    "minItems": 2,
    "maxItems": 2,
    "description": "[x, y] on the 0-1000 grid of the screenshot (0,0 top-left; 1000,1000 bottom-right).",
}
_ELEMENT = {"type": "string", "description": "Visible name of the UI element, e.g. 'Save button'."}


def _obj(props: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": required}


def _click_spec(name: str, kind: Any, verb: str) -> ToolSpec:
    return ToolSpec(
        name,
        kind,
        "executor",
        f"{verb} the screen element at position [x, y] (0-1000 grid).",
        _obj(
            {"reasoning": _REASONING, "element_name": _ELEMENT, "position": _POINT},
            ["reasoning", "element_name", "position"],
        ),
        _click,
    )


PLANNER_TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "update_execution_plan",
        "plan",
        "planner",
        "Give the executor its next instructions (one goal, how to reach it, how to verify it "
        "on screen). Switches to EXECUTION mode.",
        _obj(
            {
                "instructions": {
                    "type": "string",
                    "description": "The goal, the concrete steps and the visible success criteria.",
                },
                "reasoning": {
                    "type": "string",
                    "description": "Why this plan (progress so far, failures).",
                },
            },
            ["instructions", "reasoning"],
        ),
        _update,
    ),
    ToolSpec(
        "archive_completed_actions",
        "archive",
        "planner",
        "Compress memory: archive completed actions into one summary so RECENT_ACTIONS stays short.",
        _obj(
            {
                "summary": {"type": "string", "description": "What the archived actions achieved."},
                "patterns_detected": {
                    "type": "string",
                    "description": "Repeated actions, loops or failure patterns, or 'none'.",
                },
                "archived_turns": {
                    "type": "array",
                    "items": {"type": "integer"},
                    "description": "Turn numbers from RECENT_ACTIONS to archive.",
                },
            },
            ["summary", "patterns_detected", "archived_turns"],
        ),
        _archive,
    ),
)

EXECUTOR_TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "report_mission_complete",
        "complete",
        "executor",
        "The WHOLE task is complete. Evidence must describe, in at least 100 characters, what the "
        "screenshot shows that proves it; shorter evidence is refused.",
        _obj({"evidence": {"type": "string", "minLength": 100}}, ["evidence"]),
        _complete,
    ),
    ToolSpec(
        "report_goal_status",
        "progress",
        "executor",
        "Report the status of the current goal: DONE (success criteria visible) or BLOCKED "
        "(two consecutive failures) hands control back to the planner.",
        _obj(
            {
                "goal_identifier": {
                    "type": "string",
                    "description": "Which goal (as the instructions name it).",
                },
                "completion_status": {"type": "string", "enum": ["IN_PROGRESS", "DONE", "BLOCKED"]},
                "evidence": {
                    "type": "string",
                    "description": "What the screenshot shows that proves the status.",
                },
            },
            ["goal_identifier", "completion_status", "evidence"],
        ),
        _progress,
    ),
    _click_spec("click_screen_element", "click", "Left-click"),
    _click_spec("double_click_screen_element", "double_click", "Double-click"),
    _click_spec("right_click_screen_element", "right_click", "Right-click (context menu)"),
    ToolSpec(
        "drag_screen_element",
        "drag",
        "executor",
        "Press at start, move to end, release (drag and drop, sliders, selections).",
        _obj(
            {"reasoning": _REASONING, "element_name": _ELEMENT, "start": _POINT, "end": _POINT},
            ["reasoning", "element_name", "start", "end"],
        ),
        _drag,
    ),
    ToolSpec(
        "type_text_input",
        "type",
        "executor",
        "Type text into the focused input exactly as given (any Unicode). Click the field first.",
        _obj({"reasoning": _REASONING, "text": {"type": "string"}}, ["reasoning", "text"]),
        _type,
    ),
    ToolSpec(
        "press_keyboard_key",
        "key",
        "executor",
        "Press a key or combo: enter, tab, escape, backspace, delete, space, arrows, home, end, "
        "pageup, pagedown, f1-f12, windows, or combos like ctrl+c, alt+f4, ctrl+shift+esc.",
        _obj({"reasoning": _REASONING, "key": {"type": "string"}}, ["reasoning", "key"]),
        _key,
    ),
    ToolSpec(
        "scroll_screen_down",
        "scroll_down",
        "executor",
        "Scroll down one wheel notch at the centre of the screen.",
        _obj({"reasoning": _REASONING}, ["reasoning"]),
        _scroll,
    ),
    ToolSpec(
        "scroll_screen_up",
        "scroll_up",
        "executor",
        "Scroll up one wheel notch at the centre of the screen.",
        _obj({"reasoning": _REASONING}, ["reasoning"]),
        _scroll,
    ),
)

# ---------------------------------------------------------------------- prompts

PLANNER_PROMPT = load_prompt("team_planner")
EXECUTOR_PROMPT = load_prompt("team_executor")
