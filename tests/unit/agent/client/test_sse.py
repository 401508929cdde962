"""SSE decoding and stream assembly: fragments anywhere, several calls, garbage, no [DONE]."""

from __future__ import annotations

import itertools

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from deskpilot.agent.client._sse import SSEDecoder, StreamAssembler, sse_events


def chunk(delta, finish=None, **extra):
    return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra}


def sse(*chunks, done=True):
    body = b"".join(b"data: " + orjson.dumps(c) + b"\n\n" for c in chunks)
    return body + (b"data: [DONE]\n\n" if done else b"")


def assemble(events, **kwargs):
    assembler = StreamAssembler(**kwargs)
    completed = []
    for event in events:
        completed.extend(assembler.feed(event))
    return assembler.finish(), completed


STREAM = sse(
    chunk({"role": "assistant", "content": ""}),
    chunk({"content": "<think>look"}),
    chunk({"content": "</think>Clicking."}),
    chunk({"tool_calls": [{"index": 0, "id": "call_", "type": "function",
                           "function": {"name": "click_", "arguments": ""}}]}),
    chunk({"tool_calls": [{"index": 0, "id": "abc", "function": {"name": "element", "arguments": '{"label": "O'}}]}),
    chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'K", "box": [1'}}]}),
    chunk({"tool_calls": [{"index": 0, "function": {"arguments": "0, 20]}"}}]}),
    chunk({"tool_calls": [{"index": 1, "id": "call_2", "type": "function",
                           "function": {"name": "press_key", "arguments": '{"key":'}}]}),
    chunk({"tool_calls": [{"index": 1, "function": {"arguments": ' "enter"}'}}]}),
    chunk({}, "tool_calls"),
    {"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [],
     "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}},
)


