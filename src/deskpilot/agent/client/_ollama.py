"""Ollama's native chat API (``/api/chat``), for an endpoint that points there.

Why speak it at all: Ollama's OpenAI-compatible API cannot set the context length, and
its default (4096 tokens on GPUs under 23 GiB) silently drops the oldest non-system
message -- the task -- once a request with screenshots outgrows it. The native API takes
``options.num_ctx`` per request (``model.num_ctx``). Everything else stays the same for
the rest of deskpilot: the request is built in OpenAI form (the history's cached bytes)
and translated here; the answer is translated back into a ``chat.completion`` dict.

Request (ollama/docs/api.md "Generate a chat completion"): ``messages[i].content`` is a
string and images go in ``messages[i].images`` as bare base64 (no ``data:`` prefix);
tool calls of past assistant turns carry ``arguments`` as an *object*; a tool result is
``{"role": "tool", "content", "tool_name"}``; ``temperature`` / ``max_tokens`` /
``top_p`` become ``options.temperature`` / ``options.num_predict`` / ``options.top_p``;
``stream`` must be sent as ``false`` explicitly (Ollama streams by default).

Answer: one JSON object, or NDJSON lines (``application/x-ndjson``), each ``{"message":
{"role", "content", "thinking"?, "tool_calls"?}, "done": bool}``; the last one carries
``done_reason`` ("stop", "length") and the token counts. Errors are ``{"error": "..."}``
(as the body of an error status, or as a line of a stream).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from deskpilot.agent.client._sse import AssembledMessage

__all__ = ["NativeAssembler", "to_native_request", "to_openai_response"]

_DATA_URL_PREFIX = "data:"


def _split_content(content: Any) -> tuple[str, list[str]]:
    """OpenAI content (a string or parts) -> (text, base64 images)."""
    if content is None:
        return "", []
    if isinstance(content, str):
        return content, []
    texts: list[str] = []
    images: list[str] = []
    for part in content if isinstance(content, list) else []:
        if not isinstance(part, dict):
            continue
        if part.get("type") == "text" and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif part.get("type") == "image_url":
            url = part.get("image_url")
            url = url.get("url") if isinstance(url, dict) else url
            if isinstance(url, str) and url.startswith(_DATA_URL_PREFIX) and "," in url:
                images.append(url.split(",", 1)[1])
    return "\n".join(texts), images


def _message(message: dict[str, Any], names: dict[str, str]) -> dict[str, Any]:
    role = message.get("role")
    text, images = _split_content(message.get("content"))
    out: dict[str, Any] = {"role": role, "content": text}
    if images:
        out["images"] = images
    calls = message.get("tool_calls")
    if role == "assistant" and isinstance(calls, list) and calls:
        native = []
        for call in calls:
            function = call.get("function") or {}
            raw = function.get("arguments")
            try:
                arguments = (
                    orjson.loads(raw) if isinstance(raw, str) and raw.strip() else (raw or {})
                )
            except orjson.JSONDecodeError:
                arguments = {"invalid_arguments": raw}
            if isinstance(call.get("id"), str):
                names[call["id"]] = function.get("name", "")
            native.append({"function": {"name": function.get("name", ""), "arguments": arguments}})
        out["tool_calls"] = native
    if role == "tool":
        name = message.get("name") or names.get(str(message.get("tool_call_id")), "")
        if name:
            out["tool_name"] = name
    return out


def to_native_request(payload: bytes, *, num_ctx: int | None = None) -> bytes:
    """An OpenAI chat-completions body -> the ``/api/chat`` body."""
    body = orjson.loads(payload)
    names: dict[str, str] = {}
    native: dict[str, Any] = {
        "model": body.get("model"),
        "messages": [_message(m, names) for m in body.get("messages", []) if isinstance(m, dict)],
        "stream": bool(body.get("stream", False)),
    }
    if body.get("tools"):
        native["tools"] = body["tools"]
    options: dict[str, Any] = {}
    if "temperature" in body:
        options["temperature"] = body["temperature"]
    limit = body.get("max_tokens", body.get("max_completion_tokens"))
    if limit is not None:
        options["num_predict"] = limit
    if "top_p" in body:
        options["top_p"] = body["top_p"]
    if num_ctx is not None:
        options["num_ctx"] = num_ctx
    if options:
        native["options"] = options
    return orjson.dumps(native)


def _native_calls(
    message: dict[str, Any], new_id: Callable[[], str], start: int
) -> list[dict[str, Any]]:
    out = []
    for offset, call in enumerate(message.get("tool_calls") or []):
        if not isinstance(call, dict):
            continue
        function = call.get("function") or {}
        arguments = function.get("arguments")
        out.append(
            {
                "id": call.get("id")
                if isinstance(call.get("id"), str) and call.get("id")
                else new_id(),
                "type": "function",
                "function": {
                    "name": function.get("name", ""),
                    "arguments": orjson.dumps(arguments).decode()
                    if isinstance(arguments, dict)
                    else (arguments or "{}"),
                },
                "index": start + offset,
            }
        )
    return out


def to_openai_response(data: dict[str, Any], new_id: Callable[[], str]) -> dict[str, Any]:
    """One complete native answer -> a ``chat.completion`` dict (what ``_read_json`` reads)."""
    if data.get("error"):
        return {"error": data["error"]}
    raw_message = data.get("message")
    message: dict[str, Any] = raw_message if isinstance(raw_message, dict) else {}
    out_message: dict[str, Any] = {"role": "assistant", "content": message.get("content") or ""}
    if isinstance(message.get("thinking"), str) and message["thinking"]:
        out_message["reasoning_content"] = message["thinking"]
    calls = _native_calls(message, new_id, 0)
    if calls:
        out_message["tool_calls"] = calls
    return {
        "object": "chat.completion",
        "model": data.get("model"),
        "choices": [
            {"index": 0, "message": out_message, "finish_reason": _finish(data, bool(calls))}
        ],
        "usage": _usage(data),
    }


def _finish(data: dict[str, Any], has_calls: bool) -> str | None:
    if not data.get("done"):
        return None
    reason = data.get("done_reason") or "stop"
    return "tool_calls" if has_calls and reason == "stop" else str(reason)


def _usage(data: dict[str, Any]) -> dict[str, Any] | None:
    if "prompt_eval_count" not in data and "eval_count" not in data:
        return None
    prompt, completion = int(data.get("prompt_eval_count") or 0), int(data.get("eval_count") or 0)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


class NativeAssembler:
    """Folds NDJSON lines of a native stream into one message (like ``StreamAssembler``).

    :meth:`feed` returns the tool calls that arrived with a line (Ollama sends each call
    whole), so the caller can act on them before the stream ends."""

    def __init__(self, new_id: Callable[[], str]) -> None:
        self._new_id = new_id
        self._buffer = b""
        self._content: list[str] = []
        self._thinking: list[str] = []
        self._calls: list[dict[str, Any]] = []
        self.finish_reason: str | None = None
        self.usage: dict[str, Any] | None = None
        self.done = False
        self.error: Any = None
        self.lines = 0
        self.bad_lines = 0
        self.model: str | None = None

    def feed(self, chunk: bytes) -> list[dict[str, Any]]:
        self._buffer += chunk
        *lines, self._buffer = self._buffer.split(b"\n")
        out: list[dict[str, Any]] = []
        for line in lines:
            out.extend(self._line(line))
        return out

    def close(self) -> list[dict[str, Any]]:
        tail, self._buffer = self._buffer, b""
        return self._line(tail)

    def _line(self, line: bytes) -> list[dict[str, Any]]:
        if not line.strip() or self.done:
            return []
        try:
            data = orjson.loads(line)
        except orjson.JSONDecodeError:
            self.bad_lines += 1
            return []
        if not isinstance(data, dict):
            self.bad_lines += 1
            return []
        self.lines += 1
        if data.get("error"):
            self.error = data["error"]
            return []
        if self.model is None and isinstance(data.get("model"), str):
            self.model = data["model"]
        raw_message = data.get("message")
        message: dict[str, Any] = raw_message if isinstance(raw_message, dict) else {}
        if isinstance(message.get("content"), str) and message["content"]:
            self._content.append(message["content"])
        if isinstance(message.get("thinking"), str) and message["thinking"]:
            self._thinking.append(message["thinking"])
        calls = _native_calls(message, self._new_id, len(self._calls))
        self._calls.extend(calls)
        if data.get("done"):
            self.done = True
            self.finish_reason = _finish(data, bool(self._calls))
            self.usage = _usage(data)
        return [{k: v for k, v in c.items() if k != "index"} for c in calls]

    def finish(self) -> AssembledMessage:
        return AssembledMessage(
            content="".join(self._content),
            reasoning="".join(self._thinking) or None,
            tool_calls=[{k: v for k, v in c.items() if k != "index"} for c in self._calls],
            finish_reason=self.finish_reason,
            usage=self.usage,
            done=self.done,
            chunks=self.lines,
            bad_events=self.bad_lines,
            error=self.error,
            model=self.model,
        )
