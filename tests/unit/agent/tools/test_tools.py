"""Tools: schemas, the seeds' payloads, every error type, exact coordinate mapping."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from deskpilot.actions import Action, Click, KeyPress
from deskpilot.agent.tools._core import (
    ERROR_TYPES,
    NoEffectTracker,
    ToolContext,
    ToolOutcome,
    execute_tool_call,
    signature_of,
    toolset,
)
from deskpilot.errors import ActionDeniedError, InputError
from deskpilot.geometry import Mapping, Rect, parse_box
from deskpilot.testing._desktop import SimulatedDesktop

MAPPING = Mapping(Rect(0, 0, 1920, 1080), 1536, 864)


def make(hands: Any = None, **kw: Any) -> tuple[ToolContext, SimulatedDesktop]:
    desk = SimulatedDesktop()
    return ToolContext(hands=hands or desk, mapping=MAPPING, **kw), desk


def call(name: str, args: Any, ctx: ToolContext, tools: str = "seed000", parse_error: Any = None) -> ToolOutcome:
    async def go() -> ToolOutcome:
        try:
            return await execute_tool_call(toolset(tools), name, args, ctx, parse_error=parse_error)
        finally:
            ctx.close()

    return asyncio.run(go())


def error_type(outcome: ToolOutcome) -> str:
    assert outcome.payload["ok"] is False, outcome.payload
    assert set(outcome.payload) == {"ok", "error"}
    assert set(outcome.payload["error"]) == {"type", "message"}
    assert outcome.payload["error"]["message"]
    return str(outcome.payload["error"]["type"])


def test_toolsets_and_schemas() -> None:
    assert toolset("seed000").names == ["observe_screen", "click_element", "type_text", "press_key", "scroll_at_position"]
    assert toolset("seed001").names == ["take_screenshot", "move_mouse", "click_mouse", "type_text", "scroll_down"]
    ext = toolset("extended").names
    for name in ("double_click", "right_click", "drag", "scroll", "hold_key", "wait", "zoom", "observe_screen"):
        assert name in ext
    for name in ("seed000", "seed001", "extended"):
        for schema in toolset(name).schemas():
            assert schema["type"] == "function"
            fn = schema["function"]
            assert fn["name"] and fn["description"]
            assert fn["parameters"]["type"] == "object"
            assert set(fn["parameters"]["required"]) <= set(fn["parameters"]["properties"])
    with pytest.raises(ValueError, match="unknown tool set"):
        toolset("seed999")


@pytest.mark.parametrize("box", [[500, 500], [400, 400, 600, 600], [[400, 400], [600, 600]], [600, 600, 400, 400], "[500, 500]"])
def test_click_element_three_formats_click_the_centre(box: Any) -> None:
    ctx, desk = make()
    out = call("click_element", {"label": "middle", "box": box}, ctx)
    assert out.payload["ok"] is True and out.acted
    assert out.payload["point"] == [500, 500] and out.payload["label"] == "middle"
    # 500/1000 of 1920 x 1080 -> (960, 540): the documented norm->physical formula.
    assert out.action_record == {"kind": "click", "x": 960, "y": 540, "button": "left", "count": 1, "label": "middle"}
    assert out.action == Click((960, 540), "left", 1, label="middle")
    assert out.action is not None and out.action.source == parse_box(box)
    assert next(e for e in desk.events if e["action"] == "click")["x"] == 960


def test_mapping_with_offset_monitor() -> None:
    ctx, _ = make()
    ctx.mapping = Mapping(Rect(-1920, 200, 1920, 1080), 1536, 864)
    out = call("click_element", {"label": "x", "box": [1000, 0]}, ctx)
    assert (out.action_record["x"], out.action_record["y"]) == (-1, 200)


@pytest.mark.parametrize(
    ("args", "kind"),
    [
        ({"box": [1, 2]}, "missing_label"),
        ({"label": "  ", "box": [1, 2]}, "missing_label"),
        ({"label": 5, "box": [1, 2]}, "invalid_args"),
        ({"label": "x"}, "missing_box"),
        ({"label": "x", "box": []}, "missing_box"),
        ({"label": "x", "box": [1, 2, 3]}, "invalid_box"),
        ({"label": "x", "box": "left side"}, "invalid_box"),
        ({"label": "x", "box": [True, False]}, "invalid_box"),
        ({"label": "x", "box": [1, float("nan")]}, "invalid_box"),
    ],
)
def test_click_element_errors(args: dict[str, Any], kind: str) -> None:
    ctx, desk = make()
    assert error_type(call("click_element", args, ctx)) == kind
    assert not desk.events  # nothing was sent


def test_type_text_exact_and_errors() -> None:
    ctx, desk = make()
    text = "Grüße, 世界! ✓ 🚀 tab\there"
    out = call("type_text", {"text": text}, ctx)
    assert out.payload == {"ok": True, "action": "type_text", "typed": len(text)}
    assert "".join(e["text"] for e in desk.events if e["action"] == "type") == text
    for args, kind in (({}, "empty_text"), ({"text": ""}, "empty_text"), ({"text": 42}, "invalid_args")):
        assert error_type(call("type_text", args, make()[0])) == kind


def test_type_text_stops_between_chunks() -> None:
    ctx, desk = make(type_chunk=4)
    stop_after = threading.Event()
    original = desk.type_text

    def typing(chunk: str) -> None:
        original(chunk)
        ctx.stop.set()  # Ctrl+C arrives while the first chunk is being typed
        stop_after.set()

    desk.type_text = typing  # type: ignore[method-assign]
    out = call("type_text", {"text": "abcdefghijkl"}, ctx)
    assert out.payload["typed"] == 4 and out.payload["interrupted"] is True


def test_press_key_and_errors() -> None:
    ctx, desk = make()
    out = call("press_key", {"key": "Ctrl + Shift + T"}, ctx)
    assert out.payload == {"ok": True, "action": "press_key", "key": "ctrl+shift+t"}
    # The hands get the combo the policy checked and the record keeps (the same keys:
    # test_act.py::test_canonical_key_names_press_the_same_keys_as_the_models_spelling).
    assert desk.events[-1] == {"action": "key", "key": "ctrl+shift+t"}
    assert call("press_key", {"key": ["ctrl", "c"]}, make()[0]).payload["key"] == "ctrl+c"
    assert error_type(call("press_key", {}, make()[0])) == "missing_key"
    assert error_type(call("press_key", {"key": ""}, make()[0])) == "missing_key"
    assert error_type(call("press_key", {"key": 13}, make()[0])) == "invalid_args"
    bad = call("press_key", {"key": "ctrl+entr"}, make()[0])
    assert error_type(bad) == "invalid_key" and "enter" in bad.payload["error"]["message"]


def test_scroll_at_position() -> None:
    ctx, _ = make()
    out = call("scroll_at_position", {"box": [250, 750], "amount": 3}, ctx)
    assert out.action_record == {"kind": "scroll", "x": 480, "y": 810, "dy": 3, "dx": 0}
    assert out.payload["direction"] == "down"
    assert error_type(call("scroll_at_position", {"box": [1, 1], "amount": "lots"}, make()[0])) == "invalid_args"
    assert error_type(call("scroll_at_position", {"box": [1, 1], "amount": 0}, make()[0])) == "invalid_args"
    assert error_type(call("scroll_at_position", {}, make()[0])) == "missing_box"


def test_observe_and_unknown_and_parse_errors() -> None:
    ctx, _ = make()
    out = call("observe_screen", {}, ctx)
    assert out.payload == {"ok": True} and out.observe and not out.acted
    unknown = call("open_browser", {}, make()[0])
    assert error_type(unknown) == "unknown_tool" and "click_element" in unknown.payload["error"]["message"]
    assert error_type(call("", None, make()[0])) == "unknown_tool"
    assert error_type(call("click_element", None, make()[0], parse_error=("invalid_json", "not JSON"))) == "invalid_json"
    assert error_type(call("click_element", None, make()[0])) == "invalid_args"


def test_seed001_tools() -> None:
    ctx, desk = make()
    out = call("move_mouse", {"x": 1500, "y": "250"}, ctx, "seed001")
    assert out.payload == {"ok": True, "action": "move_mouse", "x": 1000, "y": 250, "screen_w": 1920, "screen_h": 1080}
    assert desk.pointer == (1919, 270)
    out = call("click_mouse", {}, ctx, "seed001")
    assert out.action_record == {"kind": "click", "x": 1919, "y": 270, "button": "left", "count": 1}
    out = call("scroll_down", {}, ctx, "seed001")
    assert out.action_record["dy"] == 1 and out.action_record["x"] == 1919
    out = call("take_screenshot", {}, ctx, "seed001")
    assert out.observe
    assert error_type(call("move_mouse", {"x": 5}, make()[0], "seed001")) == "invalid_args"
    assert error_type(call("move_mouse", {"x": "left", "y": 5}, make()[0], "seed001")) == "invalid_args"
    assert error_type(call("click_element", {"label": "x", "box": [1, 1]}, make()[0], "seed001")) == "unknown_tool"


def test_extended_tools() -> None:
    ctx, desk = make()
    out = call("double_click", {"label": "file", "box": [100, 100]}, ctx, "extended")
    assert out.action_record["count"] == 2 and out.payload["action"] == "double_click"
    out = call("right_click", {"label": "file", "box": [100, 100], "hold": "ctrl"}, ctx, "extended")
    assert out.action_record["button"] == "right" and out.action_record["hold"] == "ctrl"
    assert [e for e in desk.events if e["action"] == "click"][-1]["held"] == ["ctrl"]
    assert error_type(call("click_element", {"label": "x", "box": [1, 1], "hold": "ctlr"}, make()[0], "extended")) == "invalid_key"
    out = call("drag", {"start": [100, 100], "end": [900, 900]}, ctx, "extended")
    assert out.action_record["start"] == [192, 108] and out.action_record["end"] == [1728, 972]
    assert error_type(call("drag", {"start": [1, 1]}, make()[0], "extended")) == "missing_box"
    for direction, (dy, dx) in {"up": (-2, 0), "down": (2, 0), "left": (0, -2), "right": (0, 2)}.items():
        out = call("scroll", {"box": [500, 500], "direction": direction, "amount": 2}, make()[0], "extended")
        assert (out.action_record["dy"], out.action_record["dx"]) == (dy, dx)
    assert error_type(call("scroll", {"box": [1, 1], "direction": "sideways"}, make()[0], "extended")) == "invalid_args"
    out = call("hold_key", {"key": "shift", "seconds": 0.01}, make()[0], "extended")
    assert out.payload["key"] == "shift"
    assert error_type(call("hold_key", {"key": "shift", "seconds": 60}, make()[0], "extended")) == "invalid_args"
    assert error_type(call("hold_key", {}, make()[0], "extended")) == "missing_key"
    out = call("wait", {"seconds": 0.01}, make()[0], "extended")
    assert out.observe and out.payload["seconds"] == 0.01
    out = call("zoom", {"box": [100, 200, 300, 400]}, make()[0], "extended")
    assert out.zoom is not None and out.zoom.as_list() == [100, 200, 300, 400] and out.observe
    assert error_type(call("zoom", {"box": [100, 200]}, make()[0], "extended")) == "invalid_box"


def test_policy_denial_and_os_failure() -> None:
    def policy(action: Action) -> None:
        if action == KeyPress("alt+f4"):
            raise ActionDeniedError("alt+f4 is blocked by the policy", rule="keys")

    ctx, desk = make(policy=policy)
    denied = call("press_key", {"key": "alt+F4"}, ctx)
    assert error_type(denied) == "policy_denied" and not desk.events

    class Broken(SimulatedDesktop):
        def click(self, *a: Any, **k: Any) -> None:
            raise InputError("XTest refused the event", call="XTestFakeButtonEvent")

    broken = Broken()
    failed = call("click_element", {"label": "x", "box": [1, 1]}, ToolContext(hands=broken, mapping=MAPPING))
    assert error_type(failed) == "action_failed" and "XTest" in failed.payload["error"]["message"]


def test_error_vocabulary_is_the_seeds() -> None:
    seeds = {"missing_label", "missing_box", "invalid_box", "invalid_args", "invalid_json", "empty_text",
             "missing_key", "invalid_key", "unknown_tool", "too_many_tool_calls"}
    assert seeds <= set(ERROR_TYPES)


def test_no_effect_tracker() -> None:
    tracker = NoEffectTracker(3)
    sig = signature_of("click_element", {"box": [1, 2], "label": "x"})
    assert sig == signature_of("click_element", {"label": "x", "box": [1, 2]})
    assert [tracker.note(sig, False) for _ in range(3)] == [1, 2, 3]
    assert tracker.warning(2) is None and "3 times" in (tracker.warning(3) or "")
    assert tracker.note(sig, True) == 0
    assert tracker.note("other", False) == 1 and tracker.note(sig, False) == 1
    assert NoEffectTracker(0).warning(99) is None
