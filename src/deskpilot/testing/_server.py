"""A real OpenAI-compatible HTTP server on 127.0.0.1 for tests, benchmarks and the demo.

Why a small asyncio HTTP/1.1 server instead of Starlette + uvicorn: the turn benchmarks
need server overhead far below a millisecond with keep-alive, and the fault tests need
to misbehave at the byte level (cut a stream mid-chunk, stall after the headers, drop a
connection), which a framework hides. It speaks just what chat clients use:
``Content-Length`` and chunked request bodies, keep-alive, chunked SSE responses.

Routes: ``POST /v1/chat/completions`` (also ``/chat/completions``), ``GET /v1/models``,
``GET /health``. Every chat request is decoded, validated (see :mod:`._validate`) and
recorded as a :class:`RecordedRequest` in :attr:`ModelServer.requests`; an invalid one
gets a 400 with an OpenAI-style error body (``reject_invalid=False`` answers it anyway
and only records the problems). Then the policy decides the answer.

Run it in a background thread (``with ModelServer(policy) as server:``, for sync tests
and the CLI) or on the running event loop (``async with ModelServer(policy) as server:``).
"""

from __future__ import annotations

import asyncio
import contextlib
import http
import itertools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from deskpilot.testing._http import HTTPConnection, Request, ResponseWriter
from deskpilot.testing._policies import ReplyPolicy, resolve_reply
from deskpilot.testing._replies import Fault, Reply
from deskpilot.testing._validate import (
    ImageInfo,
    extract_data_urls,
    summarize_image_urls,
    validate_chat_request,
)

__all__ = ["ModelServer", "RecordedRequest", "serve"]

# /api/chat: Ollama's native route, for replaying its answers (use validate=False: its
# requests are not in OpenAI form).
_CHAT_PATHS = frozenset({"/v1/chat/completions", "/chat/completions", "/api/chat"})


@dataclass(slots=True)
class RecordedRequest:
    """One request as the server saw it.

    ``body`` is the decoded JSON with image data URLs replaced by
    ``data:image/png;base64,<sha256:HEX len:N>`` (the images themselves are described in
    ``images``; their bytes are kept for the newest ``keep_images`` requests only).
    ``problems`` lists validation failures; ``status`` and ``reply`` what was answered.
    """

    index: int
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    size: int
    problems: list[str]
    images: list[ImageInfo]
    received_at: float
    status: int | None = None
    reply: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def messages(self) -> list[dict[str, Any]]:
        msgs = self.body.get("messages") if isinstance(self.body, dict) else None
        return msgs if isinstance(msgs, list) else []

    @property
    def stream(self) -> bool:
        return isinstance(self.body, dict) and self.body.get("stream") is True

    @property
    def model(self) -> str | None:
        return self.body.get("model") if isinstance(self.body, dict) else None

    @property
    def tool_names(self) -> list[str]:
        tools = self.body.get("tools") if isinstance(self.body, dict) else None
        if not isinstance(tools, list):
            return []
        return [t["function"]["name"] for t in tools
                if isinstance(t, dict) and isinstance(t.get("function"), dict) and "name" in t["function"]]

    @property
    def image_count(self) -> int:
        return len(self.images)

    @property
    def last_image(self) -> ImageInfo | None:
        return self.images[-1] if self.images else None

    @property
    def assistant_turns(self) -> int:
        return sum(1 for m in self.messages if isinstance(m, dict) and m.get("role") == "assistant")

    @property
    def roles(self) -> list[str]:
        return [str(m.get("role")) for m in self.messages if isinstance(m, dict)]


def _status_line(status: int) -> bytes:
    try:
        phrase = http.HTTPStatus(status).phrase
    except ValueError:
        phrase = "Unknown"
    return f"HTTP/1.1 {status} {phrase}\r\n".encode("latin-1")


def _head(status: int, headers: dict[str, str], *, keep_alive: bool) -> bytes:
    lines = [_status_line(status)]
    for key, value in headers.items():
        lines.append(f"{key}: {value}\r\n".encode("latin-1"))
    if not keep_alive:
        lines.append(b"connection: close\r\n")
    lines.append(b"\r\n")
    return b"".join(lines)


