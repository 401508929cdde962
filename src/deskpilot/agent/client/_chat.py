"""The chat-completions client: one POST per turn, kept-alive, streamed or not.

:class:`ChatClient` talks to any OpenAI-compatible ``/v1/chat/completions`` endpoint (LM
Studio by default; llama.cpp server, vLLM, Ollama's OpenAI API, OpenAI). It takes the
request *body as bytes* — :meth:`History.build_request` splices it from cached parts — and
returns a :class:`Completion`.

Streaming is decided by the server's answer, not guessed: a ``text/event-stream`` response
is assembled from its SSE chunks (:mod:`._sse`), anything else is read as one JSON body.
The first bytes have the last word over a wrong label (proxies and gateways relabel
answers): a body that opens with ``{`` is JSON, one that opens with an SSE field
(``data:``, ``event:``, ``:``) is a stream, whatever the content type says.
Ask for a stream by building the body with ``stream=True`` (``client.stream`` is the
caller's preference for that). Both paths produce identical ``Completion`` s; with a
stream, ``on_tool_call`` is called for each tool call as soon as it is complete, before
the rest of the answer has arrived.

Reliability: up to ``1 + max_retries`` attempts, with exponential backoff and jitter,
on connection errors (refused, reset, closed mid-answer), 408, 429 (``Retry-After``
honoured, capped by ``max_retry_after``), 5xx and a 2xx body that is not JSON. Other 4xx
are not retried. A read timeout is not retried either (by default): a model that took
``timeout`` seconds once will likely do it again, and a user waiting 4 x 240 s is worse
than an error that says which knob to turn. A stream that breaks *after* a tool call was
handed to ``on_tool_call`` is never retried, since the action may already be running.

Every failure is a :class:`deskpilot.errors.ModelError` subclass whose message says
what to do and whose ``details`` carry ``endpoint``, ``model``, ``attempts``, ``status``
(if any), ``body`` (an excerpt of the server's answer) and the caller's ``context``.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import inspect
import itertools
import math
import random
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx
import orjson

from deskpilot._errors import (
    ModelConnectionError,
    ModelError,
    ModelHTTPError,
    ModelResponseError,
    ModelStreamError,
    ModelTimeoutError,
)
from deskpilot._version import __version__
from deskpilot.agent.client._ollama import NativeAssembler, to_native_request, to_openai_response
from deskpilot.agent.client._sse import SSEDecoder, StreamAssembler
from deskpilot.agent.client._toolcalls import (
    ToolCall,
    parse_message_tool_calls,
    reasoning_tool_calls,
    split_content_tool_calls,
)
from deskpilot.rundir import ExchangeLog, ModelRecord, ModelTimingsRecord

__all__ = [
    "DEFAULT_ENDPOINT",
    "DEFAULT_MAX_RESPONSE_BYTES",
    "DEFAULT_MODEL",
    "ChatClient",
    "Completion",
    "RetryVerdict",
    "Timings",
    "classify_http_error",
    "max_images_from_error",
]

DEFAULT_ENDPOINT = "http://localhost:1234/v1/chat/completions"
DEFAULT_MODEL = "qwen3-vl-8b-instruct"

_RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504, 520, 521, 522, 523, 524, 529})
_BODY_EXCERPT = 500
# Error bodies larger than this are not read in full: an excerpt is all a message needs.
_MAX_ERROR_BODY = 64 * 1024
_DRAIN_TIMEOUT = 2.0
#: The default cap on an answer's body (``model.max_response_mb``): answers are kilobytes;
#: a runaway or hostile server must not take the agent's memory.
DEFAULT_MAX_RESPONSE_BYTES = 32 * 1024 * 1024

ToolCallCallback = Callable[[ToolCall], "Awaitable[None] | None"]


@dataclass(slots=True)
class Timings:
    """Seconds, measured with ``time.perf_counter``.

    ``ttfb_s``: request sent -> response headers, for the attempt that succeeded.
    ``first_tool_call_s``: request sent -> first complete tool call (streams; for a
    non-streamed answer it equals ``total_s`` of that attempt). ``total_s``: the whole
    :meth:`ChatClient.complete` call, retries and their waits included.
    """

    ttfb_s: float = 0.0
    total_s: float = 0.0
    first_tool_call_s: float | None = None
    retry_wait_s: float = 0.0

    def as_dict(self) -> ModelTimingsRecord:
        return {
            "ttfb_s": self.ttfb_s,
            "total_s": self.total_s,
            "first_tool_call_s": self.first_tool_call_s,
            "retry_wait_s": self.retry_wait_s,
        }


@dataclass(slots=True)
class Completion:
    """One model answer.

    ``message`` is the assistant message exactly as it belongs in the history (``role``,
    ``content`` as a string, ``tool_calls`` in OpenAI form with ids, arguments as JSON
    strings; reasoning fields dropped). ``content`` is the raw text (may hold ``<think>``;
    tool-call blocks parsed from the content are removed from it). ``tool_calls`` are
    decoded (see :class:`ToolCall`). ``raw`` is the parsed response body (for a stream,
    the equivalent non-streamed body). ``streamed`` says which path produced it.
    """

    message: dict[str, Any]
    content: str
    tool_calls: list[ToolCall]
    finish_reason: str | None
    usage: dict[str, Any] | None
    timings: Timings = field(default_factory=Timings)
    raw: dict[str, Any] | None = None
    reasoning: str | None = None
    attempts: int = 1
    streamed: bool = False
    model: str | None = None

    def as_record(self) -> ModelRecord:
        """JSON-ready summary for run logs (no raw body)."""
        return {
            "content": self.content,
            "reasoning": self.reasoning,
            "tool_calls": [c.as_dict() for c in self.tool_calls],
            "finish_reason": self.finish_reason,
            "usage": self.usage,
            "timings": self.timings.as_dict(),
            "attempts": self.attempts,
            "streamed": self.streamed,
        }


class _Retryable(Exception):
    """An attempt failed in a way worth retrying; ``error`` is what to raise at the end."""

    def __init__(self, error: ModelError, retry_after: float | None = None) -> None:
        super().__init__(str(error))
        self.error = error
        self.retry_after = retry_after


class ChatClient:
    """Async client for an OpenAI-compatible chat-completions endpoint.

    ``timeout`` (seconds; LMSTUDIO_TIMEOUT) is one deadline per HTTP request: connecting,
    sending, the headers and the whole body, streamed or not (a server that drip-feeds
    bytes or keeps a stream alive with comments is cut off at it). ``max_response_bytes``
    caps an answer's body (a bigger one is a :class:`ModelResponseError`, not retried). ``transport`` is the httpx test seam
    (``httpx.MockTransport``). ``exchange_log`` gets one sanitized record per attempt.
    ``parse_content_tool_calls`` turns ``<tool_call>{...}</tool_call>`` text into tool
    calls when a server returns none natively. Use as ``async with ChatClient(...) as c``
    or call :meth:`aclose`.
    """

    def __init__(
        self,
        endpoint: str = DEFAULT_ENDPOINT,
        model: str = DEFAULT_MODEL,
        *,
        timeout: float = 240.0,
        max_retries: int = 3,
        backoff: float = 0.5,
        max_backoff: float = 8.0,
        max_retry_after: float = 60.0,
        retry_timeouts: bool = False,
        stream: bool = False,
        api_key: str | None = None,
        headers: Mapping[str, str] | None = None,
        exchange_log: ExchangeLog | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        parse_content_tool_calls: bool = True,
        num_ctx: int | None = None,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
    ) -> None:
        if max_response_bytes < 1:
            raise ValueError(f"max_response_bytes must be >= 1, got {max_response_bytes!r}")
        if timeout <= 0:
            raise ValueError(f"timeout must be > 0 seconds, got {timeout!r}")
        if max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {max_retries!r}")
        if not endpoint.startswith(("http://", "https://")):
            raise ValueError(
                f"endpoint {endpoint!r} must be an http(s) URL such as {DEFAULT_ENDPOINT}"
            )
        self.endpoint = endpoint
        self.model = model
        self.timeout = float(timeout)
        self.max_response_bytes = int(max_response_bytes)
        self.max_retries = int(max_retries)
        self.backoff = float(backoff)
        self.max_backoff = float(max_backoff)
        self.max_retry_after = float(max_retry_after)
        self.retry_timeouts = retry_timeouts
        self.stream = stream
        self.exchange_log = exchange_log
        self.parse_content_tool_calls = parse_content_tool_calls
        #: ``time.monotonic()`` by which the run must end (None: no limit); no retry wait
        #: is started that would pass it.
        self.run_deadline: float | None = None
        #: An endpoint ending in ``/api/chat`` is Ollama's native API (:mod:`._ollama`):
        #: requests are translated, ``num_ctx`` (unless None) is sent as ``options.num_ctx``.
        self.native_ollama = endpoint.split("?", 1)[0].rstrip("/").endswith("/api/chat")
        self.num_ctx = num_ctx
        self._ids = itertools.count(1)
        self._headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "User-Agent": f"deskpilot/{__version__}",
        }
        if headers:
            self._headers.update(headers)
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._http = httpx.AsyncClient(
            transport=transport,
            timeout=httpx.Timeout(self.timeout),
            limits=httpx.Limits(max_connections=8, max_keepalive_connections=4, keepalive_expiry=30.0),
            http2=False,
            follow_redirects=False,
        )
        self._rng = random.Random()

    # -- lifecycle -----------------------------------------------------------------------
    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> ChatClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    @property
    def models_url(self) -> str:
        """``.../v1/models`` next to the chat endpoint."""
        base = self.endpoint.rstrip("/")
        if self.native_ollama:
            return base[: -len("/api/chat")] + "/v1/models"
        for suffix in ("/chat/completions", "/completions"):
            if base.endswith(suffix):
                return base[: -len(suffix)] + "/models"
        return base.rsplit("/", 1)[0] + "/models"

    def new_call_id(self) -> str:
        """A fresh id (``call_<n>``) for a tool call the server sent without one."""
        return f"call_{next(self._ids)}"

    # -- requests ------------------------------------------------------------------------
    async def models(self) -> list[str]:
        """Ids the server lists at ``/v1/models`` (for ``deskpilot doctor``)."""
        url = self.models_url

        async def fetch() -> tuple[int, bytes]:
            async with self._http.stream("GET", url, headers=self._headers) as response:
                parts = [chunk async for chunk in self._capped(response, attempt=1, context=None)]
                return response.status_code, b"".join(parts)

        try:
            # One deadline and the body cap, as for completions.
            status, content = await asyncio.wait_for(fetch(), self.timeout)
        except asyncio.TimeoutError as exc:
            raise self._deadline_error(attempts=1, context=None, status=None, streamed=False) from exc
        except httpx.TimeoutException as exc:
            raise self._timeout_error(exc, attempts=1, context=None, url=url) from exc
        except httpx.HTTPError as exc:
            raise self._connection_error(exc, attempts=1, context=None, url=url) from exc
        if status >= 400:
            raise self._http_error(status, content, attempts=1, context=None, url=url)
        try:
            data = orjson.loads(content)
        except orjson.JSONDecodeError as exc:
            raise self._response_error(
                f"{url} did not answer JSON", content, attempts=1, context=None
            ) from exc
        items = data.get("data") if isinstance(data, dict) else None
        if not isinstance(items, list):
            raise self._response_error(f"{url} answered no model list", content, attempts=1, context=None)
        return [str(item["id"]) for item in items if isinstance(item, dict) and "id" in item]

    async def get_json(self, url: str, *, timeout: float = 5.0) -> tuple[Any, dict[str, str]]:
        """GET ``url`` (a server's side route: ``/props``, ``/api/ps``...) -> (JSON, headers).

        For ``deskpilot doctor``; raises a :class:`ModelError` when it cannot be read."""
        try:
            response = await self._http.get(url, headers=self._headers, timeout=timeout)
        except httpx.TimeoutException as exc:
            raise self._timeout_error(exc, attempts=1, context=None, url=url) from exc
        except httpx.HTTPError as exc:
            raise self._connection_error(exc, attempts=1, context=None, url=url) from exc
        if response.status_code >= 400:
            raise self._http_error(response.status_code, response.content, attempts=1, context=None, url=url)
        try:
            return orjson.loads(response.content), dict(response.headers)
        except orjson.JSONDecodeError as exc:
            raise self._response_error(f"{url} did not answer JSON", response.content, attempts=1,
                                       context=None) from exc

    def base_url(self) -> str:
        """The server's root (``http://host:port``), for routes outside ``/v1``."""
        parts = httpx.URL(self.endpoint)
        port = f":{parts.port}" if parts.port else ""
        return f"{parts.scheme}://{parts.host}{port}"

    async def chat(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        tool_choice: str | dict[str, Any] = "auto",
        temperature: float | None = None,
        max_tokens: int | None = None,
        stream: bool | None = None,
        extra: Mapping[str, Any] | None = None,
        context: dict[str, Any] | None = None,
        on_tool_call: ToolCallCallback | None = None,
    ) -> Completion:
        """Convenience: build the body from plain messages (no byte cache) and complete it."""
        body: dict[str, Any] = {"model": self.model, "messages": messages}
        if tools:
            body["tools"] = tools
            body["tool_choice"] = tool_choice
        if temperature is not None:
            body["temperature"] = temperature
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        if stream if stream is not None else self.stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        if extra:
            body.update(extra)
        return await self.complete(orjson.dumps(body), context=context, on_tool_call=on_tool_call)

    async def complete(
        self,
        body: bytes | Mapping[str, Any],
        *,
        context: dict[str, Any] | None = None,
        on_tool_call: ToolCallCallback | None = None,
    ) -> Completion:
        """POST ``body`` (serialized JSON, or a mapping serialized here) and return the answer.

        ``context`` (e.g. ``{"turn": 3}``) is attached to errors and log records.
        ``on_tool_call(call)`` (sync or async) runs for each tool call once it is complete;
        it is awaited before the rest of the stream is read, so it should only *start* the
        work (e.g. create a task), not do it.
        """
        payload = body if isinstance(body, bytes) else orjson.dumps(dict(body))
        # What goes on the wire: the same request in Ollama's native form for /api/chat
        # (the logs keep the OpenAI form, whose images they know how to summarize).
        wire = to_native_request(payload, num_ctx=self.num_ctx) if self.native_ollama else payload
        started = time.perf_counter()
        attempts = 1 + self.max_retries
        retry_wait = 0.0
        summary: dict[str, Any] | None = None
        if self.exchange_log is not None:
            summary = self.exchange_log.sanitize_request(payload)
        last: _Retryable | None = None
        for attempt in range(1, attempts + 1):
            try:
                completion = await self._attempt(
                    payload, attempt=attempt, context=context, on_tool_call=on_tool_call,
                    summary=summary, wire=wire,
                )
            except _Retryable as retry:
                last = retry
                if attempt == attempts:
                    break
                delay = self._delay(attempt, retry.retry_after)
                retry_wait += delay
                await asyncio.sleep(delay)
                continue
            completion.attempts = attempt
            completion.timings.total_s = time.perf_counter() - started
            completion.timings.retry_wait_s = retry_wait
            return completion
        assert last is not None
        error = last.error
        error.details["attempts"] = attempts
        if attempts > 1 and "after" not in str(error):
            error.args = (f"{error} (after {attempts} attempts)",)
        raise error

    def _check_wait(self, error: ModelHTTPError, wait: float | None) -> None:
        """Fail at once when the server asks for a longer wait than this run can give.

        Waiting ``Retry-After: 86400`` for two minutes and then failing helps nobody; the
        bound is ``max_retry_after`` and the run's remaining time (:attr:`run_deadline`)."""
        if wait is None:
            return
        limit = self.max_retry_after
        where = f"max_retry_after ({self.max_retry_after:g} s)"
        if self.run_deadline is not None:
            left = self.run_deadline - time.monotonic()
            if left < limit:
                limit, where = max(0.0, left), f"the run's remaining time ({max(0.0, left):.0f} s)"
        if wait > limit:
            error.details["retry_wait_s"] = wait
            error.args = (f"{error} — the server asks to wait {wait:g} s before trying again, more than "
                          f"{where}: not retried",)
            raise error

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return max(0.0, min(retry_after, self.max_retry_after))
        base = min(self.max_backoff, self.backoff * (2 ** (attempt - 1)))
        # Jitter in [0.5, 1.5) x base so clients that failed together do not return together.
        return float(base * (0.5 + self._rng.random()))

    async def _attempt(
        self,
        payload: bytes,
        *,
        attempt: int,
        context: dict[str, Any] | None,
        on_tool_call: ToolCallCallback | None,
        summary: dict[str, Any] | None,
        wire: bytes | None = None,
    ) -> Completion:
        t0 = time.perf_counter()
        status: int | None = None
        ttfb = 0.0
        log_response: Any = None
        streamed = False
        emitted: list[ToolCall] = []

        async def exchange() -> tuple[Completion, Any]:
            nonlocal status, ttfb, log_response, streamed
            async with self._http.stream(
                "POST", self.endpoint, content=payload if wire is None else wire, headers=self._headers
            ) as response:
                ttfb = time.perf_counter() - t0
                status = response.status_code
                ctype = response.headers.get("content-type", "")
                if status >= 300 or status < 200:
                    body = await _read_limited(response, _MAX_ERROR_BODY)
                    log_response = _body_for_log(body)
                    error = self._http_error(status, body, attempts=attempt, context=context,
                                             location=response.headers.get("location"))
                    verdict = classify_http_error(status, body, response.headers)
                    error.details["retry"] = verdict.kind
                    if verdict.kind == "permanent" or status not in _RETRY_STATUSES:
                        raise error
                    self._check_wait(error, verdict.wait)
                    raise _Retryable(error, verdict.wait)
                # Every body is read through the size cap (model.max_response_mb).
                chunks = self._capped(response, attempt=attempt, context=context)
                head = await _first_bytes(chunks)
                if self.native_ollama:
                    streamed = "ndjson" in ctype
                    completion, log_response = await self._read_native(
                        _prepend(head, chunks), ctype, t0=t0, attempt=attempt, context=context,
                        on_tool_call=on_tool_call, emitted=emitted,
                    )
                elif _is_event_stream(ctype, head):
                    streamed = True
                    completion, log_response = await self._read_stream(
                        _prepend(head, chunks), t0=t0, attempt=attempt, context=context,
                        on_tool_call=on_tool_call, emitted=emitted,
                    )
                else:
                    body = b"".join([head, *[chunk async for chunk in chunks]])
                    completion, log_response = await self._read_json(
                        body, ctype, attempt=attempt, context=context, on_tool_call=on_tool_call,
                        t0=t0,
                    )
                return completion, log_response

        try:
            try:
                # One deadline for the whole request (httpx's timeout is per read, which a
                # server dripping a byte at a time, or a stream of keep-alive comments,
                # never trips).
                completion, log_response = await asyncio.wait_for(exchange(), self.timeout)
            except asyncio.TimeoutError as exc:
                error_d = self._deadline_error(attempts=attempt, context=context, status=status, streamed=streamed)
                if self.retry_timeouts and not emitted:
                    raise _Retryable(error_d) from exc
                raise error_d from exc
            except httpx.TimeoutException as exc:
                error_t = self._timeout_error(exc, attempts=attempt, context=context)
                if isinstance(exc, httpx.ConnectTimeout) or (self.retry_timeouts and not emitted):
                    raise _Retryable(error_t) from exc
                raise error_t from exc
            except (httpx.ConnectError, httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError) as exc:
                error_c = self._connection_error(exc, attempts=attempt, context=context, status=status)
                if emitted:
                    error_c.details["emitted_tool_calls"] = [c.id for c in emitted]
                    error_c.args = (
                        f"{error_c} — not retried: tool call {emitted[0].name!r} had already "
                        "been handed to the agent",
                    )
                    raise error_c from exc
                raise _Retryable(error_c) from exc
            except httpx.HTTPError as exc:
                # Invalid URL, unsupported protocol, too many redirects...: not transient.
                raise self._connection_error(exc, attempts=attempt, context=context, status=status) from exc
        except (_Retryable, ModelError) as failure:
            err = failure.error if isinstance(failure, _Retryable) else failure
            self._log(payload, summary, attempt, status, log_response, str(err), ttfb, t0, streamed, context)
            raise
        completion.timings.ttfb_s = ttfb
        self._log(payload, summary, attempt, status, log_response, None, ttfb, t0, streamed, context)
        return completion

    def _log(
        self,
        payload: bytes,
        summary: dict[str, Any] | None,
        attempt: int,
        status: int | None,
        response: Any,
        error: str | None,
        ttfb: float,
        t0: float,
        streamed: bool,
        context: dict[str, Any] | None,
    ) -> None:
        if self.exchange_log is None or self.exchange_log.closed:
            return
        self.exchange_log.record(
            endpoint=self.endpoint,
            request_body=payload,
            request_summary=summary,
            attempt=attempt,
            status=status,
            response=response,
            error=error,
            timings={"ttfb_s": ttfb, "total_s": time.perf_counter() - t0},
            stream=streamed,
            headers=self._headers,
            context=context,
        )

    async def _stream_completion(
        self,
        assembled: Any,
        *,
        cut: str | None,
        emitted: list[ToolCall],
        on_tool_call: ToolCallCallback | None,
        first_call: float | None,
        t0: float,
        attempt: int,
        context: dict[str, Any] | None,
    ) -> Completion:
        """The completion of an assembled stream (SSE or Ollama's NDJSON), or, when the stream
        was ``cut`` short (the reason), a stream error: retried unless a call of it was
        already handed to the agent."""
        if cut is not None:
            error = ModelStreamError(cut, **self._details(attempt, context, body="", cut_short=True))
            if emitted:
                # An action already started on a call of this stream: never send it again.
                error.details["emitted_tool_calls"] = [c.id for c in emitted]
                raise error
            raise _Retryable(error)
        completion = self._build(
            assembled.message(), assembled.finish_reason, assembled.usage, assembled.response(),
            body=b"", attempt=attempt, context=context, streamed=True,
        )
        if emitted:
            # Keep the objects handed out, so identity and ids match what the caller holds.
            by_id = {c.id: c for c in emitted}
            completion.tool_calls = [by_id.get(c.id, c) for c in completion.tool_calls]
        elif on_tool_call is not None:
            for call in completion.tool_calls:  # calls found in the content (fallback)
                await _call(on_tool_call, call)
        completion.timings.first_tool_call_s = first_call if first_call is not None else (
            (time.perf_counter() - t0) if completion.tool_calls else None
        )
        return completion

    async def _read_json(
        self,
        body: bytes,
        ctype: str,
        *,
        attempt: int,
        context: dict[str, Any] | None,
        on_tool_call: ToolCallCallback | None,
        t0: float,
    ) -> tuple[Completion, Any]:
        try:
            data = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            kind = f" (content-type {ctype})" if ctype and "json" not in ctype else ""
            error = self._response_error(
                f"{self.endpoint} answered with a body that is not JSON{kind}; "
                "is this an OpenAI-compatible /v1/chat/completions endpoint?",
                body, attempts=attempt, context=context,
            )
            # A garbled body is often a transient proxy/keep-alive fault: worth one more try.
            raise _Retryable(error) from exc
        if not isinstance(data, dict):
            raise self._response_error(
                f"{self.endpoint} answered JSON that is not an object", body, attempts=attempt, context=context
            )
        if data.get("error"):
            # Some servers report errors with status 200.
            raise self._http_error(200, body, attempts=attempt, context=context)
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise self._response_error(
                f"{self.endpoint} answered without choices; is the model loaded and is this a "
                "chat-completions endpoint?", body, attempts=attempt, context=context,
            )
        choice = choices[0]
        message = choice.get("message")
        if not isinstance(message, dict):
            raise self._response_error(
                f"{self.endpoint} answered a choice without a message", body, attempts=attempt, context=context
            )
        usage = data.get("usage") if isinstance(data.get("usage"), dict) else None
        completion = self._build(
            message, choice.get("finish_reason"), usage, data, body=body, attempt=attempt,
            context=context, streamed=False,
        )
        completion.timings.first_tool_call_s = (time.perf_counter() - t0) if completion.tool_calls else None
        if on_tool_call is not None:
            for call in completion.tool_calls:
                await _call(on_tool_call, call)
        return completion, data

    async def _read_stream(
        self,
        chunks: AsyncIterator[bytes],
        *,
        t0: float,
        attempt: int,
        context: dict[str, Any] | None,
        on_tool_call: ToolCallCallback | None,
        emitted: list[ToolCall],
    ) -> tuple[Completion, Any]:
        decoder = SSEDecoder()
        assembler = StreamAssembler(new_id=self.new_call_id)
        first_call: float | None = None
        async for chunk in chunks:
            for event in decoder.feed(chunk):
                for raw_call in assembler.feed(event):
                    if first_call is None:
                        first_call = time.perf_counter() - t0
                    if on_tool_call is not None:
                        call = parse_message_tool_calls([raw_call], new_id=self.new_call_id)[0]
                        call.index = len(emitted)
                        emitted.append(call)
                        await _call(on_tool_call, call)
                if assembler.error is not None:
                    break
            if assembler.done or assembler.error is not None:
                break
        if assembler.done:
            # Read the (empty) rest so the connection goes back to the keep-alive pool;
            # a server that keeps the stream open after [DONE] only costs a short wait.
            with contextlib.suppress(asyncio.TimeoutError, httpx.HTTPError):
                await asyncio.wait_for(_drain(chunks), _DRAIN_TIMEOUT)
        elif assembler.error is None:
            for event in decoder.close():
                assembler.feed(event)
        assembled = assembler.finish()
        log_response = {"assembled": assembled.response(), "chunks": assembled.chunks,
                        "done": assembled.done, "bad_events": assembled.bad_events}
        if assembled.error is not None:
            raise self._stream_error(orjson.dumps({"error": assembled.error}), attempts=attempt, context=context)
        cut = None
        if not assembled.done and assembled.finish_reason is None:
            started = bool(assembled.content or assembled.tool_calls or assembled.reasoning)
            what = "part of an answer" if started else "any answer"
            cut = (
                f"{self.endpoint} ended the stream after {what}, with neither a finish_reason "
                f"nor data: [DONE] ({assembled.chunks} chunks, {assembled.bad_events} unreadable "
                "events): the answer may be cut short, so it is not used"
            )
        completion = await self._stream_completion(
            assembled, cut=cut, emitted=emitted, on_tool_call=on_tool_call, first_call=first_call,
            t0=t0, attempt=attempt, context=context,
        )
        return completion, log_response

    async def _read_native(
        self,
        chunks: AsyncIterator[bytes],
        ctype: str,
        *,
        t0: float,
        attempt: int,
        context: dict[str, Any] | None,
        on_tool_call: ToolCallCallback | None,
        emitted: list[ToolCall],
    ) -> tuple[Completion, Any]:
        """An answer of Ollama's native ``/api/chat``: one JSON object, or NDJSON lines."""
        if "ndjson" not in ctype:
            body = b"".join([chunk async for chunk in chunks])
            try:
                data = orjson.loads(body)
            except orjson.JSONDecodeError:
                data = None
            if not isinstance(data, dict):
                # Not JSON: let the OpenAI reader report it the usual way.
                return await self._read_json(body, ctype, attempt=attempt, context=context,
                                             on_tool_call=on_tool_call, t0=t0)
            converted = orjson.dumps(to_openai_response(data, self.new_call_id))
            return await self._read_json(converted, "application/json", attempt=attempt, context=context,
                                         on_tool_call=on_tool_call, t0=t0)
        assembler = NativeAssembler(self.new_call_id)
        first_call: float | None = None
        async for chunk in chunks:
            for raw_call in assembler.feed(chunk):
                first_call = first_call if first_call is not None else time.perf_counter() - t0
                if on_tool_call is not None:
                    call = parse_message_tool_calls([raw_call], new_id=self.new_call_id)[0]
                    call.index = len(emitted)
                    emitted.append(call)
                    await _call(on_tool_call, call)
            if assembler.done or assembler.error is not None:
                break
        else:
            assembler.close()
        assembled = assembler.finish()
        log_response = {"assembled": assembled.response(), "lines": assembled.chunks, "done": assembled.done,
                        "bad_lines": assembled.bad_events}
        if assembled.error is not None:
            raise self._stream_error(orjson.dumps({"error": assembled.error}), attempts=attempt, context=context)
        cut = None
        if not assembled.done:
            cut = (
                f"{self.endpoint} ended the stream before its last line (\"done\": true) "
                f"({assembled.chunks} lines): the answer may be cut short, so it is not used"
            )
        completion = await self._stream_completion(
            assembled, cut=cut, emitted=emitted, on_tool_call=on_tool_call, first_call=first_call,
            t0=t0, attempt=attempt, context=context,
        )
        return completion, log_response

    def _build(
        self,
        message: dict[str, Any],
        finish_reason: Any,
        usage: dict[str, Any] | None,
        raw: dict[str, Any],
        *,
        body: bytes,
        attempt: int,
        context: dict[str, Any] | None,
        streamed: bool,
    ) -> Completion:
        content = _content_text(message.get("content"))
        if content is None:
            raise self._response_error(
                f"{self.endpoint} answered a message whose content is a "
                f"{type(message.get('content')).__name__}, not text",
                body, attempts=attempt, context=context,
            )
        reasoning = message.get("reasoning_content") or message.get("reasoning")
        tool_calls = parse_message_tool_calls(message.get("tool_calls"), new_id=self.new_call_id)
        if not tool_calls and self.parse_content_tool_calls and content:
            content, tool_calls = split_content_tool_calls(content, new_id=self.new_call_id)
        if not tool_calls and self.parse_content_tool_calls and isinstance(reasoning, str):
            tool_calls = reasoning_tool_calls(content, reasoning, new_id=self.new_call_id)
        history_message: dict[str, Any] = {"role": "assistant", "content": content}
        if tool_calls:
            history_message["tool_calls"] = [_history_call(c) for c in tool_calls]
        return Completion(
            message=history_message,
            content=content,
            tool_calls=tool_calls,
            finish_reason=finish_reason if isinstance(finish_reason, str) else None,
            usage=usage,
            raw=raw,
            reasoning=reasoning if isinstance(reasoning, str) else None,
            streamed=streamed,
            model=raw.get("model") if isinstance(raw.get("model"), str) else None,
        )

    # -- errors --------------------------------------------------------------------------
    def _details(self, attempts: int, context: dict[str, Any] | None, **more: Any) -> dict[str, Any]:
        details: dict[str, Any] = {"endpoint": self.endpoint, "model": self.model, "attempts": attempts}
        if context:
            details["context"] = dict(context)
        details.update(more)
        return details

    def _connection_error(
        self, exc: Exception, *, attempts: int, context: dict[str, Any] | None,
        url: str | None = None, status: int | None = None,
    ) -> ModelConnectionError:
        url = url or self.endpoint
        reason = str(exc) or type(exc).__name__
        if isinstance(exc, httpx.ConnectError):
            message = (
                f"no server at {url}: is LM Studio (or your OpenAI-compatible server) running, "
                f"its server started and the model loaded? Set LMSTUDIO_ENDPOINT to point "
                f"elsewhere. ({reason})"
            )
        elif isinstance(exc, (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError)):
            message = (
                f"the connection to {url} broke before the answer was complete ({reason}); "
                "the server may have crashed or unloaded the model"
            )
        else:
            message = f"cannot talk to {url}: {reason}"
        return ModelConnectionError(message, **self._details(attempts, context, status=status, cause=reason))

    async def _capped(
        self, response: httpx.Response, *, attempt: int, context: dict[str, Any] | None
    ) -> AsyncIterator[bytes]:
        """The body's chunks, refused (ModelResponseError) past ``max_response_bytes``."""
        limit = self.max_response_bytes
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise self._too_large(f"announces {int(declared)} bytes", attempts=attempt, context=context)
        size = 0
        async for chunk in response.aiter_bytes():
            size += len(chunk)
            if size > limit:
                raise self._too_large(f"sent more than {limit} bytes", attempts=attempt, context=context)
            yield chunk

    def _too_large(self, what: str, *, attempts: int, context: dict[str, Any] | None) -> ModelResponseError:
        return ModelResponseError(
            f"{self.endpoint} answered a body that {what}, over the limit of "
            f"{self.max_response_bytes} bytes (model.max_response_mb); not read further",
            **self._details(attempts, context, limit_bytes=self.max_response_bytes),
        )

    def _deadline_error(
        self, *, attempts: int, context: dict[str, Any] | None, status: int | None, streamed: bool
    ) -> ModelTimeoutError:
        if status is None:
            phase = "waiting for the answer's headers from"
        else:
            phase = f"reading the {'stream' if streamed else 'answer'} from"
        message = (
            f"timed out: no complete answer within {self.timeout:g} s (one deadline per request) {phase} "
            f"{self.endpoint}: the model may be slow or the server stalled; raise LMSTUDIO_TIMEOUT "
            f"(now {self.timeout:g})"
        )
        return ModelTimeoutError(
            message, **self._details(attempts, context, timeout_s=self.timeout, phase=phase, status=status)
        )

    def _timeout_error(
        self, exc: httpx.TimeoutException, *, attempts: int, context: dict[str, Any] | None,
        url: str | None = None,
    ) -> ModelTimeoutError:
        url = url or self.endpoint
        phase = {
            httpx.ConnectTimeout: "connecting to",
            httpx.ReadTimeout: "waiting for an answer from",
            httpx.WriteTimeout: "sending the request to",
            httpx.PoolTimeout: "waiting for a free connection to",
        }.get(type(exc), "talking to")
        message = (
            f"timed out after {self.timeout:g} s {phase} {url}: the model may still be loading "
            f"or the prompt (images) too large for it; raise LMSTUDIO_TIMEOUT (now {self.timeout:g}) "
            "or use smaller screenshots (AGENT_IMAGE_W/H)"
        )
        return ModelTimeoutError(message, **self._details(attempts, context, timeout_s=self.timeout, phase=phase))

    def _http_error(
        self, status: int, body: bytes, *, attempts: int, context: dict[str, Any] | None,
        url: str | None = None, streamed: bool = False, location: str | None = None,
    ) -> ModelHTTPError:
        url = url or self.endpoint
        server_message = _server_error_message(body)
        hint = _status_hint(status, server_message)
        if 300 <= status < 400:
            # Redirects are not followed: a POST body would be dropped or replayed silently.
            hint = f"the endpoint redirects to {location or '(no location)'}; use that URL as LMSTUDIO_ENDPOINT"
        where = "in the stream" if streamed else f"with HTTP {status}"
        message = f"{url} answered {where}: {server_message or '(no error message)'}"
        if hint:
            message = f"{message} — {hint}"
        return ModelHTTPError(
            message, status=status,
            **self._details(attempts, context, body=_excerpt(body), server_message=server_message),
        )

    def _stream_error(self, body: bytes, *, attempts: int, context: dict[str, Any] | None) -> ModelStreamError:
        """An error event inside a 200 stream (not retried: the server said what is wrong)."""
        server_message = _server_error_message(body)
        hint = _status_hint(200, server_message)
        message = f"{self.endpoint} answered in the stream: {server_message or '(no error message)'}"
        if hint:
            message = f"{message} — {hint}"
        return ModelStreamError(
            message, **self._details(attempts, context, status=200, body=_excerpt(body),
                                     server_message=server_message),
        )

    def _response_error(
        self, message: str, body: bytes, *, attempts: int, context: dict[str, Any] | None,
    ) -> ModelResponseError:
        return ModelResponseError(message, **self._details(attempts, context, body=_excerpt(body)))


async def _call(callback: ToolCallCallback, call: ToolCall) -> None:
    result = callback(call)
    if inspect.isawaitable(result):
        await result


async def _drain(chunks: AsyncIterator[bytes]) -> None:
    async for _ in chunks:
        pass


_SSE_FIELDS = (b"data:", b"event:", b"id:", b"retry:", b":")


async def _first_bytes(chunks: AsyncIterator[bytes]) -> bytes:
    """The body up to its first non-blank chunk (b"" for an empty body).

    Each chunk is looked at once and joined once: linear in the leading whitespace (the
    former ``head += chunk; head.strip()`` was quadratic)."""
    parts: list[bytes] = []
    async for chunk in chunks:
        parts.append(chunk)
        if chunk.strip():
            break
    return b"".join(parts)


def _is_event_stream(ctype: str, head: bytes) -> bool:
    """SSE or one JSON body: the first bytes decide over a wrong content type."""
    start = head.lstrip()
    if start.startswith((b"{", b"[")):
        return False
    if start.startswith(_SSE_FIELDS):
        return True
    return "text/event-stream" in ctype


async def _prepend(head: bytes, chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    if head:
        yield head
    async for chunk in chunks:
        yield chunk


async def _read_limited(response: httpx.Response, limit: int) -> bytes:
    parts: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        parts.append(chunk)
        size += len(chunk)
        if size >= limit:
            break
    return b"".join(parts)[:limit]


def _body_for_log(body: bytes) -> Any:
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return {"unparsed_body": _excerpt(body)}


def _excerpt(body: bytes) -> str:
    text = body[: _BODY_EXCERPT * 4].decode("utf-8", "replace")
    return text if len(text) <= _BODY_EXCERPT else text[:_BODY_EXCERPT] + "..."


#: The longest Retry-After read as a number (about 31 700 years); a longer one is cut to it.
_LONGEST_RETRY_AFTER = 1e12


def _retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header, or None when it has none that is valid.

    RFC 9110 section 10.2.3: ``Retry-After = HTTP-date / delay-seconds`` with
    ``delay-seconds = 1*DIGIT``. Anything else (``inf``, ``nan``, ``-5``, ``1e3``, garbage)
    is treated as absent, so the usual backoff applies: ``inf`` read as a number made the run
    fail at once ("asks to wait inf s"), while ``nan`` slipped through as no wait at all.
    """
    if not value:
        return None
    value = value.strip()
    if value.isascii() and value.isdigit():
        try:
            seconds = int(value)
        except ValueError:  # more digits than int() reads: no run waits that long anyway
            return _LONGEST_RETRY_AFTER
        # Capped so the float holds it; any such wait is refused by _check_wait all the same.
        return float(min(seconds, _LONGEST_RETRY_AFTER))
    if not value[:1].isalpha():
        # An HTTP-date starts with the day's name; a number in any other spelling is invalid.
        return None
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return max(0.0, when.timestamp() - time.time())


@dataclass(frozen=True, slots=True)
class RetryVerdict:
    """How to treat a failed HTTP answer: ``kind`` is ``"permanent"`` (never retried),
    ``"rate_limit"`` (retried after ``wait`` seconds, from the headers) or
    ``"transient"`` (retried with backoff, or after ``wait`` when the server said)."""

    kind: str
    wait: float | None = None
    reason: str = ""


# Failures that no retry can fix, whatever the status says (llama.cpp answers most of them
# with HTTP 500): each names its source.
_PERMANENT = (
    # llama.cpp tools/server/utils.hpp: "tools param requires --jinja flag"
    ("--jinja", "llama.cpp was started without --jinja"),
    # llama.cpp tools/server/utils.hpp (mtmd): "image input is not supported - hint: if this
    # is unexpected, you may need to provide the mmproj"
    ("mmproj", "the model has no vision projector (mmproj)"),
    ("image input is not supported", "the model does not accept images"),
    # OpenAI 429 {"error": {"type": "insufficient_quota", "code": "insufficient_quota"}}
    ("insufficient_quota", "the account has no quota left"),
    ("exceeded your current quota", "the account has no quota left"),
    # llama.cpp: "the request exceeds the available context size, try increasing it"
    ("exceeds the available context size", "the prompt does not fit the context"),
    ("exceed_context_size", "the prompt does not fit the context"),
    # Ollama: "registry.ollama.ai/library/x does not support tools"
    ("does not support tools", "the model does not support tool calls"),
    # LM Studio: "No models loaded. Please load a model..."
    ("no models loaded", "no model is loaded"),
)


def classify_http_error(status: int, body: bytes, headers: Mapping[str, str]) -> RetryVerdict:
    """Permanent, rate limit or transient, from the status, the error body and the headers."""
    lower = body[: _MAX_ERROR_BODY].decode("utf-8", "replace").lower()
    for needle, reason in _PERMANENT:
        if needle in lower:
            return RetryVerdict("permanent", None, reason)
    wait = _header_wait(headers)
    if status == 429:
        return RetryVerdict("rate_limit", wait, "rate limited")
    if status in _RETRY_STATUSES:
        return RetryVerdict("transient", wait, "transient")
    return RetryVerdict("permanent", None, f"HTTP {status}")


def _header_wait(headers: Mapping[str, str]) -> float | None:
    """Seconds to wait from ``retry-after-ms``, ``Retry-After`` or the OpenAI-style
    ``x-ratelimit-reset-requests`` / ``x-ratelimit-reset-tokens`` (``"6m0s"``, ``"20ms"``),
    taking the reset of an exhausted limit (``x-ratelimit-remaining-* == 0``) first."""
    value = headers.get("retry-after-ms")
    if value:
        with contextlib.suppress(ValueError):
            milliseconds = float(value)
            # inf, nan and negative values say nothing: absent, like an invalid Retry-After.
            if math.isfinite(milliseconds) and milliseconds >= 0:
                return milliseconds / 1000.0
    wait = _retry_after(headers.get("retry-after"))
    if wait is not None:
        return wait
    resets: list[float] = []
    exhausted: list[float] = []
    for kind in ("requests", "tokens"):
        reset = _duration(headers.get(f"x-ratelimit-reset-{kind}"))
        if reset is None:
            continue
        resets.append(reset)
        if (headers.get(f"x-ratelimit-remaining-{kind}") or "").strip() == "0":
            exhausted.append(reset)
    if exhausted:
        return max(exhausted)
    return max(resets) if resets else None


_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")


def _duration(value: str | None) -> float | None:
    """``"1h2m3.5s"``, ``"6m0s"``, ``"20ms"`` or plain seconds -> seconds."""
    if not value:
        return None
    text = value.strip().lower()
    with contextlib.suppress(ValueError):
        seconds = float(text)
        return seconds if math.isfinite(seconds) and seconds >= 0 else None
    parts = _DURATION_PART.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    scale = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
    return sum(float(n) * scale[u] for n, u in parts)


def _server_error_message(body: bytes) -> str:
    """The human part of an error body in the dialects servers speak.

    OpenAI / llama.cpp / Ollama: ``{"error": {"message": ...}}``; LM Studio also
    ``{"error": "..."}``; vLLM: ``{"object": "error", "message": ...}``; FastAPI-style:
    ``{"detail": ...}``; otherwise the text itself.
    """
    if not body:
        return ""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        text = body[:_BODY_EXCERPT * 4].decode("utf-8", "replace").strip()
        if text.lower().startswith(("<!doctype", "<html")):
            return "an HTML page (is the URL a chat-completions API endpoint?)"
        return text[:_BODY_EXCERPT]
    if isinstance(data, dict):
        err = data.get("error")
        if isinstance(err, dict):
            msg = err.get("message") or err.get("msg") or err.get("type")
            if msg:
                return str(msg)[:_BODY_EXCERPT]
        elif isinstance(err, str) and err:
            return err[:_BODY_EXCERPT]
        for key in ("message", "detail", "msg"):
            value = data.get(key)
            if value:
                return (value if isinstance(value, str) else orjson.dumps(value).decode())[:_BODY_EXCERPT]
    return orjson.dumps(data).decode()[:_BODY_EXCERPT]


def _status_hint(status: int, server_message: str) -> str:
    lower = server_message.lower()
    if "try pulling it first" in lower:
        return "Ollama does not have this model: `ollama pull MODEL` (or name one `ollama list` shows)"
    if status == 404 or ("not found" in lower and "model" in lower):
        return ("check that LMSTUDIO_ENDPOINT ends with /v1/chat/completions and that "
                "LMSTUDIO_MODEL names a loaded model (see GET /v1/models)")
    if status in (401, 403):
        return "the server wants an API key: pass --api-key (or set OPENAI_API_KEY for OpenAI)"
    if status == 413 or ("context" in lower and ("length" in lower or "exceed" in lower or "overflow" in lower)):
        return ("the request is too large for the model: use smaller screenshots, keep fewer "
                "(AGENT_KEEP_LAST_SCREENSHOTS) or load the model with a longer context")
    limit = max_images_from_error(server_message)
    if limit is not None:
        return (f"the server takes at most {limit} image(s) per request (vLLM --limit-mm-per-prompt): "
                f"keep fewer screenshots (--set history.keep_last_screenshots={limit}) or restart it "
                'with a higher limit, e.g. --limit-mm-per-prompt \'{"image": 4}\'')
    if "--jinja" in lower:
        return "restart llama-server with --jinja (tool calls need the model's chat template)"
    if "mmproj" in lower:
        return "start llama-server with the model's vision projector: --mmproj FILE (or -hf with a vision model)"
    if "insufficient_quota" in lower or "exceeded your current quota" in lower:
        return "the account has no quota left: check billing (not retried)"
    if "image" in lower or "vision" in lower or "multimodal" in lower:
        return "does the loaded model accept images? load a vision model (e.g. qwen3-vl-8b-instruct)"
    if "tool" in lower or "function" in lower:
        return "does the model/server support tool calls? (LM Studio: a model with tool use)"
    if status == 429:
        return "the server is rate limiting; retried with backoff"
    if status >= 500:
        return "a server-side failure (see the server's log)"
    return ""


_MAX_IMAGES = re.compile(r"at most (\d+) image", re.IGNORECASE)


def max_images_from_error(message: str) -> int | None:
    """N from vLLM's "At most N image(s) may be provided in one prompt/request"."""
    m = _MAX_IMAGES.search(message)
    return int(m.group(1)) if m else None


def _content_text(content: Any) -> str | None:
    """Message content as text; None when it is not text at all."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        # Some servers answer content parts: [{"type": "text", "text": ...}].
        texts = []
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                texts.append(part["text"])
            elif isinstance(part, str):
                texts.append(part)
            else:
                return None
        return "".join(texts)
    return None


def _history_call(call: ToolCall) -> dict[str, Any]:
    out = call.to_openai()
    if call.error is not None:
        # llama.cpp and some Jinja templates parse arguments of past calls as JSON and
        # fail the whole request on a bad one; keep what the model wrote, but as JSON.
        out["function"]["arguments"] = orjson.dumps({"invalid_arguments": call.raw_arguments}).decode()
    return out