def test_fragmented_ids_names_arguments_and_two_calls_assemble():
    result, completed = assemble(sse_events(STREAM))
    assert result.content == "<think>look</think>Clicking."
    assert result.finish_reason == "tool_calls"
    assert result.usage == {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    assert result.done
    assert result.tool_calls == [
        {"id": "call_abc", "type": "function",
         "function": {"name": "click_element", "arguments": '{"label": "OK", "box": [10, 20]}'}},
        {"id": "call_2", "type": "function", "function": {"name": "press_key", "arguments": '{"key": "enter"}'}},
    ]
    assert [c["function"]["name"] for c in completed] == ["click_element", "press_key"]


def test_a_call_is_complete_as_soon_as_its_arguments_close():
    events = sse_events(STREAM)
    assembler = StreamAssembler()
    first_done_at = None
    for i, event in enumerate(events):
        if assembler.feed(event) and first_done_at is None:
            first_done_at = i
    # The first call completes with its last argument fragment (event 6),
    # before the second call starts and long before finish_reason / [DONE].
    assert first_done_at == 6


def test_byte_splits_anywhere_give_the_same_events():
    whole = sse_events(STREAM)
    for step in (1, 2, 3, 7, 64):
        decoder = SSEDecoder()
        events = []
        for i in range(0, len(STREAM), step):
            events.extend(decoder.feed(STREAM[i:i + step]))
        events.extend(decoder.close())
        assert events == whole, step


def test_crlf_and_multibyte_utf8_split_across_chunks():
    body = sse(chunk({"content": "héllo ✓"})).replace(b"\n", b"\r\n")
    decoder = SSEDecoder()
    events = []
    for i in range(len(body)):
        events.extend(decoder.feed(body[i:i + 1]))
    events.extend(decoder.close())
    result, _ = assemble(events)
    assert result.content == "héllo ✓"
    assert result.done


def test_missing_done_still_assembles_at_the_end():
    body = sse(chunk({"content": "Done."}), chunk({}, "stop"), done=False)
    result, _ = assemble(sse_events(body))
    assert result.content == "Done."
    assert result.finish_reason == "stop"
    assert not result.done


def test_last_event_without_blank_line_is_flushed():
    body = b'data: {"choices": [{"index": 0, "delta": {"content": "x"}}]}'
    assert len(sse_events(body)) == 1


def test_garbage_lines_comments_and_other_fields_are_skipped():
    body = (
        b": keep-alive\n\n"
        b"event: message\nid: 7\nretry: 10\n"
        b'data: {"choices": [{"index": 0, "delta": {"content": "a"}}]}\n\n'
        b"this is not sse\n\n"
        b"data: not json\n\n"
        b"data: [1, 2]\n\n"
        b'data: {"choices": [{"index": 0, "delta": {"content": "b"}, "finish_reason": "stop"}]}\n\n'
        b"data: [DONE]\n\n"
    )
    result, _ = assemble(sse_events(body))
    assert result.content == "ab"
    assert result.bad_events == 2
    assert result.done


def test_multi_line_data_is_joined():
    body = b'data: {"choices": [{"index": 0,\ndata:  "delta": {"content": "z"}}]}\n\n'
    result, _ = assemble(sse_events(body))
    assert result.content == "z"


def test_error_event_is_reported():
    body = b'data: {"error": {"message": "model crashed", "code": 500}}\n\n'
    result, _ = assemble(sse_events(body))
    assert result.error == {"message": "model crashed", "code": 500}


def test_llamacpp_error_field_and_event_error_are_reported():
    # llama.cpp 2025: a non-standard "error:" field at HTTP 200 (PR #16109), then [DONE]
    body = b'data: {"choices": []}\n\nerror: {"code":500,"message":"boom","type":"server_error"}\n\ndata: [DONE]\n\n'
    result, _ = assemble(sse_events(body))
    assert result.error == {"code": 500, "message": "boom", "type": "server_error"}
    # "event: error" + data (other servers), and a plain-text error field
    result, _ = assemble(sse_events(b'event: error\ndata: {"message": "overloaded"}\n\n'))
    assert result.error == {"message": "overloaded"}
    result, _ = assemble(sse_events(b"error: upstream closed\n\n"))
    assert result.error == "upstream closed"
    # an "event:" name on a normal chunk changes nothing
    result, _ = assemble(sse_events(b'event: message\ndata: {"choices": [{"index": 0, "delta": {"content": "ok"}}]}\n\n'))
    assert result.content == "ok" and result.error is None


def test_object_arguments_missing_index_and_missing_ids():
    counter = iter(range(1, 100))
    events = sse_events(sse(
        chunk({"tool_calls": [{"function": {"name": "type_text", "arguments": {"text": "hi"}}}]}),
        chunk({"tool_calls": [{"id": "b", "function": {"name": "press_key", "arguments": '{"key": "a"}'}}]}),
        chunk({}, "tool_calls"),
    ))
    result, completed = assemble(events, new_id=lambda: f"gen_{next(counter)}")
    assert [c["id"] for c in result.tool_calls] == ["gen_1", "b"]
    assert result.tool_calls[0]["function"]["arguments"] == '{"text":"hi"}'
    assert [c["id"] for c in completed] == ["gen_1", "b"]


def test_reasoning_content_and_only_choice_zero():
    events = sse_events(sse(
        {"choices": [{"index": 0, "delta": {"reasoning_content": "think "}},
                     {"index": 1, "delta": {"content": "other choice"}}]},
        chunk({"content": "answer"}, "stop"),
    ))
    result, _ = assemble(events)
    assert result.reasoning == "think "
    assert result.content == "answer"


def test_no_content_delta_gives_none_content():
    result, _ = assemble(sse_events(sse(chunk({"role": "assistant"}), chunk({}, "stop"))))
    assert result.content is None
    assert result.message() == {"role": "assistant", "content": None}


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=len(STREAM) - 1), max_size=12, unique=True))
def test_any_split_points_assemble_identically(cuts):
    expected, _ = assemble(sse_events(STREAM))
    decoder = SSEDecoder()
    assembler = StreamAssembler()
    points = [0, *sorted(cuts), len(STREAM)]
    for a, b in itertools.pairwise(points):
        for event in decoder.feed(STREAM[a:b]):
            assembler.feed(event)
    for event in decoder.close():
        assembler.feed(event)
    assert assembler.finish() == expected


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=400))
def test_arbitrary_bytes_never_crash(data):
    assembler = StreamAssembler()
    for event in sse_events(data):
        assembler.feed(event)
    result = assembler.finish()
    assert isinstance(result.tool_calls, list)
