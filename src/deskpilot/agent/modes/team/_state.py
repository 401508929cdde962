"""The team's state and its mode switches, exactly the seeds' rules.

Two modes: planning (seed 002 calls it EVALUATION, 003 PLANNING; text only) and
EXECUTION (the executor sees the screen). The run starts in planning. At the start of
every execution turn the team switches back to planning when

* the turn number is a multiple of the review interval (5 / 7),
* the executor reported a goal DONE or BLOCKED (``needs_review``),
* the active history reached the compression threshold (8 / 12),
* (deskpilot) a loop was detected, or there are no instructions to execute.

The planner returns to execution by giving instructions. Unlike the seeds, a switch
does not cost a turn: the seeds capture a screenshot, notice the switch and ``continue``
(the planner runs on the next turn); here the planner runs in the turn that noticed it,
so every turn is one model request and no capture is wasted.

The context both roles get is rebuilt every turn (the API is stateless, the seeds
say): task, plan excerpt, mode, turn and the memory, then what the role needs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from deskpilot.agent.modes.team._common import (
    DragArgs,
    KeyArgs,
    PointerArgs,
    ProgressArgs,
    Role,
    ScrollArgs,
    TextArgs,
)
from deskpilot.agent.modes.team._memory import AgentMemory, MemoryEntry, clip
from deskpilot.agent.modes.team._variants import TeamVariant

__all__ = ["REASONS", "Switch", "TeamState", "describe_action"]

#: Why the planner is called (recorded in logs and shown to the planner).
REASONS = {
    "initial_plan": "turn 1: analyse the task and create the initial plan",
    "review_interval": "scheduled review",
    "goal_done": "the executor reported a goal DONE",
    "goal_blocked": "the executor reported a goal BLOCKED",
    "compression": "ACTIVE history reached the compression threshold",
    "loop_detected": "the executor repeated the same action without visible effect",
    "no_instructions": "the executor has no instructions",
    "no_plan_yet": "no usable plan yet",
}


@dataclass(frozen=True, slots=True)
class Switch:
    """The role of a turn and, when the mode changed, why."""

    role: Role
    reasons: tuple[str, ...] = ()

    @property
    def switched(self) -> bool:
        return bool(self.reasons)


@dataclass(slots=True)
class TeamState:
    """The seeds' ``AgentState`` (screenshot and screen size live in the session)."""

    task: str
    variant: TeamVariant
    review_interval: int
    memory: AgentMemory
    turn: int = 0
    mode: Role = "planner"
    plan: str = ""
    execution_instructions: str = ""
    needs_review: bool = False
    #: Why a review was requested (goal_done / goal_blocked / loop_detected).
    review_causes: list[str] = field(default_factory=list)
    #: Why the planner is being called now (set by :meth:`begin_turn`).
    planning_reasons: tuple[str, ...] = ("initial_plan",)
    #: Consecutive planner answers that gave no usable plan while none existed.
    planner_failures: int = 0
    #: One-off notes for the next prompt of each role (refused calls, engine actions).
    notes: dict[str, list[str]] = field(default_factory=lambda: {"planner": [], "executor": []})
    #: The last report_progress / report_goal_status (goal, status, evidence).
    last_report: tuple[str, str, str] | None = None

    @property
    def mode_name(self) -> str:
        return self.variant.mode_name(self.mode)

    def increment_turn(self) -> int:
        self.turn += 1
        return self.turn

    def request_review(self, cause: str) -> None:
        self.needs_review = True
        if cause not in self.review_causes:
            self.review_causes.append(cause)

    def begin_turn(self, turn: int) -> Switch:
        """Set the turn number and decide who acts in it (see the module docstring)."""
        self.turn = turn
        if self.mode == "planner":
            return Switch("planner")
        reasons: list[str] = []
        if not self.execution_instructions:
            reasons.append("no_instructions")
        if self.review_interval > 0 and turn % self.review_interval == 0:
            reasons.append("review_interval")
        if self.needs_review:
            reasons.extend(self.review_causes or ["review_interval"])
        if self.memory.needs_compression:
            reasons.append("compression")
        if not reasons:
            return Switch("executor")
        self.mode = "planner"
        self.needs_review = False
        self.review_causes = []
        self.planning_reasons = tuple(dict.fromkeys(reasons))
        return Switch("planner", self.planning_reasons)

    def set_plan(self, instructions: str, plan_text: str) -> Switch:
        """The planner gave instructions: store them and switch to execution."""
        self.execution_instructions = instructions
        self.plan = plan_text or instructions
        self.planner_failures = 0
        self.mode = "executor"
        return Switch("executor", ("instructions_received",))

    def keep_plan(self) -> Switch | None:
        """The planner gave no new instructions: go back to the current ones if there
        are any (a review with nothing to change); else stay in planning."""
        if self.execution_instructions:
            self.mode = "executor"
            return Switch("executor", ("current_instructions_kept",))
        self.planner_failures += 1
        self.planning_reasons = ("no_plan_yet",)
        return None

    def note(self, role: Role, text: str) -> None:
        self.notes[role].append(text)

    def take_notes(self, role: Role) -> list[str]:
        notes, self.notes[role] = self.notes[role], []
        return notes

    # ------------------------------------------------------------------ context

    def get_context(self) -> str:
        """Seed 003's ``AgentState.get_context()``."""
        limit = self.variant.plan_excerpt_chars
        plan = self.plan.strip() or "(no plan yet)"
        excerpt = plan if len(plan) <= limit else plan[:limit] + "..."
        return (
            f"TASK: {self.task}\n\n"
            f"CURRENT_PLAN:\n{excerpt}\n\n"
            f"OPERATING_MODE: {self.mode_name}\n\n"
            f"CURRENT_TURN: {self.turn}\n\n"
            f"{self.memory.get_context_for_llm()}"
        )

    def planner_context(self) -> str:
        """The planner's user message: the shared context, why it is called, what to do."""
        v = self.variant
        plan_tool, archive_tool = v.tool_name("plan"), v.tool_name("archive")
        parts = [self.get_context(), ""]
        parts.append("CURRENT_INSTRUCTIONS:\n" + (self.execution_instructions or "(none yet)"))
        if self.last_report is not None:
            goal, status, evidence = self.last_report
            parts.append(
                f"\nLAST_REPORT: goal {goal!r} -> {status}\n  Evidence: {clip(evidence, 400)}"
            )
        reasons = "; ".join(REASONS.get(r, r) for r in self.planning_reasons)
        parts.append(f"\nWHY_YOU_ARE_CALLED: {reasons}")
        todo: list[str] = []
        if "initial_plan" in self.planning_reasons or not self.execution_instructions:
            todo.append(
                f"Analyse the task and call {plan_tool} with the first instruction for the {v.executor_role}."
            )
        else:
            todo.append(
                f"Review the progress. Call {plan_tool} with the next instruction (or a new approach); "
                "if the current instruction is still right, call it again with the same instruction."
            )
        if "compression" in self.planning_reasons or self.memory.needs_compression:
            turns = sorted({r.turn for r in self.memory.active_history})
            todo.append(
                f"ACTIVE history has {len(self.memory.active_history)} actions (threshold "
                f"{self.memory.compression_threshold}): call {archive_tool} for the finished turns "
                f"(active turns: {turns}) in the same answer."
            )
        if "loop_detected" in self.planning_reasons:
            todo.append(
                f"The {v.executor_role} is looping: name the loop and give a different approach."
            )
        parts.append("\nTODO:\n" + "\n".join(f"- {t}" for t in todo))
        notes = self.take_notes("planner")
        if notes:
            parts.append("\nNOTES:\n" + "\n".join(f"- {n}" for n in notes))
        return "\n".join(parts)

    def executor_context(self) -> str:
        """The executor's user message (the screenshot is attached after it)."""
        v = self.variant
        parts = [self.get_context(), ""]
        parts.append(
            "INSTRUCTIONS FROM THE " + v.planner_role.upper() + ":\n" + self.execution_instructions
        )
        parts.append("\nPREVIOUS_ACTION:\n" + self.previous_action_info())
        notes = self.take_notes("executor")
        if notes:
            parts.append("\nNOTES:\n" + "\n".join(f"- {n}" for n in notes))
        parts.append(
            f"\nThe current screenshot is attached. Answer in the {v.response_format} format, "
            "then call exactly ONE tool."
        )
        return "\n".join(parts)

    def previous_action_info(self) -> str:
        """Seed 003's previous-action summary: tool, what it did, reasoning, result."""
        record = self.memory.get_last_action_for_validation()
        if record is None:
            return "No previous action"
        return describe_action(record)


