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


def test_a_call_in_a_known_models_own_language_is_run_by_that_language() -> None:
    from deskpilot.agent.tools._core import speaking_toolset

    element, extended, uitars, qwen = (toolset(n) for n in ("seed000", "extended", "uitars", "qwen"))
    assert speaking_toolset(element, "computer_use", "native").name == "qwen"
    assert speaking_toolset(element, "click", "uitars").name == "uitars"
    # UI-TARS's "scroll" is not extended's "scroll": the language decides, not the name.
    assert speaking_toolset(extended, "scroll", "uitars").name == "uitars"
    assert speaking_toolset(extended, "scroll", "native") is extended
    assert speaking_toolset(uitars, "click", "uitars") is uitars
    assert speaking_toolset(qwen, "computer_use", "native") is qwen
    assert speaking_toolset(element, "no_such_tool", "native") is element


def test_native_calls_read_uitars_text_and_answer_it_as_text() -> None:
    native = NativeCalls()
    calls, from_text = native.read("Thought: go.\nAction: click(start_box='(10,20)')", [], ids())  # type: ignore[arg-type]
    assert from_text and [c.source for c in calls] == ["uitars"]
    assert native.read("Thought: go.\nAction: click(start_box='nowhere')", [], ids()) == ([], False)  # type: ignore[arg-type]
    assert native.read("The task is done.", [], ids()) == ([], False)  # type: ignore[arg-type]
    history = History("system")
    before = len(history.messages)
    said = native.answer(history, [(calls[0], {"ok": True})])
    assert said.startswith("Result: click: ") and len(history.messages) == before
