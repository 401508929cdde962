"""How calls travel: native tool calls and UI-TARS's text, behind the tool set."""

from __future__ import annotations

import json
from itertools import count

from deskpilot.agent.client._history import History
from deskpilot.agent.client._toolcalls import ToolCall
from deskpilot.agent.tools._core import toolset
from deskpilot.agent.tools._protocol import NO_ACTION_REMINDER, NativeCalls, TextCalls
from deskpilot.agent.tools._uitars import UITARS_REMINDER


def ids() -> object:
    numbers = count(1)
    return lambda: f"call_{next(numbers)}"


def test_every_registered_tool_set_has_a_protocol() -> None:
    for name in ("seed000", "seed001", "extended", "qwen"):
        tools = toolset(name)
        assert isinstance(tools.protocol, NativeCalls) and tools.text_protocol is None
        assert tools.protocol.reminder == NO_ACTION_REMINDER
    for name in ("uitars", "uitars-1.0"):
        tools = toolset(name)
        assert isinstance(tools.protocol, TextCalls) and tools.text_protocol is not None
        assert tools.protocol.reminder == UITARS_REMINDER
        assert not tools.protocol.sends_tools and tools.protocol.runs_every_call and not tools.protocol.ends_on_text


def test_native_calls_are_the_replys_tool_calls_answered_as_tool_messages() -> None:
    native = NativeCalls()
    call = ToolCall(id="c1", name="press_key", arguments={"key": "enter"}, raw_arguments="{}")
    calls, from_text = native.read("Action: click(start_box='(1,2)')", [call], ids())  # type: ignore[arg-type]
    assert calls == [call] and from_text is False
    history = History("system")
    assert native.answer(history, [(call, {"ok": True})]) == ""
    last = history.messages[-1]
    assert last["role"] == "tool" and last["tool_call_id"] == "c1"


def test_text_calls_are_read_from_the_content_and_answered_as_text() -> None:
    text = toolset("uitars").protocol
    calls, from_text = text.read("Thought: go.\nAction: click(start_box='(10,20)')", [], ids())  # type: ignore[arg-type]
    assert from_text and [c.name for c in calls] == ["click"] and calls[0].source == "uitars"
    history = History("system")
    before = len(history.messages)
    said = text.answer(history, [(calls[0], {"ok": True, "point": [1, 2]})])
    assert len(history.messages) == before  # no tool message: there is no call id to answer
    assert said == "Result: click: " + json.dumps({"ok": True, "point": [1, 2]}, separators=(",", ":"))
    assert text.answer(history, []) == ""
    # A server that parsed the text into tool calls after all: those are the calls.
    native = ToolCall(id="n1", name="click", arguments={"start_box": [1, 2]}, raw_arguments="{}")
    assert text.read("", [native], ids()) == ([native], False)  # type: ignore[arg-type]
