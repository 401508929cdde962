"""The two team variants as data: what the seeds 002 and 003 name, say and default to.

The team engine is one shape; a :class:`TeamVariant` holds everything that differs between
the seeds: the role and mode names, the tools' wording (names, argument names,
descriptions, order; :class:`~deskpilot.agent.modes.team._tool_specs.ToolWording`), the system
prompt files (``prompts/team_*.txt``) and the default numbers.

:data:`COMMANDER_OPERATOR` is seed 002 (a team leader briefs an operator specialist, who
reports in SITREPs); :data:`PLANNER_EXECUTOR` is seed 003 (a planner instructs an executor
who answers in a fixed structure). Run records keep the seed numbers as the variants' ids
(``"002"``, ``"003"``), and ``--variant`` accepts them, plus the seeds' role names:
``commander``, ``operator``, ``commander/operator``, ``team-leader``, ``sof`` for 002;
``planner``, ``executor``, ``planner/executor`` for 003.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field

from deskpilot._errors import ConfigError
from deskpilot.agent._prompts import SECURITY_NOTE, load_prompt
from deskpilot.agent.modes.team._common import Kind, Role, ToolSpec
from deskpilot.agent.modes.team._tool_specs import (
    ArgumentHelp,
    ArgumentNames,
    ToolWording,
    build_tools,
)

__all__ = ["COMMANDER_OPERATOR", "PLANNER_EXECUTOR", "VARIANTS", "TeamVariant", "resolve_variant"]


@dataclass(frozen=True, slots=True)
class TeamVariant:
    """Everything that differs between the seeds: names, tools, prompts and defaults."""

    #: The id run records keep and ``--variant`` accepts (the seed number).
    name: str
    title: str
    aliases: tuple[str, ...]
    planner_role: str
    executor_role: str
    planning_mode: str
    execution_mode: str
    wording: ToolWording
    #: The system prompt files (``prompts/<name>.txt``; ``{task}``, ``{review_interval}``,
    #: ``{threshold}`` and ``{security}`` are filled in by :meth:`system_prompt`).
    planner_prompt_file: str
    executor_prompt_file: str
    response_format: str
    review_interval: int
    compression_threshold: int
    max_steps: int
    planner_temperature: float
    planner_max_tokens: int
    executor_temperature: float
    executor_max_tokens: int
    #: How much of the plan text the context shows (002: 500, 003: 400 characters).
    plan_excerpt_chars: int
    #: The seeds' fixed sleeps, available as options (adaptive settle is the default).
    turn_delay_s: float = 1.5
    ui_settle_delay_s: float = 0.3
    loop_recovery_cooldown: int = 3
    min_evidence_chars: int = 100
    context_actions: int = 8
    #: Built from ``wording`` (never passed).
    planner_tools: tuple[ToolSpec, ...] = field(init=False, repr=False, compare=False)
    executor_tools: tuple[ToolSpec, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        planner, executor = build_tools(self.wording)
        object.__setattr__(self, "planner_tools", planner)  # frozen: set once, here
        object.__setattr__(self, "executor_tools", executor)

    @property
    def planner_prompt(self) -> str:
        return load_prompt(self.planner_prompt_file)

    @property
    def executor_prompt(self) -> str:
        return load_prompt(self.executor_prompt_file)

    def tools(self, role: Role) -> tuple[ToolSpec, ...]:
        return self.planner_tools if role == "planner" else self.executor_tools

    def specs(self, role: Role) -> dict[str, ToolSpec]:
        return {spec.name: spec for spec in self.tools(role)}

    def tool_name(self, kind: Kind) -> str:
        """This variant's name for a tool kind (``"click"`` -> ``click_screen_element``)."""
        return self.wording.names[kind]

    def role_name(self, role: Role) -> str:
        return self.planner_role if role == "planner" else self.executor_role

    def mode_name(self, role: Role) -> str:
        return self.planning_mode if role == "planner" else self.execution_mode

    def system_prompt(self, role: Role, *, task: str, review_interval: int, threshold: int) -> str:
        template = self.planner_prompt if role == "planner" else self.executor_prompt
        return template.format(
            task=task, review_interval=review_interval, threshold=threshold, security=SECURITY_NOTE
        )


