"""Hypothesis fuzzing of everything the model (or a hostile server) controls.

Targets: box parsing, tool-call parsing (native entries and ``<tool_call>`` text), tool
execution (every call answered with ``{ok: true}`` or a typed error payload), the
stateless JSON protocol, SSE decoding/assembly, and the HTTP client over arbitrary
response bodies (JSON and SSE). Property everywhere: no crash, and every bad input ends
in a typed answer (an error payload type from the tools' vocabulary, a Rejection with a
reason, or a ModelError subclass with a message).

``FUZZ_EXAMPLES`` (env) scales the number of cases; the counts run are printed with -s.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections import Counter
from typing import Any

import httpx
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deskpilot._errors import InvalidBoxError, ModelError
from deskpilot._untrusted import terminal_text, token_count
from deskpilot.agent.client._chat import ChatClient
from deskpilot.agent.client._sse import SSEDecoder, StreamAssembler
from deskpilot.agent.client._toolcalls import parse_message_tool_calls, split_content_tool_calls
from deskpilot.agent.modes.stateless._protocol import parse_vlm_output
from deskpilot.agent.tools._core import ERROR_TYPES, ToolContext, execute_tool_call, toolset
from deskpilot.geometry import parse_box
from deskpilot.rundir._writer import dumps_json
from deskpilot.testing._desktop import SimulatedDesktop

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "300"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
COUNTS: Counter[str] = Counter()

json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6), st.floats(allow_nan=True),
                         st.text(max_size=20))
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=5), st.dictionaries(st.text(max_size=8), inner, max_size=5)),
    max_leaves=15,
)
numbers = st.one_of(st.integers(-5000, 5000), st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=6))
boxes = st.one_of(
    json_values,
    st.lists(numbers, max_size=6),
    st.lists(st.lists(numbers, max_size=3), max_size=3),
    st.builds(lambda v: json.dumps(v), st.lists(st.integers(-100, 2000), max_size=5)),
)


@pytest.fixture(scope="module", autouse=True)
def _report() -> Any:
    yield
    if COUNTS:
        print("\nfuzz cases: " + ", ".join(f"{k}={v}" for k, v in sorted(COUNTS.items())))


# ------------------------------------------------------------------- boxes


@FUZZ
@given(boxes)
def test_parse_box_returns_a_clamped_box_or_a_typed_error(value: Any) -> None:
    COUNTS["box"] += 1
    try:
        box = parse_box(value)
    except InvalidBoxError as exc:
        assert exc.kind in ("missing_box", "invalid_box") and str(exc)
        return
    for v in box.as_list():
        assert 0 <= v <= 1000


# ------------------------------------------------------------------- tool calls

TOOLS = toolset("extended")
tool_names = st.one_of(st.sampled_from(sorted(TOOLS.names)), st.text(max_size=12))
arg_values = st.one_of(json_values, boxes, st.text(max_size=40))
arguments = st.one_of(
    st.dictionaries(st.sampled_from(["label", "box", "text", "key", "start", "end", "direction", "amount",
                                     "seconds", "hold", "x", "y", "justification"]), arg_values, max_size=5),
    json_values,
    st.text(max_size=60),
    st.builds(lambda d: json.dumps(d)[: len(json.dumps(d)) // 2], st.dictionaries(st.text(max_size=5), json_scalars)),
)
entries = st.one_of(
    st.builds(lambda i, n, a: {"id": i, "type": "function", "function": {"name": n, "arguments": a}},
              st.one_of(st.none(), st.text(max_size=8)), tool_names, arguments),
    st.builds(lambda n, a: {"name": n, "arguments": a}, tool_names, arguments),
    json_values,
)


def _ids() -> Any:
    counter = iter(range(10**9))
    return lambda: f"call_{next(counter)}"


def _ctx() -> ToolContext:
    desk = SimulatedDesktop()
    shot = desk.grab()
    return ToolContext(hands=desk, mapping=shot.mapping)


def _defuse(args: Any) -> Any:
    # wait/hold_key sleep for their "seconds": keep fuzzing fast without changing validation
    if isinstance(args, dict) and isinstance(args.get("seconds"), (int, float)) and not isinstance(args["seconds"], bool):
        args = {**args, "seconds": 0 if args["seconds"] >= 0 else args["seconds"]}
    return args


@FUZZ
@given(st.lists(entries, max_size=4))
def test_every_tool_call_gets_an_ok_or_a_typed_error_payload(raw_calls: list[Any]) -> None:
    COUNTS["tool_calls"] += 1
    calls = parse_message_tool_calls(raw_calls, new_id=_ids())
    assert len(calls) == len(raw_calls)

    async def run() -> None:
        ctx = _ctx()
        try:
            for call in calls:
                assert call.error in (None, "invalid_json", "invalid_args")
                parse_error = (call.error, call.error_message or call.error) if call.error else None
                outcome = await execute_tool_call(TOOLS, call.name, _defuse(call.arguments), ctx,
                                                  parse_error=parse_error)
                payload = outcome.payload
                orjson.dumps(payload)
                if payload["ok"] is not True:
                    assert payload["ok"] is False and payload["error"]["type"] in ERROR_TYPES
                    assert isinstance(payload["error"]["message"], str) and payload["error"]["message"]
                    COUNTS["typed_errors"] += 1
        finally:
            ctx.close()

    asyncio.run(run())


content_texts = st.one_of(
    st.text(max_size=200),
    st.builds(lambda pre, body, post: f"{pre}<tool_call>{body}</tool_call>{post}",
              st.text(max_size=30), st.one_of(st.text(max_size=80), json_values.map(json.dumps)), st.text(max_size=30)),
    st.builds(lambda n, a: f'<tool_call>{{"name": {json.dumps(n)}, "arguments": {json.dumps(a)}}}</tool_call>',
              tool_names, json_values),
)


@FUZZ
@given(content_texts)
def test_tool_calls_printed_in_content_parse_without_crashing(text: str) -> None:
    COUNTS["content_calls"] += 1
    remaining, calls = split_content_tool_calls(text, new_id=_ids())
    assert isinstance(remaining, str)
    for call in calls:
        assert call.source == "content" and call.error in (None, "invalid_json", "invalid_args")


# ------------------------------------------------------------------- stateless protocol

action_items = st.dictionaries(
    st.sampled_from(["name", "action", "type", "x1", "y1", "x2", "y2", "x", "y", "text", "keys", "key",
                     "direction", "amount", "label"]),
    st.one_of(json_scalars, st.sampled_from(["click", "Right-Click", "DRAG", "type", "key", "scroll", "done",
                                             "move", "double_click", "teleport"])),
    max_size=7,
)
vlm_objects = st.fixed_dictionaries(
    {},
    optional={"observation": json_values, "bboxes": st.one_of(json_values, st.lists(action_items, max_size=10)),
              "actions": st.one_of(json_values, st.lists(action_items, max_size=12))},
)
vlm_texts = st.one_of(
    st.text(max_size=300),
    vlm_objects.map(json.dumps),
    st.builds(lambda pre, obj, post: f"{pre}```json\n{json.dumps(obj)}\n```{post}", st.text(max_size=20), vlm_objects,
              st.text(max_size=20)),
    st.builds(lambda obj, cut: json.dumps(obj)[:cut], vlm_objects, st.integers(0, 200)),
    st.builds(lambda pre, obj: f"<think>{pre}</think>{json.dumps(obj)},", st.text(max_size=20), vlm_objects),
    # Lone surrogate escapes only the standard library's JSON reader accepts (issue 14).
    st.builds(lambda obs, cp, acts: f'{{"observation": {json.dumps(obs)[:-1]}\\u{cp:04x}", "actions": {json.dumps(acts)}}}',
              st.text(max_size=20), st.integers(0xD800, 0xDFFF), st.lists(action_items, max_size=3)),
)


@FUZZ
@given(vlm_texts)
def test_stateless_replies_parse_without_crashing_and_reject_with_reasons(text: str) -> None:
    COUNTS["stateless"] += 1
    out = parse_vlm_output(text)
    assert isinstance(out.observation, str)
    assert len(out.actions) <= 8 and len(out.bboxes) <= 8
    for rejection in out.rejected:
        assert rejection.reason and rejection.kind in ("json", "observation", "action", "bbox")
    for action in out.actions:
        for attr in ("x1", "y1", "x2", "y2"):
            value = getattr(action, attr, None)
            assert value is None or 0 <= value <= 1000
    dumps_json(out.as_record())  # what the run files are written with (UTF-8, no lone surrogates)


# ------------------------------------------------------------------- SSE

def _chunk(delta: dict[str, Any], finish: str | None = None) -> str:
    return json.dumps({"id": "x", "object": "chat.completion.chunk",
                       "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})


deltas = st.one_of(
    st.builds(lambda t: {"content": t}, st.text(max_size=20)),
    st.builds(lambda i, n, a: {"tool_calls": [{"index": i, "id": f"c{i}", "function": {"name": n, "arguments": a}}]},
              st.integers(0, 3), st.one_of(st.none(), tool_names), st.text(max_size=20)),
    st.builds(lambda i, a: {"tool_calls": [{"index": i, "function": {"arguments": a}}]}, st.integers(-2, 3),
              st.text(max_size=20)),
    json_values.map(lambda v: v if isinstance(v, dict) else {"content": v}),
)
events = st.one_of(deltas.map(_chunk), json_values.map(json.dumps), st.text(max_size=30), st.just("[DONE]"))


@FUZZ
@given(st.lists(events, max_size=12), st.lists(st.integers(1, 50), max_size=10), st.sampled_from(["\n\n", "\r\n\r\n"]))
def test_sse_decoding_and_assembly_survive_any_stream(evts: list[str], cuts: list[int], sep: str) -> None:
    COUNTS["sse"] += 1
    body = "".join(f"data: {e}{sep}" for e in evts).encode()
    decoder = SSEDecoder()
    assembler = StreamAssembler(new_id=_ids())
    pos = 0
    for cut in [*cuts, len(body)]:
        piece, pos = body[pos : pos + cut], pos + cut
        for data in decoder.feed(piece):
            assembler.feed(data)
    for data in decoder.close():
        assembler.feed(data)
    message = assembler.finish()
    assert isinstance(message.tool_calls, list)
    calls = parse_message_tool_calls(message.tool_calls, new_id=_ids())
    for call in calls:
        assert call.error in (None, "invalid_json", "invalid_args")


# ------------------------------------------------------------------- the HTTP client

bodies = st.one_of(
    st.binary(max_size=200),
    json_values.map(lambda v: json.dumps(v).encode()),
    st.builds(lambda m: json.dumps({"choices": [{"message": m, "finish_reason": "stop"}]}).encode(),
              st.one_of(json_values, st.fixed_dictionaries({"role": st.just("assistant")},
                                                           optional={"content": json_values,
                                                                     "tool_calls": st.lists(entries, max_size=3)}))),
)
content_types = st.sampled_from(["application/json", "text/event-stream", "text/html", "text/plain", ""])
statuses = st.sampled_from([200, 200, 200, 201, 204, 400, 404, 429, 500, 502, 503])


@FUZZ
@given(bodies, content_types, statuses, st.booleans(), st.lists(events, max_size=6))
def test_the_client_answers_any_response_with_a_completion_or_a_model_error(
    body: bytes, content_type: str, status: int, stream: bool, sse: list[str]
) -> None:
    COUNTS["client"] += 1
    if stream and content_type == "text/event-stream":
        body = "".join(f"data: {e}\n\n" for e in sse).encode()

    def handler(request: httpx.Request) -> httpx.Response:
        headers = {"content-type": content_type} if content_type else {}
        if status == 429:
            headers["retry-after"] = "0"
        return httpx.Response(status, content=body, headers=headers)

    async def run() -> None:
        client = ChatClient("http://127.0.0.1:9/v1/chat/completions", "m", max_retries=1, backoff=0.0,
                            stream=stream, transport=httpx.MockTransport(handler))
        try:
            completion = await client.chat([{"role": "user", "content": "hi"}])
        except ModelError as exc:
            assert str(exc)
            COUNTS["client_errors"] += 1
        else:
            for call in completion.tool_calls:
                assert call.error in (None, "invalid_json", "invalid_args")
        finally:
            await client.aclose()

    asyncio.run(run())


# ------------------------------------------------------------------- model text and numbers

CONTROL_CHARS = frozenset(chr(c) for c in (*range(0x20), 0x7F, *range(0x80, 0xA0)) if c not in (0x09, 0x0A))
hostile_texts = st.one_of(
    st.text(max_size=200),
    st.lists(st.sampled_from(["\x1b]52;c;", "aGk=", "\x07", "\x1b\\", "\x1b[", "31m", "\x9b", "\x9d", "\r", "\u202e",
                              "\ud800", "ok", "\n"]), max_size=20).map("".join),
)


@FUZZ
@given(hostile_texts, st.booleans())
def test_model_text_reaches_the_terminal_without_control_characters(text: str, one_line: bool) -> None:
    COUNTS["terminal_text"] += 1
    shown = terminal_text(text, one_line=one_line)
    assert not CONTROL_CHARS.intersection(shown)
    assert ("\n" in shown) is (not one_line and "\n" in text)
    shown.encode("utf-8")  # no lone surrogate either


@FUZZ
@given(json_values)
def test_any_usage_value_counts_as_a_non_negative_int(value: Any) -> None:
    COUNTS["usage"] += 1
    count = token_count(value)
    assert type(count) is int and 0 <= count < 10**15
    orjson.dumps({"prompt_tokens": count})
