"""The one path of every action (:func:`deskpilot.agent.tools.act`), over every tool there is.

For every tool of every tool set in the registry (``TOOLSETS``), every executor tool of
every team variant (``VARIANTS``), team's loop recovery and every action of the stateless
protocol (``ACTION_NAMES``):

- with a deny-all policy, the simulated desktop receives no input event at all;
- with an allow-all policy, the policy saw exactly one action, the one recorded, and
  performing the recorded action (read back with ``from_record``, as replay reads it) on a
  fresh desktop sends exactly the events the call sent.

Tool sets, tools and variants are enumerated from their registries: a new one fails here
until it has an example call below, so no action can bypass the policy unnoticed.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from types import SimpleNamespace
from typing import Any

import pytest

from deskpilot._errors import ActionDeniedError
from deskpilot.actions import (
    PASSIVE,
    Action,
    Click,
    Drag,
    KeyPress,
    Scroll,
    TypeText,
    Wait,
    from_record,
)
from deskpilot.agent._session import Turn
from deskpilot.agent.modes.stateless._config import StatelessSettings
from deskpilot.agent.modes.stateless._engine import StatelessEngine
from deskpilot.agent.modes.stateless._protocol import ACTION_NAMES, parse_vlm_output
from deskpilot.agent.modes.team._recovery import recovery_actions, run_recovery
from deskpilot.agent.modes.team._tools import executor_toolset
from deskpilot.agent.modes.team._variants import VARIANTS, TeamVariant
from deskpilot.agent.tools import (
    Performed,
    ToolContext,
    ToolOutcome,
    ToolSet,
    act,
    execute_tool_call,
)
from deskpilot.agent.tools._core import TOOLSETS, toolset
from deskpilot.geometry import Mapping, Rect
from deskpilot.input import DryBackend, InputController, perform
from deskpilot.testing._desktop import SimulatedDesktop

MAPPING = Mapping(Rect(0, 0, 1920, 1080), 1536, 864)


class RecordingPolicy:
    """A policy hook that allows or denies everything and keeps what it was asked."""

    def __init__(self, allow: bool) -> None:
        self.allow = allow
        self.seen: list[Action] = []

    async def __call__(self, action: Action) -> None:
        self.seen.append(action)
        if not self.allow:
            raise ActionDeniedError("the test's deny-all policy refuses every action", rule="test.deny_all")


def context(desk: SimulatedDesktop, policy: RecordingPolicy | None) -> ToolContext:
    # A small chunk: texts are typed in several pieces, as long ones are in a run.
    return ToolContext(hands=desk, mapping=MAPPING, policy_async=policy, type_chunk=4)


@pytest.fixture(autouse=True)
def _no_uitars_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("deskpilot.agent.tools._uitars._WAIT_S", 0.0)


# ---------------------------------------------------------------------- examples

_CLICK = [{"label": "OK", "box": [500, 400]}, {"label": "OK", "box": [400, 300, 600, 500], "hold": "Ctrl"}]
_CORE: dict[str, list[dict[str, Any]]] = {
    "observe_screen": [{}],
    "take_screenshot": [{}],
    "click_element": _CLICK,
    "double_click": _CLICK,
    "right_click": _CLICK,
    "type_text": [{"text": "hello world, typed in chunks"}],
    # Spellings other than the canonical names: what is checked must be what is sent.
    "press_key": [{"key": "Ctrl+Shift+T"}, {"keys": ["Alt", "F4"]}, {"key": "A"}, {"key": "Return"}],
    "hold_key": [{"key": "Shift", "seconds": 0}],
    "scroll_at_position": [{"box": [500, 500], "amount": 2}],
    "scroll": [{"box": [500, 500], "direction": "left", "amount": 2}],
    "drag": [{"start": [100, 100], "end": [600, 600], "label": "slider"}],
    "wait": [{"seconds": 0}],
    "zoom": [{"box": [100, 100, 400, 400]}],
    "move_mouse": [{"x": 500, "y": 500}],
    "click_mouse": [{}],
    "scroll_down": [{}],
}
_QWEN: dict[str, list[dict[str, Any]]] = {
    "computer_use": [
        {"action": "key", "keys": ["ctrl", "C"]},
        {"action": "type", "text": "qwen types this"},
        {"action": "mouse_move", "coordinate": [500, 500]},
        {"action": "left_click", "coordinate": [500, 412]},
        {"action": "left_click"},  # at the pointer
        {"action": "right_click", "coordinate": [10, 10]},
        {"action": "middle_click", "coordinate": [990, 990]},
        {"action": "double_click", "coordinate": [300, 700]},
        {"action": "triple_click", "coordinate": [300, 700]},
        {"action": "left_click_drag", "start_coordinate": [100, 100], "coordinate": [800, 800]},
        {"action": "left_click_drag", "coordinate": [800, 800]},  # from the pointer
        {"action": "scroll", "coordinate": [500, 200], "pixels": -2},
        {"action": "scroll", "pixels": 3},  # at the pointer
        {"action": "hscroll", "coordinate": [500, 200], "pixels": 2},
        {"action": "wait", "time": 0},
        {"action": "terminate", "status": "success"},
        {"action": "answer", "text": "42"},
    ]
}
_BOX = {"start_box": [196.0, 92.0]}
_UITARS: dict[str, list[dict[str, Any]]] = {
    "click": [_BOX, {"start_box": [100.0, 100.0, 300.0, 200.0]}],
    "left_single": [_BOX],
    "left_double": [_BOX],
    "right_single": [_BOX],
    "drag": [{"start_box": [10.0, 10.0], "end_box": [300.0, 300.0]}],
    "select": [{"start_box": [10.0, 10.0], "end_box": [300.0, 300.0]}],
    "mouse_move": [_BOX],
    "hover": [_BOX],
    "hotkey": [{"key": "ctrl c"}],
    "press": [{"key": "Enter"}],
    # The parser keeps the model's escapes as text: "\\n" at the end submits.
    "type": [{"content": "tars"}, {"content": "tars\\n"}],
    "scroll": [{"start_box": [196.0, 50.0], "direction": "down"}, {"direction": "up"}],
    "wait": [{}],
    "finished": [{"content": "done"}],
    "call_user": [{}],
}
EXAMPLES: dict[str, dict[str, list[dict[str, Any]]]] = {
    "seed000": _CORE,
    "seed001": _CORE,
    "extended": _CORE,
    "qwen": _QWEN,
    "uitars": _UITARS,
    "uitars-1.0": _UITARS,
}


def _team_examples(variant: TeamVariant) -> dict[str, list[dict[str, Any]]]:
    n = variant.wording.arguments
    why = {n.reason: "the test"}
    pointer = {**why, n.target: "Save button", "position": [500, 400]}
    by_kind: dict[str, dict[str, Any]] = {
        "click": pointer,
        "double_click": pointer,
        "right_click": pointer,
        "drag": {**why, n.target: "slider", "start": [100, 100], "end": [600, 600]},
        "type": {**why, "text": "typed by the executor"},
        "key": {**why, "key": "Ctrl+A"},
        "scroll_down": why,
        "scroll_up": why,
        "progress": {n.goal: "open the file", n.state: "DONE", "evidence": "the file is open"},
        "complete": {"evidence": "The screenshot shows the file open and saved. " * 4},
    }
    return {variant.wording.names[kind]: [args] for kind, args in by_kind.items()}  # type: ignore[index]


def _tool_cases() -> list[Any]:
    cases = []
    for ident in TOOLSETS:
        for name in toolset(ident).names:
            examples = EXAMPLES.get(ident, {}).get(name) or [None]
            for index, args in enumerate(examples):
                cases.append(pytest.param(lambda ident=ident: toolset(ident), name, args, id=f"{ident}-{name}-{index}"))
    for variant in VARIANTS.values():
        team = _team_examples(variant)
        for name in executor_toolset(variant).names:
            for index, args in enumerate(team.get(name) or [None]):
                cases.append(
                    pytest.param(
                        lambda variant=variant: executor_toolset(variant), name, args, id=f"team{variant.name}-{name}-{index}"
                    )
                )
    return cases


TOOL_CASES = _tool_cases()


def run_call(tools: ToolSet, name: str, args: dict[str, Any], *, allow: bool) -> tuple[ToolOutcome, SimulatedDesktop, RecordingPolicy]:
    desk = SimulatedDesktop()
    policy = RecordingPolicy(allow)
    ctx = context(desk, policy)

    async def go() -> ToolOutcome:
        try:
            return await execute_tool_call(tools, name, args, ctx)
        finally:
            ctx.close()

    return asyncio.run(go()), desk, policy


def replayed(action: Action) -> list[dict[str, Any]]:
    """The events ``action`` sends through the one path on a fresh desktop, unchecked."""
    desk = SimulatedDesktop()
    ctx = context(desk, None)

    async def go() -> Performed:
        try:
            return await act(ctx, action)
        finally:
            ctx.close()

    performed = asyncio.run(go())
    assert performed.action == action
    return desk.events


# ---------------------------------------------------------------------- every tool


def test_every_tool_set_and_variant_is_enumerated() -> None:
    ids = {case.id.split("-", 1)[0] for case in TOOL_CASES}
    assert {"seed000", "seed001", "extended", "qwen", "uitars"} <= ids
    assert {f"team{v.name}" for v in VARIANTS.values()} <= ids
    assert len(TOOL_CASES) > 60


@pytest.mark.parametrize(("make_tools", "name", "args"), TOOL_CASES)
def test_deny_all_sends_nothing(make_tools: Any, name: str, args: dict[str, Any] | None) -> None:
    assert args is not None, f"{name}: a new tool needs an example call in {__name__}.EXAMPLES"
    tools = make_tools()
    outcome, desk, policy = run_call(tools, name, args, allow=False)
    assert desk.events == [], f"{name} sent input although the policy denied everything"
    assert not outcome.acted and outcome.action is None
    allowed, _, _ = run_call(tools, name, args, allow=True)
    if allowed.acted:
        # The tool does send input when allowed: the denial was the policy's.
        assert len(policy.seen) == 1
        assert outcome.payload["error"]["type"] == "policy_denied"
    else:
        assert policy.seen == []


@pytest.mark.parametrize(("make_tools", "name", "args"), TOOL_CASES)
def test_the_recorded_action_is_the_action_sent(make_tools: Any, name: str, args: dict[str, Any] | None) -> None:
    assert args is not None, f"{name}: a new tool needs an example call in {__name__}.EXAMPLES"
    outcome, desk, policy = run_call(make_tools(), name, args, allow=True)
    assert outcome.ok, outcome.payload
    if not outcome.acted:
        assert desk.events == [] and policy.seen == [] and outcome.action_record is None
        return
    assert outcome.action is not None and not isinstance(outcome.action, PASSIVE)
    record = outcome.action_record
    assert record is not None
    # One check, of exactly what was sent and recorded (never "at the pointer": a point).
    assert policy.seen == [outcome.action]
    assert from_record(record) == outcome.action
    assert record.get("at") != "pointer"
    # The record performs as the call did: the same events, in the same order.
    assert desk.events, f"{name} acted but sent nothing"
    assert replayed(from_record(record)) == desk.events


# ---------------------------------------------------------------------- team's recovery


@pytest.mark.parametrize("allow", [False, True])
def test_loop_recovery_goes_the_one_path(allow: bool) -> None:
    desk = SimulatedDesktop()
    policy = RecordingPolicy(allow)
    ctx = context(desk, policy)

    async def go() -> Any:
        try:
            return await run_recovery(ctx)
        finally:
            ctx.close()

    report = asyncio.run(go())
    steps = recovery_actions(ctx)
    assert [a.to_record() for a in policy.seen] == steps
    if not allow:
        assert desk.events == [] and report.performed == [] and report.denied == steps
        return
    assert report.performed == steps and report.denied == [] and report.error is None
    expected = [event for step in steps for event in replayed(from_record(step))]
    assert desk.events == expected


# ---------------------------------------------------------------------- the stateless protocol

_STATELESS: dict[str, dict[str, Any]] = {
    "move": {"name": "move", "x1": 500, "y1": 500},
    "click": {"name": "click", "x1": 500, "y1": 412},
    "right_click": {"name": "right_click", "x1": 100, "y1": 100},
    "double_click": {"name": "double_click", "x1": 900, "y1": 900},
    "drag": {"name": "drag", "x1": 100, "y1": 100, "x2": 600, "y2": 600},
    "scroll": {"name": "scroll", "x1": 500, "y1": 500, "direction": "up", "amount": 2},
    "type": {"name": "type", "text": "stateless typing"},
    "key": {"name": "key", "keys": "Ctrl+L"},
    "done": {"name": "done"},
}


def run_stateless(item: dict[str, Any], *, allow: bool) -> tuple[Turn, list[Any], SimulatedDesktop, RecordingPolicy]:
    desk = SimulatedDesktop()
    policy = RecordingPolicy(allow)
    ctx = context(desk, policy)
    session = SimpleNamespace(ctx=ctx, redact_text=lambda text: text)
    settings = dataclasses.replace(StatelessSettings(), drag_step_delay=0)
    engine = StatelessEngine(session, settings)  # type: ignore[arg-type]
    engine.mapping = MAPPING
    out = parse_vlm_output(json.dumps({"observation": "o", "actions": [item]}))
    assert not out.rejected, out.rejected
    turn = Turn(1, "stateless")

    async def go() -> Any:
        try:
            return await engine._execute(turn, out.actions)
        finally:
            ctx.close()

    _done, ran = asyncio.run(go())
    return turn, ran, desk, policy


@pytest.mark.parametrize("name", ACTION_NAMES)
def test_stateless_deny_all_sends_nothing(name: str) -> None:
    assert name in _STATELESS, f"a new stateless action {name!r} needs an example in {__name__}._STATELESS"
    turn, ran, desk, policy = run_stateless(_STATELESS[name], allow=False)
    assert desk.events == [] and ran == []
    if name != "done":
        assert len(policy.seen) == 1
        assert turn.record["actions"][0]["result"]["error"]["type"] == "policy_denied"


@pytest.mark.parametrize("name", ACTION_NAMES)
def test_stateless_recorded_action_is_the_action_sent(name: str) -> None:
    turn, ran, desk, policy = run_stateless(_STATELESS[name], allow=True)
    if name == "done":
        assert desk.events == [] and ran == [] and policy.seen == []
        return
    [(_, physical)] = ran
    [entry] = turn.record["actions"]
    assert entry["ok"] is True
    assert policy.seen == [physical]
    assert from_record(entry["physical"]) == physical
    assert replayed(from_record(entry["physical"])) == desk.events


# ---------------------------------------------------------------------- act itself


def _act(desk: SimulatedDesktop, action: Action, policy: RecordingPolicy | None = None, **kw: Any) -> Performed:
    ctx = context(desk, policy)

    async def go() -> Performed:
        try:
            return await act(ctx, action, **kw)
        finally:
            ctx.close()

    return asyncio.run(go())


@pytest.mark.parametrize(
    "action",
    [Click(None, "right", 2), Scroll(None, dy=-3), Drag(None, (10, 20))],
    ids=["click", "scroll", "drag"],
)
def test_an_action_at_the_pointer_is_checked_and_sent_at_the_pointer_position(action: Action) -> None:
    desk = SimulatedDesktop()
    desk.pointer = (123, 456)
    policy = RecordingPolicy(True)
    performed = _act(desk, action, policy)
    assert policy.seen == [performed.action]
    sent = performed.action
    where = sent.start if isinstance(sent, Drag) else sent.point  # type: ignore[union-attr]
    assert where == (123, 456)
    assert "x" in performed.to_record() or "start" in performed.to_record()


def test_typing_is_chunked_and_a_stop_ends_it_between_chunks() -> None:
    desk = SimulatedDesktop()
    text = "abcdefghijklmnop"
    ctx = context(desk, None)
    chunks: list[str] = []
    real = desk.type_text

    def type_text(chunk: str) -> None:
        chunks.append(chunk)
        real(chunk)
        if len(chunks) == 2:
            ctx.stop.set()

    desk.type_text = type_text  # type: ignore[method-assign]

    async def go() -> Performed:
        try:
            return await act(ctx, TypeText(text))
        finally:
            ctx.close()

    performed = asyncio.run(go())
    assert chunks == ["abcd", "efgh"]
    assert performed.typed == 8 and performed.interrupted
    assert performed.to_record() == {"kind": "type", "text": text}


def test_passive_actions_are_neither_checked_nor_sent() -> None:
    desk = SimulatedDesktop()
    policy = RecordingPolicy(False)
    performed = _act(desk, Wait(1.0), policy)
    assert performed.action == Wait(1.0) and policy.seen == [] and desk.events == []


def test_a_denied_action_raises_before_any_input() -> None:
    desk = SimulatedDesktop()
    with pytest.raises(ActionDeniedError):
        _act(desk, Click(None), RecordingPolicy(False))
    assert desk.events == []


@pytest.mark.parametrize("spelling", ["Ctrl+Shift+T", "A", "Return", "alt+F4", "win+r", "ctrl+plus", "shift+1", "Esc", "ctrl++"])
def test_canonical_key_names_press_the_same_keys_as_the_models_spelling(spelling: str) -> None:
    """press_key and hold_key send the canonical combo the policy checked: it must press
    exactly the keys the model's own spelling would have (the dry backend's key events)."""
    from deskpilot.agent.tools._core import key_names

    canonical = "+".join(key_names(spelling))

    def events(combo: str) -> list[dict[str, Any]]:
        backend = DryBackend()
        perform(InputController(backend), KeyPress(combo))
        return backend.actions

    assert events(canonical) == events(spelling)


def test_every_qwen_action_has_an_example() -> None:
    from deskpilot.agent.tools._qwen import ACTIONS

    assert {args["action"] for args in _QWEN["computer_use"]} == set(ACTIONS)


async def _act_then_close(ctx: ToolContext, action: Action) -> Performed:
    try:
        return await act(ctx, action)
    finally:
        ctx.close()


@pytest.mark.parametrize("action", [Click((10, 10)), TypeText("never typed"), KeyPress("enter")], ids=["click", "type", "key"])
def test_a_stop_that_came_while_the_policy_decided_sends_nothing(action: Action) -> None:
    from deskpilot._errors import RunInterrupted

    desk = SimulatedDesktop()
    ctx = context(desk, None)

    async def stop_while_deciding(checked: Action) -> None:
        ctx.stop.set()  # e.g. Ctrl+C while a confirm question waited

    ctx.policy_async = stop_while_deciding

    with pytest.raises(RunInterrupted):
        asyncio.run(_act_then_close(ctx, action))
    assert desk.events == []


@pytest.mark.parametrize("action", [Click((10, 10)), TypeText("never typed"), KeyPress("enter")], ids=["click", "type", "key"])
def test_a_stopping_run_refuses_before_the_policy_is_asked(action: Action) -> None:
    """The policy's refusal is a tool result the model reads: a run whose stop could not
    cancel its mode must still end at its next action, not go on with every action refused
    (seen in CI: a tripped kill switch, then 500 refused clicks up to --max-steps)."""
    from deskpilot._errors import RunInterrupted

    desk = SimulatedDesktop()
    policy = RecordingPolicy(allow=False)
    ctx = context(desk, policy)
    ctx.stop.set()

    with pytest.raises(RunInterrupted):
        asyncio.run(_act_then_close(ctx, action))
    assert policy.seen == [] and desk.events == []
