"""The executor's tools as the shared loop runs them.

Each seed tool becomes a :class:`deskpilot.agent.tools._core.Tool` with the seed's name and
schema whose ``run`` parses the arguments into the variant's dataclass (once: the outcome's
``detail`` carries it to the engine's memory) and translates the physical part with the
single mode's tools into one Action, which goes the one path of every action (policy
check, input thread, seed delays, chunked typing). ``Session.act`` then settles, compares
frames and records the call exactly as in single mode.

Payloads carry the seeds' result strings under ``"result"`` ("Clicked: Save button",
"Typed: hello", "Goal status: g1 -> DONE") so the memory can show them.
"""

from __future__ import annotations

from typing import Any, cast

from deskpilot.agent.modes.team._common import (
    CompletionArgs,
    DragArgs,
    KeyArgs,
    PointerArgs,
    ProgressArgs,
    TextArgs,
    ToolSpec,
)
from deskpilot.agent.modes.team._variants import TeamVariant
from deskpilot.agent.tools._core import (
    Tool,
    ToolContext,
    ToolOutcome,
    ToolSet,
    click_tool,
    drag_tool,
    err_payload,
    key_tool,
    make_toolset,
    ok_payload,
    scroll_tool,
    type_tool,
)

__all__ = ["INSUFFICIENT_EVIDENCE", "evidence_length", "executor_toolset"]

#: The error type of a completion report whose evidence is too short.
INSUFFICIENT_EVIDENCE = "insufficient_evidence"

_CLICKS: dict[str, tuple[str, int, str]] = {
    "click": ("left", 1, "Clicked"),
    "double_click": ("left", 2, "Double-clicked"),
    "right_click": ("right", 1, "Right-clicked"),
}


def evidence_length(evidence: str) -> int:
    """Characters that count as evidence (surrounding whitespace does not)."""
    return len(evidence.strip())


def _with_result(outcome: ToolOutcome, result: str, parsed: Any) -> ToolOutcome:
    """The seed's result string, and the parsed arguments the engine keeps (``detail``)."""
    if outcome.ok:
        outcome.payload["result"] = result
    outcome.detail = parsed
    return outcome


def _make_run(spec: ToolSpec, min_evidence: int) -> Any:
    kind = spec.kind
    if kind in _CLICKS:
        button, count, verb = _CLICKS[kind]
        base = click_tool(spec.name, button=button, count=count)

        async def run_click(ctx: ToolContext, args: dict[str, Any]) -> ToolOutcome:
            parsed = cast(PointerArgs, spec.parse(args))
            outcome = await base.run(
                ctx, {"label": parsed.target, "box": parsed.position.as_list()}
            )
            return _with_result(outcome, f"{verb}: {parsed.target}", parsed)

        return run_click
    if kind == "drag":
        drag = drag_tool(spec.name)

        async def run_drag(ctx: ToolContext, args: dict[str, Any]) -> ToolOutcome:
            parsed = cast(DragArgs, spec.parse(args))
            outcome = await drag.run(
                ctx,
                {
                    "start": parsed.start.as_list(),
                    "end": parsed.end.as_list(),
                    "label": parsed.target,
                },
            )
            return _with_result(outcome, f"Dragged: {parsed.target}", parsed)

        return run_drag
    if kind == "type":
        typer = type_tool(spec.name)

        async def run_type(ctx: ToolContext, args: dict[str, Any]) -> ToolOutcome:
            parsed = cast(TextArgs, spec.parse(args))
            outcome = await typer.run(ctx, {"text": parsed.text})
            return _with_result(outcome, f"Typed: {parsed.text[:50]}", parsed)

        return run_type
    if kind == "key":
        presser = key_tool(spec.name)

        async def run_key(ctx: ToolContext, args: dict[str, Any]) -> ToolOutcome:
            parsed = cast(KeyArgs, spec.parse(args))
            outcome = await presser.run(ctx, {"key": parsed.key})
            return _with_result(outcome, f"Pressed key: {parsed.key}", parsed)

        return run_key
    if kind in ("scroll_down", "scroll_up"):
        scroller = scroll_tool(spec.name)
        direction = "down" if kind == "scroll_down" else "up"

        async def run_scroll(ctx: ToolContext, args: dict[str, Any]) -> ToolOutcome:
            parsed = spec.parse(args)
            # The seeds scroll one notch (wheel delta 120) at the centre of the screen.
            outcome = await scroller.run(
                ctx, {"box": [500, 500], "direction": direction, "amount": 1}
            )
            return _with_result(outcome, f"Scrolled {direction}", parsed)

        return run_scroll
    if kind == "progress":

        async def run_progress(ctx: ToolContext, args: dict[str, Any]) -> ToolOutcome:
            parsed = cast(ProgressArgs, spec.parse(args))
            return ToolOutcome(
                ok_payload(
                    result=f"Goal status: {parsed.goal} -> {parsed.state}",
                    goal=parsed.goal,
                    status=parsed.state,
                ),
                detail=parsed,
            )

        return run_progress
    if kind == "complete":

        async def run_complete(ctx: ToolContext, args: dict[str, Any]) -> ToolOutcome:
            parsed = cast(CompletionArgs, spec.parse(args))
            length = evidence_length(parsed.evidence)
            if length < min_evidence:
                # A refusal of what the arguments say, not of how they are written: the
                # parsed call stays with it.
                return ToolOutcome(
                    err_payload(
                        INSUFFICIENT_EVIDENCE,
                        f"completion refused: evidence has {length} characters, at least {min_evidence} are "
                        "needed. Describe what the screenshot shows that proves the whole task is done, "
                        "or keep working.",
                    ),
                    detail=parsed,
                )
            return ToolOutcome(ok_payload(result="Mission complete", evidence_chars=length), detail=parsed)

        return run_complete
    raise ValueError(f"{spec.name}: {kind!r} is not an executor tool kind")


def executor_toolset(variant: TeamVariant, *, min_evidence: int = 100) -> ToolSet:
    """The executor's tools of ``variant`` for :meth:`Session.act`."""
    tools = []
    for spec in variant.executor_tools:
        run = _make_run(spec, min_evidence)
        if spec.kind in ("progress", "complete"):
            tools.append(Tool(spec.name, spec.description, spec.parameters, run, kind="control"))
        else:
            tools.append(Tool(spec.name, spec.description, spec.parameters, run, kind="action"))
    return make_toolset(f"team{variant.name}", tools)
