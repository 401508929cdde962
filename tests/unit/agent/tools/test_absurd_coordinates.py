"""Non-finite and absurd coordinates are refused by every tool set, never clamped into an action.

Source: trycua/cua, ``libs/python/agent/tests/test_uitars_coordinate_security.py``
(``test_coordinate_parser_rejects_non_finite_or_non_numeric_boxes``): cua's UI-TARS loop
reads ``[float('nan'), ...]``, ``[1e1000, ...]`` and a 400-digit number as no box at all
and performs nothing. Clamped instead, ``(nan, 500)`` clicked x = 0 and ``(inf, -inf)``
the top-right corner. Here every tool that takes a place, in every tool set (the seeds'
``element`` / ``pointer``, ``extended``, ``qwen``, ``uitars``, ``uitars-1.0``, team's
executor tools of each variant and the stateless protocol), gets these values and must
answer with an error payload while the simulated desktop records no input at all.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from deskpilot.actions import coordinate, integer, number
from deskpilot.agent.modes.stateless._protocol import parse_vlm_output
from deskpilot.agent.modes.team._tools import executor_toolset
from deskpilot.agent.modes.team._variants import VARIANTS
from deskpilot.agent.tools._core import (
    ToolContext,
    ToolOutcome,
    ToolSet,
    execute_tool_call,
    toolset,
)
from deskpilot.agent.tools._uitars import parse_uitars, to_physical, uitars_calls
from deskpilot.errors import ArgumentError, InvalidBoxError
from deskpilot.geometry import Mapping, Rect, clamp_norm, parse_box
from deskpilot.testing._desktop import SimulatedDesktop

MAPPING = Mapping(Rect(0, 0, 1920, 1080), 1536, 864)
HUGE = "9" * 400  # float() reads it as inf; int() holds it, float(int) overflows

#: The values cua's test feeds (as text, as the model writes them) and their Python forms.
BAD_TEXT = ["nan", "inf", "-inf", "1e1000", HUGE]
BAD_NUMBERS: list[Any] = [float("nan"), float("inf"), float("-inf"), int(HUGE)]


def run_call(tools: ToolSet, name: str, args: dict[str, Any]) -> tuple[ToolOutcome, SimulatedDesktop]:
    desk = SimulatedDesktop()
    ctx = ToolContext(hands=desk, mapping=MAPPING)

    async def go() -> ToolOutcome:
        try:
            return await execute_tool_call(tools, name, args, ctx)
        finally:
            ctx.close()

    return asyncio.run(go()), desk


def assert_refused(outcome: ToolOutcome, desk: SimulatedDesktop) -> None:
    assert outcome.payload["ok"] is False, outcome.payload
    assert outcome.payload["error"]["type"] in ("invalid_box", "invalid_args", "invalid_json"), outcome.payload
    assert outcome.action is None and not outcome.acted
    assert desk.events == [], desk.events
    # The message quotes the value bounded, never 400 digits back into the conversation.
    assert len(outcome.payload["error"]["message"]) < 300


def json_tool_cases(bad: Any) -> list[tuple[str, str, dict[str, Any]]]:
    """(tool set, tool, arguments) for every tool of the JSON tool sets that takes a place."""
    return [
        ("seed000", "click_element", {"label": "b", "box": [bad, 500]}),
        ("seed000", "click_element", {"label": "b", "box": [500, 500, bad, 600]}),
        ("seed000", "scroll_at_position", {"box": [500, bad]}),
        ("seed001", "move_mouse", {"x": bad, "y": 500}),
        ("seed001", "move_mouse", {"x": 500, "y": bad}),
        ("extended", "double_click", {"label": "b", "box": [bad, bad]}),
        ("extended", "right_click", {"label": "b", "box": [bad, 500]}),
        ("extended", "drag", {"start": [bad, 500], "end": [500, 500]}),
        ("extended", "drag", {"start": [500, 500], "end": [500, bad]}),
        ("extended", "scroll", {"box": [bad, 500], "direction": "down"}),
        ("extended", "zoom", {"box": [0, 0, bad, 500]}),
        ("qwen", "computer_use", {"action": "left_click", "coordinate": [bad, 500]}),
        ("qwen", "computer_use", {"action": "mouse_move", "coordinate": [500, bad]}),
        ("qwen", "computer_use", {"action": "left_click_drag", "coordinate": [bad, 500]}),
        ("qwen", "computer_use", {"action": "left_click_drag", "coordinate": [5, 5], "start_coordinate": [bad, 5]}),
        ("qwen", "computer_use", {"action": "scroll", "coordinate": [bad, 500], "pixels": -3}),
        ("qwen", "computer_use", {"action": "scroll", "pixels": bad}),
    ]


@pytest.mark.parametrize("bad", [*BAD_NUMBERS, *BAD_TEXT], ids=lambda v: repr(v)[:12])
def test_json_tool_sets_refuse_and_send_nothing(bad: Any) -> None:
    for name, tool, args in json_tool_cases(bad):
        outcome, desk = run_call(toolset(name), tool, args)
        assert_refused(outcome, desk)


@pytest.mark.parametrize("bad", [*BAD_NUMBERS, *BAD_TEXT, f"{HUGE}, 500", "nan, 500"], ids=lambda v: repr(v)[:12])
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_team_executor_tools_refuse_and_send_nothing(variant: str, bad: Any) -> None:
    tools = executor_toolset(VARIANTS[variant])
    every = [tools.get(name) for name in tools.names]
    pointer_tools = [t for t in every if t is not None and "position" in t.parameters.get("properties", {})]
    assert pointer_tools, f"team {variant} has no pointer tool"
    for tool in pointer_tools:
        props = tool.parameters["properties"]
        args: dict[str, Any] = {key: "the button" for key in props if key != "position"}
        args["position"] = bad if isinstance(bad, str) and "," in bad else [bad, 500]
        outcome, desk = run_call(tools, tool.name, args)
        assert_refused(outcome, desk)


@pytest.mark.parametrize("toolset_name", ["uitars", "uitars-1.0"])
@pytest.mark.parametrize(
    "action",
    [
        "click(start_box='(nan,500)')",
        "click(start_box='(inf,-inf)')",
        "left_double(start_box='(1e1000,5)')",
        f"right_single(start_box='({HUGE},5)')",
        "click(start_box='(1,2,nan,4)')",
        "scroll(start_box='(nan,5)', direction='down')",
        "drag(start_box='(5,5)', end_box='(inf,5)')",
        "click(point='<point>nan 500</point>')",
        "click(start_box='<bbox>1 2 inf 4</bbox>')",
    ],
)
def test_uitars_refuses_and_sends_nothing(toolset_name: str, action: str) -> None:
    calls = uitars_calls(f"Thought: t\nAction: {action}", lambda: "call_1")
    assert len(calls) == 1 and calls[0].error == "invalid_args"
    assert "finite" in (calls[0].error_message or "")
    with pytest.raises(ValueError, match="finite"):
        parse_uitars(f"Action: {action}")
    # Run as the session does: the call carries its parse error.
    call = calls[0]
    desk = SimulatedDesktop()
    ctx = ToolContext(hands=desk, mapping=MAPPING)

    async def go() -> ToolOutcome:
        try:
            error = (call.error, call.error_message or "") if call.error else None
            return await execute_tool_call(toolset(toolset_name), call.name, call.arguments, ctx, parse_error=error)
        finally:
            ctx.close()

    assert_refused(asyncio.run(go()), desk)


def test_uitars_tools_refuse_non_finite_arguments_given_directly() -> None:
    outcome, desk = run_call(toolset("uitars"), "click", {"start_box": [float("nan"), 5.0]})
    assert_refused(outcome, desk)
    with pytest.raises(ValueError, match="finite"):
        to_physical(MAPPING, [float("inf"), 5.0], "1.5")


@pytest.mark.parametrize("bad", ["NaN", "1e1000", f'"{HUGE}"', '"nan"', '"inf"'])
def test_stateless_protocol_rejects_the_action(bad: str) -> None:
    out = parse_vlm_output(f'{{"observation": "o", "actions": [{{"name": "click", "x1": {bad}, "y1": 5}}]}}')
    assert out.actions == ()
    assert len(out.rejected) == 1


def test_a_400_digit_integer_is_rejected_by_the_stateless_protocol() -> None:
    # The tolerant JSON reader keeps a huge integer as a Python int: refused as well.
    out = parse_vlm_output(f'{{"observation": "o", "actions": [{{"name": "click", "x1": {HUGE}, "y1": 5}}]}}')
    assert out.actions == () and len(out.rejected) == 1


def test_the_shared_checkers() -> None:
    for bad in [*BAD_NUMBERS, *BAD_TEXT]:
        with pytest.raises(ArgumentError):
            coordinate({"x": bad}, "x")
        with pytest.raises(InvalidBoxError):
            parse_box([bad, 5])
        if not isinstance(bad, str):
            with pytest.raises(InvalidBoxError):
                clamp_norm(bad)
            with pytest.raises(ArgumentError):
                integer({"n": bad}, "n", default=1, low=1, high=50)
            with pytest.raises(ArgumentError):
                number({"n": bad}, "n", default=1.0, low=0.0, high=50.0)
    # A finite value past an edge is still clamped onto it: the documented contract.
    assert coordinate({"x": 1e9}, "x") == 1000 and coordinate({"x": -3}, "x") == 0
    assert parse_box([1005, -2]).as_list() == [1000, 0, 1000, 0]
