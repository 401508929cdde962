"""The real local model server on 127.0.0.1, and ChatClient against it (no mocks).

Covers what a user meets: connection refused, retries on 500/429, timeouts, streamed and
non-streamed answers giving identical completions, faults, request validation, keep-alive,
and the pixel-reading policy.
"""

from __future__ import annotations

import asyncio
import io
import socket
from typing import Any

import httpx
import orjson
import pytest

from deskpilot.agent.client._chat import ChatClient, Completion
from deskpilot.agent.client._history import History
from deskpilot.errors import (
    ModelConnectionError,
    ModelHTTPError,
    ModelResponseError,
    ModelTimeoutError,
)
from deskpilot.rundir._exchange import ExchangeLog
from deskpilot.testing import (
    Fault,
    ModelServer,
    PixelPolicy,
    Reply,
    ScriptedPolicy,
    find_color,
    tool_call,
    validate_chat_request,
)

Image = pytest.importorskip("PIL.Image")

TOOLS = [
    {"type": "function", "function": {"name": name, "description": name,
                                      "parameters": {"type": "object", "properties": {}}}}
    for name in ("click_element", "type_text", "press_key", "move_mouse", "observe_screen")
]


def make_png(size=(320, 200), rect=(100, 50, 140, 70), color=(255, 0, 0)) -> bytes:
    im = Image.new("RGB", size, (236, 236, 236))
    if rect is not None:
        im.paste(color, rect)  # x1, y1, x2 (exclusive), y2 (exclusive)
    buf = io.BytesIO()
    im.save(buf, "PNG")
    return buf.getvalue()


def body(stream=False, **kwargs) -> bytes:
    h = History("You operate a desktop.", tools=TOOLS)
    h.add_task("click the red button")
    h.add_observation(make_png())
    return h.build_request(model="m", stream=stream, temperature=0.6, max_tokens=256, **kwargs)


def complete(server: ModelServer, payload: bytes, **kwargs: Any) -> Completion | Exception:
    on_tool_call = kwargs.pop("on_tool_call", None)

    async def main() -> Completion | Exception:
        kwargs.setdefault("backoff", 0.01)
        async with ChatClient(server.endpoint, "m", **kwargs) as client:
            try:
                return await client.complete(payload, on_tool_call=on_tool_call)
            except Exception as exc:
                return exc

    return asyncio.run(main())


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# -- client against the real server -------------------------------------------------------

def test_connection_refused_on_a_closed_port_is_actionable():
    endpoint = f"http://127.0.0.1:{closed_port()}/v1/chat/completions"

    async def main() -> Exception:
        async with ChatClient(endpoint, max_retries=1, backoff=0.01) as client:
            with pytest.raises(ModelConnectionError) as info:
                await client.complete(body())
            return info.value

    error = asyncio.run(main())
    assert str(error).startswith(f"no server at {endpoint}: is LM Studio")
    assert "after 2 attempts" in str(error)
    assert error.details["attempts"] == 2


def test_500_then_200_is_retried_to_success():
    with ModelServer(ScriptedPolicy([Fault.http(500, "CUDA out of memory"), Reply(content="Done.")])) as server:
        result = complete(server, body())
        assert isinstance(result, Completion)
        assert result.content == "Done." and result.attempts == 2
        assert [r.status for r in server.requests] == [500, 200]
        assert server.problems == []


def test_429_with_retry_after_waits_what_the_server_asked():
    # Retry-After is whole seconds (RFC 9110 delay-seconds = 1*DIGIT; "0.2" is invalid and
    # treated as absent, tests/unit/agent/client): the smallest wait a real server can ask.
    with ModelServer(ScriptedPolicy([Fault.http(429, "rate limited", retry_after=1), "ok"])) as server:
        result = complete(server, body(), backoff=5.0)
        assert isinstance(result, Completion)
        assert result.timings.retry_wait_s == 1.0  # Retry-After, not the 5 s backoff


def test_errors_after_all_retries_carry_the_server_message():
    with ModelServer(ScriptedPolicy([Fault.http(503, "Model is loading", style="lmstudio")] * 2)) as server:
        result = complete(server, body(), max_retries=1)
        assert isinstance(result, ModelHTTPError)
        assert result.status == 503 and "Model is loading" in str(result)