def _json_response(status: int, payload: Any, *, keep_alive: bool, headers: dict[str, str] | None = None) -> bytes:
    body = payload if isinstance(payload, bytes) else orjson.dumps(payload)
    hdrs = {"content-type": "application/json", "content-length": str(len(body))}
    if headers:
        hdrs.update(headers)
        hdrs["content-length"] = str(len(body))
    return _head(status, hdrs, keep_alive=keep_alive) + body


def _error_body(status: int, message: str, kind: str = "invalid_request_error") -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": status}}


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%b\r\n" % (len(data), data)


def _pieces(text: str, size: int) -> list[str]:
    if size <= 0 or len(text) <= size:
        return [text]
    return [text[i:i + size] for i in range(0, len(text), size)]


class ModelServer:
    """OpenAI-compatible chat server driven by a policy (see module docstring).

    ``model``: the one model served (requests naming another are invalid); ``None``
    accepts any. ``latency``: seconds of simulated model time per answer.
    ``stream_piece``: characters per content/arguments fragment in SSE answers (small
    values exercise the client's assembler). ``keep_images``: how many of the newest
    requests keep their decoded image bytes (older ones keep only sizes and digests).
    ``max_records``: keep only that many requests (soak runs). ``on_request(record)`` is
    called (on the server's loop) once the answer to a request has been written.
    """

    __test__ = False  # not a pytest class, despite the import into test modules

    def __init__(
        self,
        policy: ReplyPolicy | Callable[[RecordedRequest], Any],
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        model: str | None = None,
        latency: float = 0.0,
        validate: bool = True,
        reject_invalid: bool = True,
        stream_piece: int = 12,
        keep_images: int = 1,
        max_records: int | None = None,
        on_request: Callable[[RecordedRequest], None] | None = None,
    ) -> None:
        self.policy = policy
        self.host = host
        self._requested_port = port
        self.model = model
        self.latency = latency
        self.validate = validate
        self.reject_invalid = reject_invalid
        self.stream_piece = stream_piece
        self.keep_images = keep_images
        self.max_records = max_records
        self.on_request = on_request
        self.requests: list[RecordedRequest] = []
        self.connections_opened = 0
        self._counter = itertools.count(1)
        self._server: asyncio.AbstractServer | None = None
        self._connections: set[HTTPConnection] = set()
        self._port = 0
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread_error: BaseException | None = None

    # -- addresses -----------------------------------------------------------------------
    @property
    def port(self) -> int:
        if not self._port:
            raise RuntimeError("the server is not started")
        return self._port

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT`` (no path)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def endpoint(self) -> str:
        """The chat-completions URL to give a client."""
        return f"{self.url}/v1/chat/completions"

    @property
    def problems(self) -> list[str]:
        """Every validation problem so far, prefixed with its request number."""
        return [f"request {r.index}: {p}" for r in self.requests for p in r.problems]

    # -- async lifecycle -----------------------------------------------------------------
    async def start(self) -> None:
        if self._server is not None:
            raise RuntimeError("the server is already started")
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(self._new_connection, self.host, self._requested_port,
                                                backlog=128)
        self._port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        tasks = []
        for conn in list(self._connections):
            if conn.task is not None and not conn.task.done():
                conn.task.cancel()
                tasks.append(conn.task)
            if conn.transport is not None:
                conn.transport.abort()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(server.wait_closed(), 2.0)

    def _new_connection(self) -> HTTPConnection:
        def opened(conn: HTTPConnection) -> None:
            self.connections_opened += 1
            self._connections.add(conn)

        return HTTPConnection(
            self._handle, on_open=opened, on_close=self._connections.discard,
            error_response=lambda status, message: _json_response(
                status, _error_body(status, message), keep_alive=False),
        )

    async def __aenter__(self) -> ModelServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def serve_forever(self) -> None:
        """Start (if needed) and serve until cancelled."""
        if self._server is None:
            await self.start()
        try:
            await asyncio.Event().wait()
        finally:
            await self.stop()

    # -- thread lifecycle ----------------------------------------------------------------
    def __enter__(self) -> ModelServer:
        ready = threading.Event()
        self._thread = threading.Thread(target=self._thread_main, args=(ready,), daemon=True,
                                        name="deskpilot-model-server")
        self._thread.start()
        if not ready.wait(10.0):
            raise RuntimeError("the test server did not start within 10 s")
        if self._thread_error is not None:
            raise RuntimeError(f"the test server failed to start: {self._thread_error}") from self._thread_error
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop a server started with ``with`` (idempotent)."""
        loop, stop, thread = self._loop, self._stop, self._thread
        if loop is not None and stop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(stop.set)
        if thread is not None:
            thread.join(10.0)
            self._thread = None

    def _thread_main(self, ready: threading.Event) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            self._stop = asyncio.Event()
            try:
                loop.run_until_complete(self.start())
            except BaseException as exc:
                self._thread_error = exc
                return
            finally:
                ready.set()
            loop.run_until_complete(self._stop.wait())
            loop.run_until_complete(self.stop())
        finally:
            loop.close()

    # -- HTTP ----------------------------------------------------------------------------
    async def _handle(self, request: Request, writer: ResponseWriter) -> bool:
        return await self._dispatch(request.method, request.path, request.headers, request.body,
                                    writer, request.keep_alive)

    async def _dispatch(self, method: str, path: str, headers: dict[str, str], body: bytes | bytearray,
                        writer: ResponseWriter, keep_alive: bool) -> bool:
        if path in _CHAT_PATHS:
            if method != "POST":
                writer.write(_json_response(405, _error_body(405, f"use POST for {path}"),
                                            keep_alive=keep_alive, headers={"allow": "POST"}))
                return keep_alive
            keep = await self._chat(headers, body, writer, keep_alive, path)
            if self.on_request is not None and self.requests:
                self.on_request(self.requests[-1])
            return keep
        if path in ("/v1/models", "/models") and method == "GET":
            model = self.model or "deskpilot-test-model"
            writer.write(_json_response(200, {"object": "list", "data": [
                {"id": model, "object": "model", "owned_by": "deskpilot"}]}, keep_alive=keep_alive))
            return keep_alive
        if path == "/health" and method == "GET":
            writer.write(_json_response(200, {"status": "ok"}, keep_alive=keep_alive))
            return keep_alive
        writer.write(_json_response(404, _error_body(404, f"no route {method} {path}"), keep_alive=keep_alive))
        return keep_alive

    def _record(self, record: RecordedRequest) -> None:
        self.requests.append(record)
        # Release decoded image bytes of the request that just fell out of the window.
        falling = len(self.requests) - 1 - self.keep_images
        if 0 <= falling < len(self.requests):
            for image in self.requests[falling].images:
                image.release()
        if self.max_records is not None and len(self.requests) > self.max_records:
            del self.requests[: len(self.requests) - self.max_records]

    async def _chat(self, headers: dict[str, str], raw: bytes | bytearray, writer: ResponseWriter,
                    keep_alive: bool, path: str) -> bool:
        index = next(self._counter)
        problems: list[str] = []
        images: list[ImageInfo] = []
        small, extracted = extract_data_urls(raw)
        memo: dict[int, Any] = {}
        try:
            body: Any = orjson.loads(small)
        except orjson.JSONDecodeError as exc:
            body = None
            problems.append(f"request body is not JSON ({exc})")
        if body is not None and self.validate:
            problems, images = validate_chat_request(body, model=self.model, extracted=extracted,
                                                     keep_image_data=self.keep_images > 0, memo=memo)
        elif body is not None and not isinstance(body, dict):
            problems.append("request body must be a JSON object")
        summarize_image_urls(body, extracted, memo)
        safe_headers = {k: ("<redacted>" if k in ("authorization", "api-key", "x-api-key") else v)
                        for k, v in headers.items()}
        record = RecordedRequest(
            index=index, method="POST", path=path, headers=safe_headers, body=body, size=len(raw),
            problems=problems, images=images, received_at=time.time(),
        )
        self._record(record)
        if problems and self.reject_invalid:
            record.status = 400
            record.reply = {"error": problems}
            message = "invalid request: " + "; ".join(problems[:10])
            writer.write(_json_response(400, _error_body(400, message), keep_alive=keep_alive))
            return keep_alive
        try:
            answer = await resolve_reply(self.policy, record)
        except Exception as exc:  # a broken policy is a test bug: answer it loudly
            record.status = 500
            record.problems.append(f"policy raised {type(exc).__name__}: {exc}")
            record.reply = {"error": f"policy raised {exc!r}"}
            writer.write(_json_response(500, _error_body(500, f"test policy raised {exc!r}", "server_error"),
                                        keep_alive=keep_alive))
            return keep_alive
        delay = self.latency + (answer.delay if isinstance(answer, Reply) else 0.0)
        if delay > 0 and not (isinstance(answer, Fault) and answer.kind == "stall_body"):
            await asyncio.sleep(delay)
        if isinstance(answer, Fault):
            return await self._fault(answer, record, writer, keep_alive)
        record.status = 200
        record.reply = answer.message()
        if record.stream:
            await self._write_stream(answer, record, writer, keep_alive)
        else:
            writer.write(_json_response(200, self._completion(answer, record), keep_alive=keep_alive))
        return keep_alive

    # -- rendering -----------------------------------------------------------------------
    def _usage(self, reply: Reply, record: RecordedRequest) -> dict[str, Any]:
        if reply.usage is not None:
            return reply.usage
        message = reply.message()
        out_chars = len(message.get("content") or "") + sum(
            len(str(c["function"].get("arguments"))) for c in message.get("tool_calls", []))
        # A rough, deterministic estimate: ~4 characters per text token, 256 per image
        # (the stream flag must not change it, so the raw body size is not used).
        text = orjson.dumps(record.messages) if record.messages else b""
        prompt = max(1, len(text) // 4 + 256 * record.image_count)
        completion = max(1, out_chars // 4)
        return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}

    def _completion(self, reply: Reply, record: RecordedRequest) -> dict[str, Any]:
        return {
            "id": f"chatcmpl-deskpilot-{record.index}",
            "object": "chat.completion",
            "created": int(record.received_at),
            "model": record.model or self.model or "deskpilot-test-model",
            "choices": [{"index": 0, "message": reply.message(), "logprobs": None,
                         "finish_reason": reply.finish()}],
            "usage": self._usage(reply, record),
        }

    def _events(self, reply: Reply, record: RecordedRequest) -> list[bytes]:
        base = {
            "id": f"chatcmpl-deskpilot-{record.index}",
            "object": "chat.completion.chunk",
            "created": int(record.received_at),
            "model": record.model or self.model or "deskpilot-test-model",
        }

        def event(delta: dict[str, Any], finish: str | None = None) -> bytes:
            chunk = {**base, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}
            return b"data: " + orjson.dumps(chunk) + b"\n\n"

        message = reply.message()
        events = [event({"role": "assistant", "content": ""})]
        if message.get("reasoning_content"):
            for piece in _pieces(message["reasoning_content"], self.stream_piece):
                events.append(event({"reasoning_content": piece}))
        if message.get("content"):
            for piece in _pieces(message["content"], self.stream_piece):
                events.append(event({"content": piece}))
        for i, call in enumerate(message.get("tool_calls", [])):
            fn = call["function"]
            first: dict[str, Any] = {"index": i}
            if "id" in call:
                first["id"] = call["id"]
            first["type"] = "function"
            args = fn.get("arguments")
            if isinstance(args, str):
                first["function"] = {"name": fn["name"], "arguments": ""}
                events.append(event({"tool_calls": [first]}))
                for piece in _pieces(args, self.stream_piece):
                    events.append(event({"tool_calls": [{"index": i, "function": {"arguments": piece}}]}))
            else:
                first["function"] = {"name": fn["name"], "arguments": args}
                events.append(event({"tool_calls": [first]}))
        events.append(event({}, reply.finish()))
        options = record.body.get("stream_options") if isinstance(record.body, dict) else None
        if isinstance(options, dict) and options.get("include_usage"):
            events.append(b"data: " + orjson.dumps({**base, "choices": [], "usage": self._usage(reply, record)})
                          + b"\n\n")
        return events

    async def _write_stream(self, reply: Reply, record: RecordedRequest, writer: ResponseWriter,
                            keep_alive: bool, *, cut_after: int | None = None, done: bool = True) -> None:
        head = _head(200, {"content-type": "text/event-stream", "cache-control": "no-cache",
                           "transfer-encoding": "chunked"}, keep_alive=keep_alive)
        events = self._events(reply, record)
        if done:
            events.append(b"data: [DONE]\n\n")
        if cut_after is not None:
            writer.write(head + b"".join(_chunk(e) for e in events[:cut_after]))
            await writer.drain()
            writer.abort()
            return
        if reply.chunk_delay <= 0:
            writer.write(head + b"".join(_chunk(e) for e in events) + b"0\r\n\r\n")
            return
        writer.write(head)
        for e in events:
            writer.write(_chunk(e))
            await writer.drain()
            await asyncio.sleep(reply.chunk_delay)
        writer.write(b"0\r\n\r\n")

    async def _fault(self, fault: Fault, record: RecordedRequest, writer: ResponseWriter,
                     keep_alive: bool) -> bool:
        record.reply = {"fault": fault.kind, "status": fault.status}
        kind = fault.kind
        if kind in ("http", "stall"):
            if fault.delay > 0:
                await asyncio.sleep(fault.delay)
            record.status = fault.status
            hdrs = {"content-type": "application/json", **fault.headers, "content-length": str(len(fault.body))}
            writer.write(_head(fault.status, hdrs, keep_alive=keep_alive) + fault.body)
            return keep_alive
        if kind == "raw":
            record.status = fault.status
            # The recorded headers (minus framing: this body ends when the connection closes).
            hdrs = {k: v for k, v in fault.headers.items()
                    if k not in ("content-length", "transfer-encoding", "connection")}
            writer.write(_head(fault.status, hdrs, keep_alive=False) + fault.body)
            return False
        if kind == "drop":
            if fault.delay > 0:
                await asyncio.sleep(fault.delay)
            record.status = None
            writer.abort()
            return False
        if kind in ("invalid_json", "wrong_content_type", "empty_choices"):
            record.status = 200
            hdrs = {"content-type": "application/json", **fault.headers, "content-length": str(len(fault.body))}
            writer.write(_head(200, hdrs, keep_alive=keep_alive) + fault.body)
            return keep_alive
        reply = fault.reply or Reply(content="")
        record.status = 200
        if kind == "stall_body":
            body = orjson.dumps(self._completion(reply, record))
            writer.write(_head(200, {"content-type": "application/json", "content-length": str(len(body))},
                               keep_alive=keep_alive))
            await writer.drain()
            await asyncio.sleep(fault.delay)
            writer.write(body)
            return keep_alive
        if kind == "truncated_stream":
            if record.stream:
                await self._write_stream(reply, record, writer, keep_alive, cut_after=fault.after_chunks)
            else:
                body = orjson.dumps(self._completion(reply, record))
                writer.write(_head(200, {"content-type": "application/json", "content-length": str(len(body))},
                                   keep_alive=keep_alive) + body[: len(body) // 2])
                await writer.drain()
                writer.abort()
            return False
        if kind == "no_done":
            if record.stream:
                await self._write_stream(reply, record, writer, keep_alive, done=False)
            else:
                writer.write(_json_response(200, self._completion(reply, record), keep_alive=keep_alive))
            return keep_alive
        raise ValueError(f"unknown fault kind {kind!r}")


def serve(policy: ReplyPolicy | Callable[[RecordedRequest], Any], host: str = "127.0.0.1", port: int = 0,
          *, on_ready: Callable[[ModelServer], None] | None = None, **options: Any) -> None:
    """Run a :class:`ModelServer` in the foreground until Ctrl+C (the ``testserver`` command).

    ``on_ready(server)`` is called once it listens (e.g. to print ``server.endpoint``).
    """
    server = ModelServer(policy, host=host, port=port, **options)

    async def main() -> None:
        await server.start()
        if on_ready is not None:
            on_ready(server)
        await server.serve_forever()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())
