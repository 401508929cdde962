"""What a test server answers: a normal :class:`Reply` or a :class:`Fault`.

A ``Reply`` is one assistant message (content and/or tool calls), rendered by the server
as a ``chat.completion`` or, when the request asked for ``stream: true``, as SSE chunks
framed exactly like OpenAI / LM Studio (role chunk, content pieces, tool-call fragments,
finish chunk, optional usage chunk, ``data: [DONE]``).

A ``Fault`` is a misbehaving server, for the reliability tests: an HTTP error status (with
``Retry-After``), a dropped connection, a stall, a body that is not JSON, a wrong content
type, a stream cut in the middle or ending without ``[DONE]``.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

import orjson

__all__ = ["Fault", "Reply", "reply_from_json", "tool_call"]

_ids = itertools.count(1)


def tool_call(name: str, arguments: Any = None, *, id: str | None = None) -> dict[str, Any]:
    """An OpenAI ``tool_calls[i]`` entry; ``arguments`` (dict) is sent as a JSON string,
    a ``str`` is sent verbatim (to script invalid JSON)."""
    if isinstance(arguments, str):
        raw = arguments
    else:
        raw = orjson.dumps(arguments if arguments is not None else {}).decode()
    return {
        "id": id if id is not None else f"call_srv_{next(_ids)}",
        "type": "function",
        "function": {"name": name, "arguments": raw},
    }


@dataclass(slots=True)
class Reply:
    """One assistant answer.

    ``tool_calls``: OpenAI entries (see :func:`tool_call`) or ``(name, arguments)`` pairs.
    ``style`` says how tool calls are delivered: ``"native"`` (``message.tool_calls``,
    arguments as JSON strings), ``"object_args"`` (arguments as JSON objects, like
    Ollama), ``"content"`` (Qwen's ``<tool_call>{...}</tool_call>`` in the content, no
    native calls), ``"no_ids"`` (native, without ids). ``delay`` is model latency in
    seconds before the answer starts; ``chunk_delay`` the gap between stream chunks.
    """

    content: str | None = None
    tool_calls: list[Any] = field(default_factory=list)
    reasoning: str | None = None
    finish_reason: str | None = None
    style: str = "native"
    delay: float = 0.0
    chunk_delay: float = 0.0
    usage: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.style not in ("native", "object_args", "content", "no_ids"):
            raise ValueError(f"unknown reply style {self.style!r}")
        calls = []
        for call in self.tool_calls:
            if isinstance(call, tuple):
                calls.append(tool_call(call[0], call[1] if len(call) > 1 else None))
            elif isinstance(call, dict):
                calls.append(call)
            else:
                raise TypeError(f"tool call must be a dict or (name, arguments), got {call!r}")
        self.tool_calls = calls

    def message(self) -> dict[str, Any]:
        """``choices[0].message`` for a non-streamed answer."""
        content = self.content
        calls = [dict(c) for c in self.tool_calls]
        if self.style == "content" and calls:
            blocks = "\n".join(
                "<tool_call>\n" + orjson.dumps({
                    "name": c["function"]["name"],
                    "arguments": _maybe_json(c["function"]["arguments"]),
                }).decode() + "\n</tool_call>"
                for c in calls
            )
            content = f"{content}\n{blocks}" if content else blocks
            calls = []
        msg: dict[str, Any] = {"role": "assistant", "content": content}
        if self.reasoning is not None:
            msg["reasoning_content"] = self.reasoning
        if calls:
            msg["tool_calls"] = [self._shape(c) for c in calls]
        return msg

    def _shape(self, call: dict[str, Any]) -> dict[str, Any]:
        out = {**call, "function": dict(call["function"])}
        if self.style == "object_args":
            out["function"]["arguments"] = _maybe_json(out["function"]["arguments"])
        if self.style == "no_ids":
            out.pop("id", None)
        return out

    def finish(self) -> str:
        if self.finish_reason is not None:
            return self.finish_reason
        return "tool_calls" if self.tool_calls and self.style != "content" else "stop"


def _maybe_json(raw: Any) -> Any:
    if not isinstance(raw, str):
        return raw
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return raw


@dataclass(slots=True)
class Fault:
    """A server misbehaving once (one request). Build with the class methods."""

    kind: str
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    reply: Reply | None = None
    after_chunks: int = 0

    KINDS = ("http", "drop", "stall", "invalid_json", "wrong_content_type", "truncated_stream",
             "no_done", "stall_body", "empty_choices", "raw")

    @classmethod
    def raw(cls, response: bytes) -> Fault:
        """Answer with these exact bytes: a status line, headers, a blank line and the body
        (a recorded server answer, replayed byte for byte). The head may use LF line
        ends (sent as CRLF); the body is sent as is, then the connection is closed,
        which ends a body without ``Content-Length``."""
        ends = [i for i in (response.find(b"\r\n\r\n"), response.find(b"\n\n")) if i >= 0]
        if not ends or not response.startswith(b"HTTP/1."):
            raise ValueError("a raw response starts with 'HTTP/1.x STATUS' and has a blank line after its headers")
        cut = min(ends)
        head = response[:cut].replace(b"\r\n", b"\n")
        body = response[cut:].removeprefix(b"\r\n\r\n").removeprefix(b"\n\n")
        status = int(head.split(b" ", 2)[1])
        lines = head.split(b"\n")
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, _, value = line.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        return cls("raw", status=status, body=body, headers=headers)

    @classmethod
    def http(cls, status: int, message: str = "injected failure", *, retry_after: float | str | None = None,
             style: str = "openai", delay: float = 0.0) -> Fault:
        """An error status with an error body in one of the servers' dialects:
        ``"openai"`` / llama.cpp (``{"error": {"message", "type", "code"}}``), ``"lmstudio"``
        (``{"error": "..."}``), ``"vllm"`` (``{"object": "error", "message", ...}``),
        ``"text"`` (plain text)."""
        if style == "openai":
            body = orjson.dumps({"error": {"message": message, "type": "server_error" if status >= 500
                                           else "invalid_request_error", "code": status}})
        elif style == "lmstudio":
            body = orjson.dumps({"error": message})
        elif style == "vllm":
            body = orjson.dumps({"object": "error", "message": message, "type": "BadRequestError",
                                 "param": None, "code": status})
        elif style == "text":
            body = message.encode()
        else:
            raise ValueError(f"unknown error style {style!r}")
        headers = {"content-type": "text/plain" if style == "text" else "application/json"}
        if retry_after is not None:
            headers["retry-after"] = str(retry_after)
        return cls("http", status=status, body=body, headers=headers, delay=delay)

    @classmethod
    def drop(cls, *, delay: float = 0.0) -> Fault:
        """Close the connection without answering."""
        return cls("drop", delay=delay)

    @classmethod
    def stall(cls, seconds: float) -> Fault:
        """Answer nothing for ``seconds`` (then a 500): a client timeout shorter than that fires."""
        return cls("stall", status=500, delay=seconds,
                   body=orjson.dumps({"error": {"message": "stalled", "code": 500}}))

    @classmethod
    def stall_body(cls, seconds: float, reply: Reply | None = None) -> Fault:
        """Send the headers of a 200, then nothing for ``seconds``, then the reply."""
        return cls("stall_body", delay=seconds, reply=reply or Reply(content="late"))

    @classmethod
    def invalid_json(cls) -> Fault:
        """A 200 ``application/json`` whose body is not JSON."""
        return cls("invalid_json", body=b'{"choices": [ {"message": oops')

    @classmethod
    def wrong_content_type(cls) -> Fault:
        """A 200 HTML page (a proxy or a web UI at the wrong URL)."""
        return cls("wrong_content_type", body=b"<!doctype html><html><body>LM Studio</body></html>",
                   headers={"content-type": "text/html; charset=utf-8"})

    @classmethod
    def empty_choices(cls) -> Fault:
        """A 200 chat completion with ``choices: []``."""
        return cls("empty_choices", body=orjson.dumps({"id": "x", "object": "chat.completion", "choices": []}))

    @classmethod
    def truncated_stream(cls, reply: Reply, *, after_chunks: int = 2) -> Fault:
        """Stream ``reply`` but cut the connection after ``after_chunks`` SSE events."""
        return cls("truncated_stream", reply=reply, after_chunks=after_chunks)

    @classmethod
    def no_done(cls, reply: Reply) -> Fault:
        """Stream ``reply`` completely but end the body without ``data: [DONE]``."""
        return cls("no_done", reply=reply)


def reply_from_json(item: Any) -> Reply | Fault:
    """One scripted answer from plain JSON (the ``testserver --script`` file format).

    * ``"text"`` -> a content-only reply;
    * ``{"content": ..., "tool_calls": [["name", {args}], ...], "style": ..., "delay": ...}``;
    * ``{"fault": "http", "status": 500, "message": ..., "retry_after": ...}``, or
      ``{"fault": "drop" | "invalid_json" | "wrong_content_type" | "empty_choices"}``,
      ``{"fault": "stall", "seconds": 5}``, ``{"fault": "truncated_stream", "after_chunks": 2,
      "reply": {...}}``, ``{"fault": "no_done", "reply": {...}}``.
    """
    if isinstance(item, str):
        return Reply(content=item)
    if not isinstance(item, dict):
        raise ValueError(f"a scripted reply must be a string or an object, got {item!r}")
    if "fault" in item:
        kind = item["fault"]
        if kind == "http":
            return Fault.http(int(item.get("status", 500)), str(item.get("message", "injected failure")),
                              retry_after=item.get("retry_after"), style=str(item.get("style", "openai")))
        if kind == "stall":
            return Fault.stall(float(item.get("seconds", 5.0)))
        if kind in ("truncated_stream", "no_done"):
            inner = reply_from_json(item.get("reply", ""))
            if not isinstance(inner, Reply):
                raise ValueError(f"{kind} needs a normal reply inside, got {item.get('reply')!r}")
            if kind == "no_done":
                return Fault.no_done(inner)
            return Fault.truncated_stream(inner, after_chunks=int(item.get("after_chunks", 2)))
        simple = {"drop": Fault.drop, "invalid_json": Fault.invalid_json,
                  "wrong_content_type": Fault.wrong_content_type, "empty_choices": Fault.empty_choices}
        if kind not in simple:
            raise ValueError(f"unknown fault {kind!r}; use http, stall, drop, invalid_json, "
                             "wrong_content_type, empty_choices, truncated_stream or no_done")
        return simple[kind]()
    unknown = set(item) - {"content", "tool_calls", "reasoning", "finish_reason", "style", "delay", "chunk_delay"}
    if unknown:
        raise ValueError(f"unknown reply fields {sorted(unknown)}")
    calls = [tuple(c) if isinstance(c, list) else c for c in item.get("tool_calls", [])]
    return Reply(content=item.get("content"), tool_calls=calls, reasoning=item.get("reasoning"),
                 finish_reason=item.get("finish_reason"), style=item.get("style", "native"),
                 delay=float(item.get("delay", 0.0)), chunk_delay=float(item.get("chunk_delay", 0.0)))
