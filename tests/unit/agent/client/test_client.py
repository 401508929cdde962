"""ChatClient's retry state machine, error translation and parsing, over httpx.MockTransport.

The same behaviours against a real server on 127.0.0.1 are in
tests/integration/test_testserver.py.
"""

from __future__ import annotations

import asyncio
import datetime
import email.utils
from collections.abc import Callable

import httpx
import orjson
import pytest

from deskpilot.agent.client._chat import ChatClient, Completion, _retry_after, classify_http_error
from deskpilot.errors import (
    ModelConnectionError,
    ModelHTTPError,
    ModelResponseError,
    ModelTimeoutError,
)
from deskpilot.rundir._exchange import ExchangeLog

ENDPOINT = "http://model.test/v1/chat/completions"
BODY = orjson.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]})


def ok(content="Done.", **message) -> httpx.Response:
    return httpx.Response(200, json={
        "id": "x", "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content, **message},
                     "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
    })


def run(responses: list[Callable[[httpx.Request], httpx.Response] | httpx.Response | Exception],
        **kwargs) -> tuple[Completion | Exception, list[httpx.Request]]:
    seen: list[httpx.Request] = []
    queue = list(responses)

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        item = queue.pop(0)
        if isinstance(item, Exception):
            raise item
        if callable(item):
            return item(request)
        return item

    async def main() -> Completion | Exception:
        kwargs.setdefault("backoff", 0.001)
        async with ChatClient(ENDPOINT, "m", transport=httpx.MockTransport(handler), **kwargs) as client:
            try:
                return await client.complete(BODY, context={"turn": 7})
            except Exception as exc:  # returned for the assertions
                return exc

    return asyncio.run(main()), seen


def test_success_parses_message_and_sends_body_and_headers():
    result, seen = run([ok("<think>x</think>Done.")], api_key="sk-test")
    assert isinstance(result, Completion)
    assert result.content == "<think>x</think>Done."
    assert result.message == {"role": "assistant", "content": "<think>x</think>Done."}
    assert result.tool_calls == [] and result.finish_reason == "stop"
    assert result.usage == {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}
    assert result.attempts == 1 and not result.streamed
    assert seen[0].content == BODY
    assert seen[0].headers["authorization"] == "Bearer sk-test"
    assert seen[0].headers["content-type"] == "application/json"


@pytest.mark.parametrize("status", [500, 502, 503, 408, 429])
def test_transient_statuses_are_retried_then_succeed(status):
    result, seen = run([httpx.Response(status, json={"error": {"message": "busy"}}), ok()])
    assert isinstance(result, Completion)
    assert result.attempts == 2 and len(seen) == 2


def test_connection_errors_are_retried():
    result, _seen = run([httpx.ConnectError("refused"), httpx.RemoteProtocolError("closed"), ok()])
    assert isinstance(result, Completion) and result.attempts == 3


def test_retries_are_bounded_and_the_error_names_the_attempts():
    result, seen = run([httpx.Response(503, json={"error": "Model is loading"})] * 3, max_retries=2)
    assert isinstance(result, ModelHTTPError)
    assert len(seen) == 3
    assert result.status == 503
    assert "Model is loading" in str(result) and "after 3 attempts" in str(result)
    assert result.details["attempts"] == 3
    assert result.details["endpoint"] == ENDPOINT and result.details["model"] == "m"
    assert result.details["context"] == {"turn": 7}


@pytest.mark.parametrize(
    ("status", "body", "needle"),
    [
        (400, {"error": {"message": "image input is not supported", "type": "invalid_request_error"}},
         "accept images"),
        (404, {"error": "Model 'qwen' not found"}, "LMSTUDIO_MODEL"),
        (400, {"object": "error", "message": "context length exceeded", "code": 400}, "smaller screenshots"),
        (401, {"detail": "Unauthorized"}, "API key"),
        (422, b"plain text failure", "plain text failure"),
    ],
)
def test_client_errors_are_not_retried_and_carry_the_server_message(status, body, needle):
    response = (httpx.Response(status, content=body) if isinstance(body, bytes)
                else httpx.Response(status, json=body))
    result, seen = run([response, ok()])
    assert isinstance(result, ModelHTTPError)
    assert len(seen) == 1
    assert result.status == status
    assert needle in str(result)
    assert result.details["body"]


def test_connection_refused_message_is_actionable():
    result, _seen = run([httpx.ConnectError("[Errno 111] Connection refused")] * 2, max_retries=1)
    assert isinstance(result, ModelConnectionError)
    assert str(result).startswith(f"no server at {ENDPOINT}: is LM Studio")
    assert "model loaded" in str(result)


