"""The sanitized JSONL exchange log."""

from __future__ import annotations

import base64
import hashlib

import orjson

from deskpilot.agent.client._history import History
from deskpilot.rundir._exchange import (
    ExchangeLog,
    redact_headers,
    sanitize_request_body,
    summarize_data_image_url,
)

IMAGE = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 50
B64 = base64.b64encode(IMAGE).decode()
DIGEST = hashlib.sha256(B64.encode()).hexdigest()


def request_body() -> bytes:
    h = History("S" * 5000, tools=[{"type": "function", "function": {
        "name": "click_element", "parameters": {"type": "object", "properties": {}}}}])
    h.add_task("task")
    h.add_observation(IMAGE, text="screen")
    return h.build_request(model="m", temperature=0.5)


def test_summarize_data_image_url():
    assert summarize_data_image_url(f"data:image/png;base64,{B64}") == (
        f"data:image/png;base64,<sha256:{DIGEST} len:{len(B64)}>"
    )
    assert summarize_data_image_url("https://x/y.png") == "https://x/y.png"


def test_request_sanitized_images_tools_and_long_text():
    body = request_body()
    out = sanitize_request_body(body, max_text=100)
    image_url = out["messages"][2]["content"][1]["image_url"]["url"]
    assert image_url == f"data:image/png;base64,<sha256:{DIGEST} len:{len(B64)}>"
    assert out["tools"]["names"] == ["click_element"]
    assert out["messages"][0]["content"].startswith("S" * 100 + "... <truncated, 5000 chars>")
    assert out["_images"] == 1 and out["_bytes"] == len(body)
    assert B64[:50] not in orjson.dumps(out).decode()


def test_digest_cache_gives_the_same_answer_as_hashing():
    body = request_body()
    first = sanitize_request_body(body)
    second = sanitize_request_body(body)  # served from the cache
    assert first == second


def test_non_json_body_is_logged_as_excerpt():
    out = sanitize_request_body(b"not json at all")
    assert out == {"unparsed_body": "not json at all", "bytes": 15}


def test_headers_redacted():
    assert redact_headers({"Authorization": "Bearer sk-123", "Content-Type": "application/json"}) == {
        "Authorization": "<redacted>", "Content-Type": "application/json"}


def test_log_is_jsonl_flushed_per_record_and_readable(tmp_path):
    path = tmp_path / "runs" / "x.jsonl"
    log = ExchangeLog(path)
    log.record(endpoint="http://h/v1/chat/completions", request_body=request_body(), attempt=1, status=200,
               response={"choices": [{"message": {"content": "ok"}}]}, timings={"ttfb_s": 0.1},
               headers={"Authorization": "Bearer secret"}, context={"turn": 1})
    # flushed before close: another reader sees the whole line now
    lines = path.read_bytes().splitlines()
    assert len(lines) == 1
    record = orjson.loads(lines[0])
    assert record["kind"] == "exchange" and record["status"] == 200 and record["attempt"] == 1
    assert record["headers"]["Authorization"] == "<redacted>"
    assert "secret" not in lines[0].decode()
    assert record["response"]["choices"][0]["message"]["content"] == "ok"
    assert record["context"] == {"turn": 1}
    log.record(endpoint="e", request_body=None, attempt=2, status=None, error="boom")
    log.close()
    # a torn last line (crash mid-write) is skipped by the reader
    with open(path, "ab") as fh:
        fh.write(b'{"kind": "exch')
    records = ExchangeLog.read(path)
    assert [r["attempt"] for r in records] == [1, 2]
    assert records[1]["error"] == "boom"


def test_in_directory_uses_seed_name(tmp_path):
    with ExchangeLog.in_directory(tmp_path) as log:
        assert log.path.name.startswith("agent_run_") and log.path.suffix == ".jsonl"
    assert log.closed


def test_text_mentioning_data_urls_and_escaped_payloads_survive():
    body = orjson.dumps({"messages": [
        {"role": "system", "content": "images come as data:image/png URLs; see data:text"},
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": f"data:image/png;base64,{B64}"}}]},
    ]})
    out = sanitize_request_body(body)
    assert out["messages"][0]["content"] == "images come as data:image/png URLs; see data:text"
    assert out["messages"][1]["content"][0]["image_url"]["url"].endswith(f"len:{len(B64)}>")
    escaped = body.replace(b"/", b"\\/")  # some encoders escape slashes
    out = sanitize_request_body(escaped)
    assert out["messages"][1]["content"][0]["image_url"]["url"] == (
        f"data:image/png;base64,<sha256:{DIGEST} len:{len(B64)}>")
    assert out["messages"][0]["content"].startswith("images come as data:image/png URLs")