def test_timeout_becomes_model_timeout_error():
    with ModelServer(ScriptedPolicy([Fault.stall(3.0)])) as server:
        result = complete(server, body(), timeout=0.3)
        assert isinstance(result, ModelTimeoutError)
        assert "LMSTUDIO_TIMEOUT" in str(result)


def test_stall_after_headers_times_out_too():
    with ModelServer(ScriptedPolicy([Fault.stall_body(3.0)])) as server:
        result = complete(server, body(), timeout=0.3)
        assert isinstance(result, ModelTimeoutError)


REPLIES = [
    Reply(content="<think>the button is red</think>Clicking it.",
          tool_calls=[tool_call("click_element", {"label": "OK", "box": [375, 300]}, id="call_a")]),
    Reply(tool_calls=[("type_text", {"text": "héllo ✓ \"quoted\""}), ("press_key", {"key": "enter"})]),
    Reply(tool_calls=[("press_key", {"key": "tab"})], style="object_args"),
    Reply(tool_calls=[("press_key", {"key": "tab"}), ("type_text", {"text": "x"})], style="no_ids"),
    Reply(content="I will press enter.", tool_calls=[("press_key", {"key": "enter"})], style="content"),
    Reply(content="All done.", reasoning="the task is finished"),
    Reply(tool_calls=[tool_call("click_element", '{"box": [1, 2')]),  # invalid JSON arguments
]


@pytest.mark.parametrize("reply", REPLIES, ids=lambda r: r.style + ("-calls" if r.tool_calls else "-text"))
def test_stream_and_non_stream_give_identical_completions(reply):
    with ModelServer(ScriptedPolicy([reply, reply]), stream_piece=3) as server:
        plain = complete(server, body(stream=False))
        streamed = complete(server, body(stream=True))
        assert isinstance(plain, Completion) and isinstance(streamed, Completion)
        assert not plain.streamed and streamed.streamed
        for name in ("message", "content", "tool_calls", "finish_reason", "usage", "reasoning"):
            assert getattr(plain, name) == getattr(streamed, name), name
        assert server.problems == []


def test_streamed_tool_calls_reach_the_callback_before_the_stream_ends():
    reply = Reply(tool_calls=[("click_element", {"label": "OK", "box": [1, 2]}), ("press_key", {"key": "a"})])
    # The server cuts the connection right after the first call's fragments (role chunk,
    # name chunk, 3 argument pieces): the call was usable although the answer never finished.
    seen = []
    with ModelServer(ScriptedPolicy([Fault.truncated_stream(reply, after_chunks=5), "unused"]),
                     stream_piece=10) as server:
        result = complete(server, body(stream=True), on_tool_call=seen.append)
        assert [c.name for c in seen] == ["click_element"]
        assert seen[0].arguments == {"label": "OK", "box": [1, 2]}
        # ...and since the agent may already be acting on it, the request is not repeated.
        assert isinstance(result, ModelConnectionError)
        assert "not retried" in str(result)
        assert len(server.requests) == 1


def test_stream_cut_before_anything_usable_is_retried():
    reply = Reply(content="Done.")
    with ModelServer(ScriptedPolicy([Fault.truncated_stream(reply, after_chunks=1), reply])) as server:
        result = complete(server, body(stream=True))
        assert isinstance(result, Completion) and result.content == "Done." and result.attempts == 2


def test_stream_without_done_is_accepted():
    reply = Reply(tool_calls=[("press_key", {"key": "enter"})])
    with ModelServer(ScriptedPolicy([Fault.no_done(reply)])) as server:
        result = complete(server, body(stream=True))
        assert isinstance(result, Completion)
        assert [c.name for c in result.tool_calls] == ["press_key"]


@pytest.mark.parametrize("fault", [Fault.invalid_json(), Fault.drop()], ids=["invalid_json", "drop"])
def test_transient_garbage_is_retried(fault):
    with ModelServer(ScriptedPolicy([fault, "ok"])) as server:
        result = complete(server, body())
        assert isinstance(result, Completion) and result.attempts == 2


def test_wrong_content_type_and_empty_choices_end_in_clear_errors():
    with ModelServer(ScriptedPolicy([Fault.wrong_content_type()] * 2 + [Fault.empty_choices()])) as server:
        result = complete(server, body(), max_retries=1)
        assert isinstance(result, ModelResponseError) and "text/html" in str(result)
        result = complete(server, body(), max_retries=0)
        assert isinstance(result, ModelResponseError) and "without choices" in str(result)