# Descriptions both seeds share word for word.
_DRAG = "Press at start, move to end, release (drag and drop, sliders, selections)."
_KEY = (
    "Press a key or combo: enter, tab, escape, backspace, delete, space, arrows, home, end, "
    "pageup, pagedown, f1-f12, windows, or combos like ctrl+c, alt+f4, ctrl+shift+esc."
)
_SCROLL_DOWN = "Scroll down one wheel notch at the centre of the screen."
_SCROLL_UP = "Scroll up one wheel notch at the centre of the screen."


def _pointer_descriptions(element: str) -> dict[Kind, str]:
    return {
        "click": f"Left-click {element} at position [x, y] (0-1000 grid).",
        "double_click": f"Double-click {element} at position [x, y] (0-1000 grid).",
        "right_click": f"Right-click (context menu) {element} at position [x, y] (0-1000 grid).",
    }


COMMANDER_OPERATOR = TeamVariant(
    name="002",
    title="commander/operator (seed 002)",
    aliases=(
        "002",
        "2",
        "commander",
        "operator",
        "commander/operator",
        "commander-operator",
        "team-leader",
        "sof",
    ),
    planner_role="commander",
    executor_role="operator",
    planning_mode="EVALUATION",
    execution_mode="EXECUTION",
    wording=ToolWording(
        names={
            "plan": "spawn_operator",
            "archive": "compress_memory",
            "click": "click_element",
            "double_click": "double_click_element",
            "right_click": "right_click_element",
            "drag": "drag_element",
            "type": "type_text",
            "key": "press_key",
            "scroll_down": "scroll_down",
            "scroll_up": "scroll_up",
            "progress": "report_progress",
            "complete": "report_completion",
        },
        descriptions={
            "plan": "Brief the operator with ONE concrete objective and how to verify it on screen. "
            "Switches the team to EXECUTION mode.",
            "archive": "Archive completed turns into one semantic summary so the active history stays short.",
            **_pointer_descriptions("a UI element"),
            "drag": _DRAG,
            "type": "Type text into the focused field exactly as given. Click the field first.",
            "key": _KEY,
            "scroll_down": _SCROLL_DOWN,
            "scroll_up": _SCROLL_UP,
            "progress": "Report an objective's status to the team leader: DONE (milestone reached, with visible "
            "proof) or BLOCKED (after 2 failed attempts) hands control back to the leader.",
            "complete": "The WHOLE mission is complete. Evidence must describe, in at least 100 characters, what "
            "the screenshot shows that proves it; shorter evidence is refused.",
        },
        arguments=ArgumentNames(
            reason="justification",
            target="label",
            goal="objective_id",
            state="status",
            instructions="operator_instructions",
            rationale="rationale",
            summary="compression_summary",
            patterns="loop_analysis",
        ),
        help=ArgumentHelp(
            reason="Why this action, in one sentence (what you expect to happen).",
            goal="Which objective (as the brief names it).",
            instructions="The objective, the steps, and the visible definition of done (DOD).",
            rationale="Why this objective now (progress, blockers).",
            summary="What the archived turns achieved.",
            patterns="Repeated actions or loops seen, or 'none'.",
            archived_turns="Turn numbers from ACTIVE history to archive.",
        ),
        executor_order=(
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
        ),
        job="mission",
    ),
    planner_prompt_file="team_commander",
    executor_prompt_file="team_operator",
    response_format="SITREP (OBJ, DOD, OBS, ACT)",
    review_interval=5,
    compression_threshold=8,
    max_steps=30,
    planner_temperature=0.35,
    planner_max_tokens=1200,
    executor_temperature=0.5,
    executor_max_tokens=1024,
    plan_excerpt_chars=500,
)