def describe_action(record: MemoryEntry) -> str:
    """A multi-line description of a recorded action for the executor to validate."""
    args = record.args
    lines = [f"Turn: {record.turn}", f"Tool: {record.tool}"]
    what = _action_text(args)
    if what:
        lines.append(f"Action: {what}")
    if isinstance(args, (PointerArgs, DragArgs, TextArgs, KeyArgs, ScrollArgs)) and args.reason:
        lines.append(f"Reasoning: {clip(args.reason, 300)}")
    lines.append(f"Result: {record.result}")
    lines.append(
        "Expected: check the screenshot for the visible effect of this action before the next one."
    )
    return "\n".join(lines)


def _action_text(args: Any) -> str:
    if isinstance(args, DragArgs):
        return f"dragged {args.target!r} from {args.start} to {args.end}"
    if isinstance(args, PointerArgs):
        return f"{args.target!r} at {args.position}"
    if isinstance(args, TextArgs):
        return f"typed {clip(args.text, 120)!r}"
    if isinstance(args, KeyArgs):
        return f"pressed {args.key}"
    if isinstance(args, ProgressArgs):
        return f"reported goal {args.goal!r} as {args.state}"
    if isinstance(args, dict) and args:
        return clip(", ".join(f"{k}={v!r}" for k, v in args.items()), 200)
    return ""