def test_read_timeout_is_not_retried_and_names_the_setting():
    result, seen = run([httpx.ReadTimeout("slow"), ok()], timeout=12)
    assert isinstance(result, ModelTimeoutError)
    assert len(seen) == 1
    assert "LMSTUDIO_TIMEOUT" in str(result) and "12 s" in str(result)


def test_read_timeout_retried_when_asked():
    result, _seen = run([httpx.ReadTimeout("slow"), ok()], retry_timeouts=True)
    assert isinstance(result, Completion) and result.attempts == 2


def test_connect_timeout_is_retried():
    result, _ = run([httpx.ConnectTimeout("slow connect"), ok()])
    assert isinstance(result, Completion)


def test_retry_after_is_honoured(monkeypatch):
    waits: list[float] = []
    real_sleep = asyncio.sleep

    async def fake_sleep(delay: float) -> None:
        waits.append(delay)
        await real_sleep(0)

    monkeypatch.setattr(asyncio, "sleep", fake_sleep)
    result, _ = run([httpx.Response(429, headers={"Retry-After": "3"}, json={"error": "slow down"}), ok()],
                    backoff=0.001)
    assert isinstance(result, Completion)
    assert waits == [3.0]
    assert result.timings.retry_wait_s == 3.0


@pytest.mark.parametrize("header", ["inf", "nan", "-inf", "-5", "1e3", "1.5", "garbage", "0x10", "5 s"])
def test_an_invalid_retry_after_is_treated_as_absent(monkeypatch, header):
    """RFC 9110 section 10.2.3: ``Retry-After = HTTP-date / delay-seconds``,
    ``delay-seconds = 1*DIGIT``. Any other value is no Retry-After: the usual jittered
    backoff applies. Before, ``inf`` was read as a number and the run failed at once ("asks to
    wait inf s", more than max_retry_after) while ``nan`` passed as a zero wait."""
    waits: list[float] = []
    real_sleep = asyncio.sleep

    async def fake_sleep(delay: float) -> None:
        waits.append(delay)
        await real_sleep(0)

    monkeypatch.setattr(asyncio, "sleep", fake_sleep)
    result, seen = run([httpx.Response(429, headers={"Retry-After": header}, json={"error": "slow down"}), ok()],
                       backoff=1.0, max_backoff=100)
    assert isinstance(result, Completion), result
    assert len(seen) == 2 and len(waits) == 1
    assert 0.5 <= waits[0] < 1.5  # the first backoff step (1 s, jittered), not the header's value
    assert _retry_after(header) is None


@pytest.mark.parametrize(
    "headers",
    [{"retry-after-ms": "inf"}, {"retry-after-ms": "nan"}, {"retry-after-ms": "-5"},
     {"x-ratelimit-reset-requests": "inf", "x-ratelimit-remaining-requests": "0"},
     {"x-ratelimit-reset-tokens": "nan"}],
)
def test_invalid_rate_limit_headers_are_absent_too(headers):
    verdict = classify_http_error(429, b"{}", httpx.Headers(headers))
    assert verdict.kind == "rate_limit" and verdict.wait is None
    assert classify_http_error(429, b"{}", httpx.Headers({"retry-after-ms": "1500"})).wait == 1.5


def test_valid_retry_after_values():
    assert _retry_after("3") == 3.0 and _retry_after(" 0 ") == 0.0
    assert _retry_after("9" * 400) == 1e12  # valid, and longer than any run waits: refused at once
    future = email.utils.format_datetime(datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=30), usegmt=True)
    wait = _retry_after(future)
    assert wait is not None and 25 <= wait <= 31
    assert _retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # a date already past: no wait
    assert _retry_after("Wed, 99 Foo 2015") is None and _retry_after("") is None and _retry_after(None) is None


def test_backoff_grows_exponentially_with_jitter(monkeypatch):
    waits: list[float] = []
    real_sleep = asyncio.sleep

    async def fake_sleep(delay: float) -> None:
        waits.append(delay)
        await real_sleep(0)

    monkeypatch.setattr(asyncio, "sleep", fake_sleep)
    run([httpx.Response(500)] * 4 + [ok()], backoff=1.0, max_retries=4, max_backoff=100)
    assert len(waits) == 4
    for i, wait in enumerate(waits):
        assert 0.5 * 2**i <= wait < 1.5 * 2**i


def test_retry_after_parsing():
    # delay-seconds is 1*DIGIT (RFC 9110): a fraction or a sign makes the header invalid, so absent.
    assert _retry_after("2.5") is None
    assert _retry_after("-3") is None
    assert _retry_after("\uff13") is None  # a full-width digit is not DIGIT
    assert _retry_after(None) is None
    assert _retry_after("soon") is None
    assert 0 <= _retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # a date in the past