PLANNER_EXECUTOR = TeamVariant(
    name="003",
    title="planner/executor (seed 003)",
    aliases=("003", "3", "planner", "executor", "planner/executor", "planner-executor"),
    planner_role="planner",
    executor_role="executor",
    planning_mode="PLANNING",
    execution_mode="EXECUTION",
    wording=ToolWording(
        names={
            "plan": "update_execution_plan",
            "archive": "archive_completed_actions",
            "click": "click_screen_element",
            "double_click": "double_click_screen_element",
            "right_click": "right_click_screen_element",
            "drag": "drag_screen_element",
            "type": "type_text_input",
            "key": "press_keyboard_key",
            "scroll_down": "scroll_screen_down",
            "scroll_up": "scroll_screen_up",
            "progress": "report_goal_status",
            "complete": "report_mission_complete",
        },
        descriptions={
            "plan": "Give the executor its next instructions (one goal, how to reach it, how to verify it "
            "on screen). Switches to EXECUTION mode.",
            "archive": "Compress memory: archive completed actions into one summary so RECENT_ACTIONS stays short.",
            **_pointer_descriptions("the screen element"),
            "drag": _DRAG,
            "type": "Type text into the focused input exactly as given (any Unicode). Click the field first.",
            "key": _KEY,
            "scroll_down": _SCROLL_DOWN,
            "scroll_up": _SCROLL_UP,
            "progress": "Report the status of the current goal: DONE (success criteria visible) or BLOCKED "
            "(two consecutive failures) hands control back to the planner.",
            "complete": "The WHOLE task is complete. Evidence must describe, in at least 100 characters, what the "
            "screenshot shows that proves it; shorter evidence is refused.",
        },
        arguments=ArgumentNames(
            reason="reasoning",
            target="element_name",
            goal="goal_identifier",
            state="completion_status",
            instructions="instructions",
            rationale="reasoning",
            summary="summary",
            patterns="patterns_detected",
        ),
        help=ArgumentHelp(
            reason="Why this action: what you saw and what you expect to happen.",
            goal="Which goal (as the instructions name it).",
            instructions="The goal, the concrete steps and the visible success criteria.",
            rationale="Why this plan (progress so far, failures).",
            summary="What the archived actions achieved.",
            patterns="Repeated actions, loops or failure patterns, or 'none'.",
            archived_turns="Turn numbers from RECENT_ACTIONS to archive.",
        ),
        executor_order=(
            "complete",
            "progress",
            "click",
            "double_click",
            "right_click",
            "drag",
            "type",
            "key",
            "scroll_down",
            "scroll_up",
        ),
        job="task",
    ),
    planner_prompt_file="team_planner",
    executor_prompt_file="team_executor",
    response_format="LAST_ACTION_RESULT / CURRENT_GOAL / SUCCESS_CRITERIA / SCREEN_SHOWS / NEXT_STEP",
    review_interval=7,
    compression_threshold=12,
    max_steps=50,
    planner_temperature=0.35,
    planner_max_tokens=1800,
    executor_temperature=0.5,
    executor_max_tokens=1400,
    plan_excerpt_chars=400,
)

VARIANTS: Mapping[str, TeamVariant] = {
    variant.name: variant for variant in (COMMANDER_OPERATOR, PLANNER_EXECUTOR)
}

_ALIASES = {alias: variant for variant in VARIANTS.values() for alias in variant.aliases}


def resolve_variant(name: str | TeamVariant) -> TeamVariant:
    """The variant for a seed number or role name (case and spaces ignored)."""
    if isinstance(name, TeamVariant):
        return name
    key = "".join(str(name).split()).lower().replace("_", "-").replace("+", "/")
    variant = _ALIASES.get(key)
    if variant is not None:
        return variant
    close = difflib.get_close_matches(key, list(_ALIASES), n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise ConfigError(
        f"unknown team variant {name!r}{hint}; use 002 (commander/operator) or 003 (planner/executor)",
        variant=str(name),
    )