def test_keep_alive_reuses_one_connection():
    async def main(server: ModelServer) -> None:
        async with ChatClient(server.endpoint) as client:
            for stream in (False, True) * 5:
                await client.complete(body(stream=stream))

    with ModelServer(ScriptedPolicy(["ok"], on_exhausted="repeat")) as server:
        asyncio.run(main(server))
        assert len(server.requests) == 10
        assert server.connections_opened == 1


def test_async_server_on_the_running_loop_and_model_listing():
    async def main() -> tuple[list[str], str]:
        async with ModelServer(ScriptedPolicy(["hi"]), model="qwen3-vl-8b-instruct") as server:
            client = ChatClient(server.endpoint, "qwen3-vl-8b-instruct")
            async with client:
                models = await client.models()
                h = History()
                h.add_user("hello")
                completion = await client.complete(h.build_request(model="qwen3-vl-8b-instruct"))
                return models, completion.content

    assert asyncio.run(main()) == (["qwen3-vl-8b-instruct"], "hi")


def test_exchange_log_against_the_real_server(tmp_path):
    log = ExchangeLog(tmp_path / "agent_run.jsonl")
    with ModelServer(ScriptedPolicy([Fault.http(500), Reply(tool_calls=[("press_key", {"key": "a"})])])) as server:
        result = complete(server, body(stream=True), exchange_log=log)
    log.close()
    assert isinstance(result, Completion)
    records = ExchangeLog.read(log.path)
    assert [(r["attempt"], r["status"], r["stream"]) for r in records] == [(1, 500, False), (2, 200, True)]
    assembled = records[1]["response"]["assembled"]
    assert assembled["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "press_key"
    url = records[1]["request"]["messages"][2]["content"][1]["image_url"]["url"]
    assert url.startswith("data:image/png;base64,<sha256:")
    assert records[1]["request"]["tools"]["names"][0] == "click_element"


# -- the server's own behaviour -------------------------------------------------------------

def post(server: ModelServer, payload: Any) -> httpx.Response:
    content = payload if isinstance(payload, bytes) else orjson.dumps(payload)
    return httpx.post(server.endpoint, content=content, timeout=10)


def test_valid_agent_request_is_recorded_with_its_images():
    with ModelServer(ScriptedPolicy(["ok"])) as server:
        response = post(server, body())
        assert response.status_code == 200
        [record] = server.requests
        assert record.problems == []
        assert record.roles == ["system", "user", "user"]
        assert record.tool_names[:2] == ["click_element", "type_text"]
        assert record.image_count == 1
        assert (record.last_image.width, record.last_image.height) == (320, 200)
        url = record.messages[2]["content"][1]["image_url"]["url"]
        assert url.startswith("data:image/png;base64,<sha256:")


def _request(messages, **extra) -> dict[str, Any]:
    return {"model": "m", "messages": messages, **extra}


GOOD_CALL = {"id": "c1", "type": "function", "function": {"name": "press_key", "arguments": '{"key": "a"}'}}


@pytest.mark.parametrize(
    ("payload", "needle"),
    [
        (b"{not json", "not JSON"),
        (_request([{"role": "user", "content": "x"}, {"role": "system", "content": "late"}]), "first message"),
        (_request([{"role": "user", "content": "x"}, {"role": "assistant", "content": "", "tool_calls": [GOOD_CALL]},
                   {"role": "user", "content": "y"}]), "before every tool call was answered"),
        (_request([{"role": "user", "content": "x"}, {"role": "tool", "tool_call_id": "zz", "content": "{}"}]),
         "answers no pending tool call"),
        (_request([{"role": "user", "content": "x"}, {"role": "assistant", "content": "", "tool_calls": [
            {**GOOD_CALL, "function": {"name": "press_key", "arguments": {"key": "a"}}}]},
                   {"role": "tool", "tool_call_id": "c1", "content": "{}"}]), "must be a JSON string"),
        (_request([{"role": "user", "content": [{"type": "image_url",
                                                   "image_url": {"url": "data:image/png;base64,@@@"}}]}]),
         "does not decode"),
        (_request([{"role": "user", "content": [{"type": "image_url",
                                                   "image_url": {"url": "data:image/png;base64,aGVsbG8="}}]}]),
         "neither PNG nor JPEG"),
        (_request([{"role": "user", "content": [{"type": "image_url",
                                                   "image_url": {"url": "http://x/y.png"}}]}]), "data: URL"),
        (_request([{"role": "user", "content": "x"}], tools=[{"type": "function", "function": {
            "name": "bad name!", "parameters": {"type": "object"}}}]), "not a valid tool name"),
        (_request([{"role": "user", "content": "x"}], tools=[{"type": "function", "function": {
            "name": "f", "parameters": {"type": "array"}}}]), "type 'object'"),
        (_request([{"role": "user", "content": "x"}], tools=TOOLS, tool_choice="sometimes"), "tool_choice"),
        (_request([{"role": "user", "content": "x"}], temperature=7), "temperature"),
        (_request([]), "non-empty list"),
    ],
)
def test_invalid_requests_get_400_with_an_openai_error_body(payload, needle):
    with ModelServer(ScriptedPolicy(["ok"])) as server:
        response = post(server, payload)
        assert response.status_code == 400
        message = response.json()["error"]["message"]
        assert needle in message
        assert any(needle in p for p in server.problems)


def test_truncated_png_is_caught():
    png = make_png()
    h = History()
    h.add_observation(png[:-20])
    with ModelServer(ScriptedPolicy(["ok"])) as server:
        assert post(server, h.build_request(model="m")).status_code == 400
        assert "truncated" in server.problems[0]


def test_client_sees_a_400_as_http_error_with_the_validation_message():
    h = History()
    h.add_user("x")
    h.add_message({"role": "tool", "tool_call_id": "nope", "content": "{}"})
    with ModelServer(ScriptedPolicy(["ok"])) as server:
        result = complete(server, h.build_request(model="m"))
        assert isinstance(result, ModelHTTPError) and result.status == 400
        assert "answers no pending tool call" in str(result)


def test_reject_invalid_false_answers_but_records_problems():
    with ModelServer(ScriptedPolicy(["ok"]), reject_invalid=False, model="served") as server:
        response = post(server, _request([{"role": "user", "content": "x"}]))
        assert response.status_code == 200
        assert "is not loaded" in server.problems[0]


def test_exhausted_script_fails_loudly():
    with ModelServer(ScriptedPolicy(["only one"])) as server:
        assert post(server, body()).status_code == 200
        response = post(server, body())
        assert response.status_code == 500
        assert "script exhausted" in response.json()["error"]["message"]


def test_routes_models_health_404_405():
    with ModelServer(ScriptedPolicy([]), model="qwen") as server:
        assert httpx.get(f"{server.url}/v1/models").json()["data"][0]["id"] == "qwen"
        assert httpx.get(f"{server.url}/health").status_code == 200
        assert httpx.get(f"{server.url}/nope").status_code == 404
        assert httpx.get(server.endpoint).status_code == 405


def test_chunked_request_bodies_are_read():
    def chunks():
        data = body()
        for i in range(0, len(data), 1000):
            yield data[i:i + 1000]

    with ModelServer(ScriptedPolicy(["ok"])) as server:
        response = httpx.post(server.endpoint, content=chunks(), timeout=10)
        assert response.status_code == 200
        assert server.requests[0].problems == []


def test_validate_chat_request_accepts_a_full_seed_conversation():
    h = History("sys", tools=TOOLS)
    h.add_task("task")
    h.add_observation(make_png())
    h.add_assistant({"role": "assistant", "content": "", "tool_calls": [GOOD_CALL, {**GOOD_CALL, "id": "c2"}]})
    h.add_tool_result("c1", {"ok": True}, name="press_key")
    h.add_tool_result("c2", {"ok": False, "error": {"type": "too_many_tool_calls", "message": "one per step"}})
    h.add_observation(make_png())
    problems, images = validate_chat_request(orjson.loads(h.build_request(model="m")))
    assert problems == []
    assert len(images) == 2


# -- the pixel-reading policy ---------------------------------------------------------------

def test_find_color_centre():
    cx, cy, x1, y1, x2, y2 = find_color(make_png(), (255, 0, 0))
    assert (x1, y1, x2, y2) == (100, 50, 139, 69)
    assert (cx, cy) == (119.5, 59.5)
    assert find_color(make_png(rect=None), (255, 0, 0)) is None


def _drive(server: ModelServer, png: bytes, turns: int) -> list[Completion]:
    async def main() -> list[Completion]:
        out = []
        h = History("sys", tools=TOOLS)
        h.add_task("click the red target, type, press enter")
        h.add_observation(png)
        async with ChatClient(server.endpoint) as client:
            for turn in range(turns):
                completion = await client.complete(h.build_request(model="m", stream=turn % 2 == 1))
                out.append(completion)
                h.add_assistant(completion.message)
                for call in completion.tool_calls:
                    h.add_tool_result(call.id, {"ok": True}, name=call.name)
                if not completion.tool_calls:
                    break
                h.add_observation(png)
        return out

    return asyncio.run(main())


def test_pixel_policy_clicks_the_target_centre_then_types_and_presses():
    with ModelServer(PixelPolicy((255, 0, 0), text="héllo wörld", key="enter")) as server:
        completions = _drive(server, make_png(), 6)
        assert server.problems == []
    calls = [(c.tool_calls[0].name, c.tool_calls[0].arguments) for c in completions if c.tool_calls]
    # centre pixel (119.5, 59.5) of a 320x200 image -> ((119.5+0.5)*1000/320, (59.5+0.5)*1000/200)
    assert calls == [
        ("click_element", {"label": "target", "box": [375, 300]}),
        ("type_text", {"text": "héllo wörld"}),
        ("press_key", {"key": "enter"}),
    ]
    assert completions[-1].tool_calls == [] and completions[-1].content.startswith("Done")


def test_pixel_policy_bbox_format_seed_001_steps_and_missing_target():
    policy = PixelPolicy((0, 0, 255), steps=("move", "click_mouse", "done"))
    with ModelServer(policy) as server:
        completions = _drive(server, make_png(color=(0, 0, 255)), 4)
    assert [c.tool_calls[0].name for c in completions if c.tool_calls] == ["move_mouse", "click_mouse"]
    assert completions[0].tool_calls[0].arguments == {"x": 375, "y": 300}

    with ModelServer(PixelPolicy(box_format="bbox")) as server:
        [first, *_] = _drive(server, make_png(), 1)
    assert first.tool_calls[0].arguments["box"] == [314, 252, 436, 348]

    with ModelServer(PixelPolicy()) as server:
        [only] = _drive(server, make_png(rect=None), 2)
    assert only.tool_calls == []
    assert "cannot find" in only.content and "(255, 0, 0)" in only.content


def test_pixel_policy_rejects_unknown_steps():
    with pytest.raises(ValueError, match="unknown PixelPolicy steps"):
        PixelPolicy(steps=("click", "dance"))


# -- the testserver command and its script format ----------------------------------------

def test_reply_from_json_formats_and_errors():
    from deskpilot.testing import reply_from_json

    assert reply_from_json("hi") == Reply(content="hi")
    reply = reply_from_json({"content": "x", "tool_calls": [["press_key", {"key": "a"}]], "style": "content"})
    assert isinstance(reply, Reply) and reply.tool_calls[0]["function"]["name"] == "press_key"
    fault = reply_from_json({"fault": "http", "status": 429, "retry_after": 1})
    assert isinstance(fault, Fault) and fault.status == 429 and fault.headers["retry-after"] == "1"
    assert reply_from_json({"fault": "truncated_stream", "reply": "x", "after_chunks": 3}).after_chunks == 3
    with pytest.raises(ValueError, match="unknown fault"):
        reply_from_json({"fault": "explode"})
    with pytest.raises(ValueError, match="unknown reply fields"):
        reply_from_json({"contnet": "typo"})


def test_testserver_command_serves_a_script(tmp_path):
    import subprocess
    import sys

    script = tmp_path / "script.json"
    script.write_bytes(orjson.dumps([{"fault": "http", "status": 503}, {"tool_calls": [["press_key", {"key": "a"}]]}]))
    proc = subprocess.Popen(
        [sys.executable, "-m", "deskpilot", "testserver", "--script", str(script)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        first = proc.stdout.readline()
        assert first.startswith("deskpilot test server: http://127.0.0.1:"), first
        endpoint = first.split()[3]

        async def main() -> Completion:
            async with ChatClient(endpoint, backoff=0.01) as client:
                return await client.chat([{"role": "user", "content": "go"}])

        completion = asyncio.run(main())
        assert [c.name for c in completion.tool_calls] == ["press_key"] and completion.attempts == 2
        assert proc.stdout.readline().startswith("#1 503")
        assert proc.stdout.readline().startswith("#2 200")
    finally:
        proc.terminate()
        proc.wait(10)


# -- the HTTP layer, byte by byte ----------------------------------------------------------

def _raw_exchange(server: ModelServer, data: bytes, *, pieces: int = 1, read_until_close: bool = False) -> bytes:
    import time

    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        step = max(1, len(data) // pieces)
        for i in range(0, len(data), step):
            sock.sendall(data[i:i + step])
            if pieces > 1:
                time.sleep(0.001)
        if not read_until_close:
            sock.shutdown(socket.SHUT_WR)
        out = b""
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return out
            out += chunk


def _post_bytes(payload: bytes, *, extra_headers: str = "") -> bytes:
    return (f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(payload)}\r\n{extra_headers}\r\n").encode() + payload


def test_pipelined_requests_are_answered_in_order():
    small = orjson.dumps(_request([{"role": "user", "content": "x"}]))
    with ModelServer(ScriptedPolicy(["first", "second"])) as server:
        out = _raw_exchange(server, _post_bytes(small) + _post_bytes(small, extra_headers="Connection: close\r\n"))
        assert out.count(b"HTTP/1.1 200 OK") == 2
        assert out.index(b"first") < out.index(b"second")
        assert server.connections_opened == 1


def test_body_arriving_in_small_pieces_and_chunked_encoding_split_anywhere():
    payload = body()
    with ModelServer(ScriptedPolicy(["a", "b"])) as server:
        out = _raw_exchange(server, _post_bytes(payload, extra_headers="Connection: close\r\n"), pieces=50)
        assert b"HTTP/1.1 200 OK" in out
        chunked = b"".join(b"%x\r\n%b\r\n" % (len(payload[i:i + 777]), payload[i:i + 777])
                           for i in range(0, len(payload), 777)) + b"0\r\n\r\n"
        head = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
                b"Connection: close\r\n\r\n")
        out = _raw_exchange(server, head + chunked, pieces=37)
        assert b"HTTP/1.1 200 OK" in out
        assert [r.problems for r in server.requests] == [[], []]
        assert server.requests[1].image_count == 1


def test_malformed_http_gets_a_clear_status():
    with ModelServer(ScriptedPolicy([])) as server:
        assert _raw_exchange(server, b"GARBAGE\r\n\r\n").startswith(b"HTTP/1.1 400")
        bad_length = b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: nope\r\n\r\n"
        assert b"bad content-length" in _raw_exchange(server, bad_length)
        huge = b"GET /health HTTP/1.1\r\nX-Pad: " + b"a" * 300_000 + b"\r\n\r\n"
        assert _raw_exchange(server, huge, read_until_close=True).startswith(b"HTTP/1.1 431")


def test_escaped_payloads_still_validate():
    # Encoders that escape "/" as "\/" cannot be cut out of the raw bytes: parsed normally.
    h = History()
    h.add_observation(make_png())
    escaped = h.build_request(model="m").replace(b"/", b"\\/")
    with ModelServer(ScriptedPolicy(["ok"])) as server:
        assert post(server, escaped).status_code == 200
        assert server.requests[0].image_count == 1
        assert server.requests[0].last_image.data.startswith(b"\x89PNG")


def test_validation_without_pybase64(monkeypatch):
    import deskpilot.testing._validate as validate_module

    monkeypatch.setattr(validate_module, "_pybase64", None)
    monkeypatch.setattr(validate_module, "_DESCRIBED", type(validate_module._DESCRIBED)())
    good = _request([{"role": "user", "content": [{"type": "image_url", "image_url": {
        "url": "data:image/png;base64," + __import__("base64").b64encode(make_png()).decode()}}]}])
    problems, images = validate_chat_request(good)
    assert problems == [] and images[0].data.startswith(b"\x89PNG")
    bad = _request([{"role": "user", "content": [{"type": "image_url", "image_url": {
        "url": "data:image/png;base64,@@@@"}}]}])
    assert "does not decode" in validate_chat_request(bad)[0][0]