def test_non_json_body_is_a_response_error_after_retries():
    html = httpx.Response(200, content=b"<html>LM Studio</html>", headers={"content-type": "text/html"})
    result, seen = run([html, html], max_retries=1)
    assert isinstance(result, ModelResponseError)
    assert "not JSON" in str(result) and "text/html" in str(result)
    assert len(seen) == 2


def test_no_choices_and_bad_content_are_response_errors():
    result, _ = run([httpx.Response(200, json={"choices": []})])
    assert isinstance(result, ModelResponseError) and "without choices" in str(result)
    result, _ = run([httpx.Response(200, json={"choices": [{"message": {"content": 5}}]})])
    assert isinstance(result, ModelResponseError) and "not text" in str(result)


def test_error_object_with_status_200_is_an_http_error():
    result, _ = run([httpx.Response(200, json={"error": {"message": "Failed to load model"}})])
    assert isinstance(result, ModelHTTPError) and "Failed to load model" in str(result)


def test_tool_calls_native_object_args_and_content_fallback():
    native = ok(None, tool_calls=[{"id": "a", "type": "function",
                                   "function": {"name": "click_element", "arguments": {"box": [1, 2]}}}])
    result, _ = run([native])
    assert isinstance(result, Completion)
    assert result.tool_calls[0].arguments == {"box": [1, 2]}
    assert result.message == {"role": "assistant", "content": "", "tool_calls": [
        {"id": "a", "type": "function", "function": {"name": "click_element", "arguments": '{"box":[1,2]}'}}]}

    qwen = ok('<tool_call>\n{"name": "press_key", "arguments": {"key": "enter"}}\n</tool_call>')
    result, _ = run([qwen])
    assert isinstance(result, Completion)
    assert [(c.name, c.arguments, c.id) for c in result.tool_calls] == [("press_key", {"key": "enter"}, "call_1")]
    assert result.message["tool_calls"][0]["id"] == "call_1"
    assert "<tool_call>" not in result.message["content"]

    result, _ = run([qwen], parse_content_tool_calls=False)
    assert isinstance(result, Completion) and result.tool_calls == []


def test_invalid_arguments_stay_valid_json_in_the_history_message():
    bad = ok(None, tool_calls=[{"id": "a", "type": "function",
                                "function": {"name": "type_text", "arguments": '{"text": "x'}}])
    result, _ = run([bad])
    assert isinstance(result, Completion)
    assert result.tool_calls[0].error == "invalid_json"
    args = result.message["tool_calls"][0]["function"]["arguments"]
    assert orjson.loads(args) == {"invalid_arguments": '{"text": "x'}


def test_content_parts_list_is_joined():
    result, _ = run([ok([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}])])
    assert isinstance(result, Completion) and result.content == "ab"


def test_exchange_log_gets_one_record_per_attempt(tmp_path):
    log = ExchangeLog(tmp_path / "x.jsonl")
    _result, _ = run([httpx.Response(500, json={"error": "oops"}), ok()], exchange_log=log)
    log.close()
    records = ExchangeLog.read(tmp_path / "x.jsonl")
    assert [(r["attempt"], r["status"]) for r in records] == [(1, 500), (2, 200)]
    assert records[0]["error"] and "oops" in records[0]["error"]
    assert records[1]["response"]["choices"][0]["message"]["content"] == "Done."
    assert records[1]["request"]["messages"] == [{"role": "user", "content": "hi"}]
    assert records[1]["context"] == {"turn": 7}


def test_constructor_validates_arguments():
    with pytest.raises(ValueError, match="http"):
        ChatClient("localhost:1234")
    with pytest.raises(ValueError, match="timeout"):
        ChatClient(timeout=0)
    with pytest.raises(ValueError, match="max_retries"):
        ChatClient(max_retries=-1)


def test_models_url_and_listing():
    def handler(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/v1/models"
        return httpx.Response(200, json={"data": [{"id": "qwen3-vl-8b-instruct"}, {"id": "other"}]})

    async def main() -> list[str]:
        async with ChatClient(ENDPOINT, transport=httpx.MockTransport(handler)) as client:
            assert client.models_url == "http://model.test/v1/models"
            return await client.models()

    assert asyncio.run(main()) == ["qwen3-vl-8b-instruct", "other"]


def test_redirects_are_not_followed_and_say_where_to_go():
    moved = httpx.Response(307, headers={"location": "http://model.test/api/v1/chat/completions"})
    result, seen = run([moved, ok()])
    assert isinstance(result, ModelHTTPError) and result.status == 307
    assert "redirects to http://model.test/api/v1/chat/completions" in str(result)
    assert len(seen) == 1
