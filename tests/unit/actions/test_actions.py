"""deskpilot.actions: the typed action, its record, and the one argument-checking vocabulary."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from deskpilot import actions
from deskpilot.actions import (
    Click,
    Drag,
    Hold,
    KeyPress,
    MoveMouse,
    Scroll,
    TypeText,
    Wait,
    Zoom,
    from_record,
)
from deskpilot.errors import ArgumentError, DeskpilotError, UnknownKeyError
from deskpilot.geometry import Box

GOLDEN = Path(__file__).resolve().parents[2] / "golden"


def recorded_actions() -> list[bytes]:
    """Every action record the golden runs hold, as the bytes their turns.jsonl wrote."""
    found: list[bytes] = []
    for turns in sorted(GOLDEN.rglob("turns.jsonl")):
        for line in turns.read_bytes().splitlines():
            turn = orjson.loads(line)
            if turn.get("action") is not None:
                found.append(orjson.dumps(turn["action"]))
            for more in turn.get("more_calls") or []:
                if more.get("action") is not None:
                    found.append(orjson.dumps(more["action"]))
            for entry in turn.get("actions") or []:
                if isinstance(entry, dict) and isinstance(entry.get("physical"), dict):
                    found.append(orjson.dumps(entry["physical"]))
    return found


RECORDED = recorded_actions()


def test_the_golden_runs_hold_every_kind_and_style() -> None:
    kinds = {orjson.loads(r)["kind"] for r in RECORDED}
    assert kinds == {"click", "move", "drag", "scroll", "type", "key", "hold"}
    assert len(RECORDED) > 20


@pytest.mark.parametrize("record", RECORDED, ids=lambda r: r.decode()[:60])
def test_recorded_actions_round_trip_byte_for_byte(record: bytes) -> None:
    action = from_record(orjson.loads(record))
    assert orjson.dumps(action.to_record()) == record


# Shapes the tool sets write that the golden runs do not hold (qwen at the pointer, a qwen
# drag, UI-TARS scrolling where the pointer is, a stateless drag's timing).
@pytest.mark.parametrize(
    "record",
    [
        {"kind": "click", "button": "middle", "count": 1, "at": "pointer"},
        {"kind": "scroll", "dy": -3, "dx": 0, "at": "pointer"},
        {"kind": "scroll", "dy": 5, "dx": 0},
        {"kind": "drag", "end": [10, 20], "start": [1, 2]},
        {"kind": "drag", "start": [1, 2], "end": [10, 20], "label": ""},
        {"kind": "drag", "start": [1, 2], "end": [10, 20], "steps": 20, "duration": 0.0},
        {"kind": "click", "x": -5, "y": 7, "button": "right", "count": 1, "label": "x", "hold": "ctrl+shift"},
        {"kind": "wait", "seconds": 1.5},
        {"kind": "zoom", "box": [1, 2, 300, 400]},
    ],
)
def test_other_record_shapes_round_trip(record: dict[str, Any]) -> None:
    assert orjson.dumps(from_record(record).to_record()) == orjson.dumps(record)


def test_style_changes_the_key_order_not_the_action() -> None:
    standard = Scroll((3, 4), dy=2)
    qwen = Scroll((3, 4), dy=2, style="qwen")
    assert standard == qwen
    assert list(standard.to_record()) == ["kind", "x", "y", "dy", "dx"]
    assert list(qwen.to_record()) == ["kind", "dy", "dx", "x", "y"]
    assert Click(None, style="qwen").to_record() == {"kind": "click", "button": "left", "count": 1, "at": "pointer"}
    assert Click(None).to_record() == {"kind": "click", "button": "left", "count": 1}


def test_source_box_is_kept_but_not_recorded() -> None:
    click = Click((960, 444), label="OK", source=Box(450, 400, 550, 420))
    assert click.source == Box(450, 400, 550, 420)
    assert "source" not in click.to_record()
    assert click == Click((960, 444), label="OK")


def test_actions_are_frozen_values() -> None:
    key = KeyPress("ctrl+c")
    with pytest.raises(AttributeError):
        key.combo = "alt+f4"  # type: ignore[misc]
    assert {key, KeyPress("ctrl+c")} == {key}
    assert [a.kind for a in (Click(None), MoveMouse((0, 0)), Drag(None, (1, 1)), Scroll(None), TypeText("a"),
                             KeyPress("a"), Hold("a", 1.0), Wait(1.0), Zoom(Box(0, 0, 1, 1)))] == [
        "click", "move", "drag", "scroll", "type", "key", "hold", "wait", "zoom"]


@pytest.mark.parametrize(
    "record",
    [{"kind": "teleport"}, {"kind": "click", "x": 1, "y": 2, "button": "left", "count": "2"},
     {"kind": "click", "x": 1, "y": 2, "button": "thumb", "count": 1}, {"kind": "drag", "end": [1]},
     {"kind": "type", "text": 3}],
)
def test_unknown_records_are_refused(record: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        from_record(record)


# ---------------------------------------------------------------------- the checks


def refused(fn: Any, *args: Any, **kwargs: Any) -> tuple[str, str]:
    with pytest.raises(ArgumentError) as info:
        fn(*args, **kwargs)
    return info.value.kind, info.value.message


def test_argument_error_is_one_of_the_tree_and_a_value_error() -> None:
    exc = ArgumentError("invalid_args", "x must be 1..2")
    assert isinstance(exc, DeskpilotError) and isinstance(exc, ValueError)
    assert (exc.kind, exc.message, str(exc), exc.details) == ("invalid_args", "x must be 1..2", "x must be 1..2", {"kind": "invalid_args"})


def test_integer_and_number() -> None:
    assert actions.integer({}, "amount", default=3, low=1, high=50) == 3
    assert actions.integer({"amount": None}, "amount", default=3, low=1, high=50) == 3
    assert actions.integer({"amount": 7.9}, "amount", default=3, low=1, high=50) == 7
    assert refused(actions.integer, {"amount": True}, "amount", default=3, low=1, high=50) == (
        "invalid_args", "amount must be a whole number 1..50, got True")
    assert refused(actions.integer, {"amount": 51}, "amount", default=3, low=1, high=50) == (
        "invalid_args", "amount must be 1..50, got 51")
    assert actions.number({"seconds": 2}, "seconds", default=0.5, low=0.0, high=5.0) == 2.0
    assert refused(actions.number, {"seconds": float("nan")}, "seconds", default=0.5, low=0.0, high=5.0) == (
        "invalid_args", "seconds must be a number 0.0..5.0, got nan")
    assert refused(actions.number, {"seconds": 9}, "seconds", default=0.5, low=0.0, high=5.0) == (
        "invalid_args", "seconds must be 0.0..5.0, got 9")


def test_coordinate_box_and_label() -> None:
    assert actions.coordinate({"x": "500.4"}, "x") == 500
    assert actions.coordinate({"x": 1200}, "x") == 1000
    assert refused(actions.coordinate, {}, "x") == ("invalid_args", "x is required (0..1000)")
    assert refused(actions.coordinate, {"x": "left"}, "x") == ("invalid_args", "x must be a number 0..1000, got 'left'")
    assert actions.box({"box": [1, 2]}) == Box(1, 2, 1, 2)
    kind, message = refused(actions.box, {})
    assert kind == "missing_box" and message.startswith("box is missing")
    kind, message = refused(actions.box, {"start": [1, 2, 3]}, "start")
    assert kind == "invalid_box" and message.startswith("start: box needs 2 or 4 numbers")
    assert actions.label({"label": " OK "}) == "OK"
    assert actions.label({}, required=False) == ""
    assert refused(actions.label, {"label": "  "})[0] == "missing_label"
    assert refused(actions.label, {"label": 3}) == ("invalid_args", "label must be a string, got int")


def test_text() -> None:
    assert actions.text({"text": "héllo"}, limit=5) == "héllo"
    assert refused(actions.text, {"text": ""}, limit=5) == ("empty_text", "text is required and must not be empty")
    assert refused(actions.text, {"text": 5}, limit=5) == ("invalid_args", "text must be a string, got int")
    assert refused(actions.text, {"text": "abcdef"}, limit=5) == (
        "text_too_long",
        "text has 6 characters; type_text types at most 5 per call (agent.max_type_chars): type it in parts",
    )


def names(combo: str) -> list[str]:
    parts = [p.strip().lower() for p in combo.split("+")]
    for part in parts:
        if part not in ("ctrl", "c", "shift", "enter"):
            raise UnknownKeyError(part, ["ctrl"] if part == "ctlr" else [])
    return parts


def test_key_combo() -> None:
    assert actions.key_combo({"key": "Ctrl+C"}, names) == "ctrl+c"
    assert actions.key_combo({"keys": ["ctrl", "c"]}, names, keys=("key", "keys")) == "ctrl+c"
    assert refused(actions.key_combo, {"key": " "}, names) == ("missing_key", "key is required, e.g. 'enter', 'tab', 'ctrl+c', 'alt+f4'")
    assert refused(actions.key_combo, {"key": 3}, names) == ("invalid_args", "key must be a string like 'ctrl+c', got 3")
    assert refused(actions.key_combo, {"key": ["shift"]}, names, lists=False, like=None) == (
        "invalid_args", "key must be a string, got ['shift']")
    assert refused(actions.key_combo, {"key": "ctlr+c"}, names) == ("invalid_key", "unknown key 'ctlr' (did you mean 'ctrl'?)")


# ---------------------------------------------------------------------- overlay marks


def test_the_overlay_marks_a_performed_action_where_the_model_pointed() -> None:
    from deskpilot.agent.modes.stateless._protocol import parse_vlm_output
    from deskpilot.imaging._overlay import ActionMark, action_mark

    out = parse_vlm_output(
        '{"observation": "", "actions": [{"name": "type", "text": "hi"}, {"name": "scroll", "direction": "up"},'
        ' {"name": "drag", "x1": 1, "y1": 2, "x2": 3, "y2": 4}, {"name": "right_click", "x1": 7, "y1": 8},'
        ' {"name": "double_click", "x1": 9, "y1": 10}, {"name": "move", "x1": 5, "y1": 6},'
        ' {"name": "key", "keys": "ctrl+s"}, {"name": "click", "x1": 11, "y1": 12}]}'
    )
    performed = [
        TypeText("hi"),
        Scroll((960, 540), dy=-3, source=Box(500, 500, 500, 500)),
        Drag((2, 2), (6, 4), source=(Box(1, 2, 1, 2), Box(3, 4, 3, 4))),
        Click((13, 9), "right", source=Box(7, 8, 7, 8)),
        Click((17, 11), count=2, source=Box(9, 10, 9, 10)),
        MoveMouse((10, 6), source=Box(5, 6, 5, 6)),
        KeyPress("ctrl+s"),
        Click((21, 13), source=Box(11, 12, 11, 12)),
    ]
    # The stateless protocol's own marks and the typed actions' marks agree.
    assert [action_mark(a) for a in performed] == [a.mark() for a in out.actions]
    assert action_mark(Click((1, 1))) == ActionMark("click")  # no source: no heat


def test_every_argument_refusal_is_one_error_type() -> None:
    from deskpilot.agent.modes.stateless._protocol import _Reject
    from deskpilot.agent.modes.team._common import read_key, read_text_to_type
    from deskpilot.input import InputArgumentError, InputController

    assert issubclass(_Reject, ArgumentError) and _Reject("x needs y").kind == "invalid_args"
    with pytest.raises(ArgumentError) as info:
        InputController("dry").click(1, 2, count=9)
    assert isinstance(info.value, InputArgumentError) and info.value.kind == "invalid_args"
    assert refused(read_text_to_type, {"text": ""}) == ("empty_text", "text is required and must not be empty")
    assert refused(read_key, {"key": "ctrl+entr"})[0] == "invalid_key"
    assert read_key({"key": " Ctrl+C "}) == "Ctrl+C"  # team keeps what the model wrote


def test_an_input_layer_refusal_is_a_failed_action_for_the_model() -> None:
    import asyncio

    from deskpilot.agent.tools._core import ToolContext, execute_tool_call, toolset
    from deskpilot.geometry import Mapping, Rect
    from deskpilot.input import InputArgumentError
    from deskpilot.testing._desktop import SimulatedDesktop

    class Refusing(SimulatedDesktop):
        def click(self, *a: Any, **k: Any) -> None:
            raise InputArgumentError("count must be an integer 1..3, got 9")

    ctx = ToolContext(hands=Refusing(), mapping=Mapping(Rect(0, 0, 1920, 1080), 1536, 864))
    out = asyncio.run(execute_tool_call(toolset("seed000"), "click_element", {"label": "x", "box": [1, 1]}, ctx))
    ctx.close()
    assert out.payload["error"] == {
        "type": "action_failed", "message": "InputArgumentError: count must be an integer 1..3, got 9"}
