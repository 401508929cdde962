"""Tool-call decoding: argument forms, error payload types, the content fallback, think tags."""

from __future__ import annotations

import itertools

import pytest

from deskpilot.agent.client._toolcalls import (
    ToolCall,
    extract_think,
    parse_arguments,
    parse_content_tool_calls,
    parse_message_tool_calls,
    split_content_tool_calls,
    strip_think,
)


def ids():
    counter = itertools.count(1)
    return lambda: f"call_{next(counter)}"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ('{"label": "OK", "box": [1, 2]}', {"label": "OK", "box": [1, 2]}),
        ({"text": "héllo"}, {"text": "héllo"}),
        (None, {}),
        ("", {}),
        ("   ", {}),
        ("null", {}),
        (b'{"key": "enter"}', {"key": "enter"}),
    ],
)
def test_arguments_decode_from_string_object_or_nothing(raw, expected):
    arguments, raw_text, error, message = parse_arguments(raw)
    assert arguments == expected
    assert error is None and message is None
    assert isinstance(raw_text, str)


def test_object_arguments_are_reserialized_as_json_string():
    _, raw_text, _, _ = parse_arguments({"box": [10, 20]})
    assert raw_text == '{"box":[10,20]}'


@pytest.mark.parametrize(
    ("raw", "kind"),
    [
        ('{"label": "OK", "box": [1, 2]', "invalid_json"),
        ("label=OK", "invalid_json"),
        ("[1, 2]", "invalid_args"),
        ('"just a string"', "invalid_args"),
        ("42", "invalid_args"),
        (42, "invalid_args"),
        ([1, 2], "invalid_args"),
    ],
)
def test_bad_arguments_become_seed_error_types(raw, kind):
    arguments, _, error, message = parse_arguments(raw)
    assert arguments is None
    assert error == kind
    assert message and "argument" in message


def test_native_tool_calls_keep_ids_and_fill_missing_ones():
    calls = parse_message_tool_calls(
        [
            {"id": "abc", "type": "function", "function": {"name": "click_element", "arguments": '{"box": [5, 5]}'}},
            {"type": "function", "function": {"name": "type_text", "arguments": {"text": "hi"}}},
            {"id": "", "function": {"name": "press_key", "arguments": None}},
        ],
        new_id=ids(),
    )
    assert [c.id for c in calls] == ["abc", "call_1", "call_2"]
    assert [c.name for c in calls] == ["click_element", "type_text", "press_key"]
    assert calls[1].arguments == {"text": "hi"}
    assert calls[2].arguments == {}
    assert [c.index for c in calls] == [0, 1, 2]
    assert all(c.ok for c in calls)


def test_native_call_with_invalid_json_is_kept_with_its_error():
    [call] = parse_message_tool_calls(
        [{"id": "x", "function": {"name": "click_element", "arguments": '{"box": [1,'}}], new_id=ids()
    )
    assert call.error == "invalid_json"
    assert call.arguments is None
    assert call.raw_arguments == '{"box": [1,'
    assert call.as_dict()["error"]["type"] == "invalid_json"


def test_entries_that_are_not_objects_still_get_an_answerable_call():
    calls = parse_message_tool_calls(["garbage", {"id": "a", "function": {"arguments": "{}"}}], new_id=ids())
    assert calls[0].error == "invalid_args" and calls[0].id == "call_1"
    assert calls[1].error == "invalid_args" and "no function name" in (calls[1].error_message or "")


def test_qwen_tool_call_blocks_in_content_are_parsed():
    content = (
        "<think>the OK button is at the bottom</think>\nI will click it.\n"
        '<tool_call>\n{"name": "click_element", "arguments": {"label": "OK", "box": [500, 900]}}\n</tool_call>'
    )
    rest, calls = split_content_tool_calls(content, new_id=ids())
    assert len(calls) == 1
    assert calls[0].name == "click_element"
    assert calls[0].arguments == {"label": "OK", "box": [500, 900]}
    assert calls[0].id == "call_1"
    assert calls[0].source == "content"
    assert "<tool_call>" not in rest
    assert "I will click it." in rest
    assert "<think>the OK button is at the bottom</think>" in rest


def test_several_content_calls_and_string_arguments():
    content = (
        '<tool_call>{"name": "type_text", "arguments": "{\\"text\\": \\"a\\"}"}</tool_call>\n'
        '<tool_call>{"name": "press_key", "parameters": {"key": "enter"}}</tool_call>'
    )
    calls = parse_content_tool_calls(content, new_id=ids())
    assert [(c.name, c.arguments) for c in calls] == [("type_text", {"text": "a"}), ("press_key", {"key": "enter"})]
    assert [c.id for c in calls] == ["call_1", "call_2"]


def test_unterminated_tool_call_block_at_the_end_is_parsed():
    calls = parse_content_tool_calls('<tool_call>{"name": "press_key", "arguments": {"key": "tab"}}', new_id=ids())
    assert [(c.name, c.arguments) for c in calls] == [("press_key", {"key": "tab"})]


def test_broken_tool_call_block_is_an_invalid_json_call():
    [call] = parse_content_tool_calls('<tool_call>{"name": "click_element", "arguments": {"box": [1,</tool_call>',
                                      new_id=ids())
    assert call.error == "invalid_json"
    assert call.name == "click_element"


def test_fenced_json_and_bare_object_fallbacks():
    fenced = 'Sure:\n```json\n{"name": "press_key", "arguments": {"key": "enter"}}\n```'
    assert [c.name for c in parse_content_tool_calls(fenced, new_id=ids())] == ["press_key"]
    bare = '{"name": "scroll_at_position", "arguments": {"box": [1, 2]}}'
    assert [c.arguments for c in parse_content_tool_calls(bare, new_id=ids())] == [{"box": [1, 2]}]


@pytest.mark.parametrize(
    "content",
    [
        "The task is complete.",
        '{"observation": "a dialog", "actions": []}',  # seed 004's protocol is not a tool call
        "<think>maybe <tool_call>{\"name\": \"x\", \"arguments\": {}}</tool_call></think>Done.",
        "",
    ],
)
def test_plain_answers_are_not_tool_calls(content):
    rest, calls = split_content_tool_calls(content, new_id=ids())
    assert calls == []
    assert rest == content


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("<think>plan</think>Answer", "Answer"),
        ("<think>a</think> one <think>b</think> two", "one  two"),
        ("reasoning without opening tag</think>\nAnswer", "Answer"),
        ("Answer <think>cut off by max_tokens", "Answer"),
        ("<think>\nmulti\nline\n</think>\n\nFinal", "Final"),
        ("no tags at all  ", "no tags at all"),
        (None, ""),
    ],
)
def test_strip_think(text, expected):
    assert strip_think(text) == expected


def test_extract_think_collects_every_form():
    assert extract_think("<think>a</think>x<think>b</think>") == "a\n\nb"
    assert extract_think("lead-in</think>answer") == "lead-in"
    assert extract_think("answer <think>unterminated") == "unterminated"
    assert extract_think("plain") == ""


def test_to_openai_is_the_history_form():
    call = ToolCall(id="c", name="press_key", arguments={"key": "a"}, raw_arguments='{"key":"a"}')
    assert call.to_openai() == {"id": "c", "type": "function",
                                "function": {"name": "press_key", "arguments": '{"key":"a"}'}}
