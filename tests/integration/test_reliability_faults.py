"""Fault injection: a proxy on 127.0.0.1 between the agent and the test server.

The proxy speaks just enough HTTP/1.1 to work request by request: it reads each request
the agent sends and, following a script, forwards it to the real test server and
relays the answer, or injects a fault: drops or resets the connection, answers 429/500/
502 itself, returns invalid JSON or HTML with a 200, stalls in the middle of the body,
or cuts the (SSE or JSON) body in half, or relabels the real answer with the other
content type (JSON as ``text/event-stream``, an event stream as ``application/json``).

Every run must end with a successful retry or a clear error, and leave a complete,
valid run directory (run.json, turns.jsonl with whole lines, exchange log, summary).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from deskpilot.agent import iter_turns, load_config, load_summary, run_agent, validate_run_dir
from deskpilot.testing import ModelServer, PixelPolicy
from deskpilot.testing._desktop import TARGET_RGB, SimulatedDesktop

FAULTS = ("drop", "reset", "429", "500", "502", "invalid_json", "html", "stall", "truncate")
STALL_TIMEOUT = 0.6  # the client's model.timeout in stall runs


class FaultProxy:
    """A scripted HTTP/1.1 fault injector in front of ``upstream`` (host, port)."""

    def __init__(self, upstream: tuple[str, int], script: list[str], *, default: str = "pass") -> None:
        self.upstream = upstream
        self.script = list(script)
        self.default = default
        self.log: list[str] = []
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.base_events.Server | None = None
        self._thread = threading.Thread(target=self._main, name="fault-proxy", daemon=True)
        self._ready = threading.Event()
        self._writers: set[asyncio.StreamWriter] = set()
        self.port = 0

    # -- lifecycle -----------------------------------------------------------------------
    def __enter__(self) -> FaultProxy:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("fault proxy did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1/chat/completions"

    def _main(self) -> None:
        asyncio.set_event_loop(self._loop)

        async def start() -> None:
            self._server = await asyncio.start_server(self._client, "127.0.0.1", 0)
            self.port = self._server.sockets[0].getsockname()[1]

        self._loop.run_until_complete(start())
        self._ready.set()
        try:
            self._loop.run_forever()
        finally:
            assert self._server is not None
            self._server.close()
            for writer in list(self._writers):
                writer.close()
            self._loop.run_until_complete(asyncio.sleep(0))
            self._loop.close()

    # -- one client connection ------------------------------------------------------------
    async def _read_request(self, reader: asyncio.StreamReader) -> bytes | None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionError):
            return None
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value.strip())
        body = await reader.readexactly(length) if length else b""
        return head + body

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            while True:
                request = await self._read_request(reader)
                if request is None:
                    return
                fault = self.script.pop(0) if self.script else self.default
                self.log.append(fault)
                if not await self._serve(fault, request, writer):
                    return
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            self._writers.discard(writer)
            with contextlib.suppress(Exception):
                writer.close()

    @staticmethod
    def _response(status: int, reason: str, body: bytes, content_type: str, extra: str = "") -> bytes:
        return (
            f"HTTP/1.1 {status} {reason}\r\ncontent-type: {content_type}\r\ncontent-length: {len(body)}\r\n"
            f"{extra}connection: keep-alive\r\n\r\n"
        ).encode() + body

    async def _upstream(self, request: bytes) -> bytes:
        """Forward one request with ``Connection: close`` and read the whole answer."""
        head, _, body = request.partition(b"\r\n\r\n")
        lines = [ln for ln in head.split(b"\r\n") if not ln.lower().startswith(b"connection:")]
        lines.append(b"connection: close")
        reader, writer = await asyncio.open_connection(*self.upstream)
        try:
            writer.write(b"\r\n".join(lines) + b"\r\n\r\n" + body)
            await writer.drain()
            return await reader.read()
        finally:
            writer.close()

    async def _serve(self, fault: str, request: bytes, writer: asyncio.StreamWriter) -> bool:
        """Answer one request; False closes the client connection."""
        if fault == "drop":
            return False
        if fault == "reset":
            sock = writer.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()
            return False
        if fault in ("429", "500", "502"):
            status = int(fault)
            reason = {429: "Too Many Requests", 500: "Internal Server Error", 502: "Bad Gateway"}[status]
            body = json.dumps({"error": {"message": f"injected {status}", "type": "server_error"}}).encode()
            extra = "retry-after: 0\r\n" if status == 429 else ""
            writer.write(self._response(status, reason, body, "application/json", extra))
            await writer.drain()
            return True
        if fault == "invalid_json":
            writer.write(self._response(200, "OK", b'{"choices": [{"message": ', "application/json"))
            await writer.drain()
            return True
        if fault == "html":
            writer.write(self._response(200, "OK", b"<html><body>Gateway login</body></html>", "text/html"))
            await writer.drain()
            return True
        answer = await self._upstream(request)
        head, _, body = answer.partition(b"\r\n\r\n")
        if fault == "mislabel":
            # The real answer under the other content type: JSON sent as an event stream, an
            # event stream sent as JSON (what misconfigured proxies and gateways do).
            sse = b"text/event-stream" in head.lower()
            ctype = "application/json" if sse else "text/event-stream"
            writer.write(self._response(200, "OK", _dechunk(head, body), ctype))
            await writer.drain()
            return True
        if fault == "pass":
            head_lines = [ln for ln in head.split(b"\r\n") if not ln.lower().startswith(b"connection:")]
            is_chunked = any(ln.lower().startswith(b"transfer-encoding: chunked") for ln in head_lines)
            if not is_chunked and not any(ln.lower().startswith(b"content-length") for ln in head_lines):
                head_lines.append(b"content-length: %d" % len(body))
            head_lines.append(b"connection: keep-alive")
            writer.write(b"\r\n".join(head_lines) + b"\r\n\r\n" + body)
            await writer.drain()
            return True
        writer.write(head + b"\r\n\r\n" + body[: max(1, len(body) // 2)])
        await writer.drain()
        if fault == "stall":
            await asyncio.sleep(STALL_TIMEOUT * 4)
        return False  # truncate / stall: the connection ends mid-body


def _dechunk(head: bytes, body: bytes) -> bytes:
    """The payload of an HTTP/1.1 body, chunked or not."""
    if b"transfer-encoding: chunked" not in head.lower():
        return body
    out, rest = bytearray(), body
    while rest:
        size_line, _, rest = rest.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            break
        out += rest[:size]
        rest = rest[size + 2 :]
    return bytes(out)


@pytest.fixture(scope="module")
def figures() -> Iterator[list[dict[str, Any]]]:
    rows: list[dict[str, Any]] = []
    yield rows
    if rows:
        print("\n| fault | stream | transient/persistent | outcome | attempts | requests at server | run dir |")
        print("|---|---|---|---|---|---|---|")
        for r in rows:
            print(f"| {r['fault']} | {r['stream']} | {r['kind']} | {r['outcome']} | {r['attempts']} | "
                  f"{r['served']} | {'valid' if r['valid'] else 'INVALID'} |")


DESKS: list[SimulatedDesktop] = []


def run_through(tmp_path: Path, script: list[str], *, stream: bool, default: str = "pass",
                timeout: float = 5.0) -> tuple[Any, FaultProxy, ModelServer]:
    policy = PixelPolicy(TARGET_RGB, text="ok", steps=("click", "done"))
    desk = SimulatedDesktop()
    DESKS.append(desk)
    with ModelServer(policy) as server, FaultProxy(("127.0.0.1", server.port), script, default=default) as proxy:
        cfg = load_config(
            flags={"model.endpoint": proxy.endpoint, "run.runs_dir": str(tmp_path / "runs"),
                   "model.stream": stream, "model.timeout": timeout, "model.retries": 2},
            env={}, search_default=False,
        )
        result = run_agent(cfg, "click the target", screen_factory=lambda: desk, hands_factory=lambda: desk,
                           handle_signals=False)
    return result, proxy, server


def check_complete_run_dir(result: Any) -> None:
    run_dir: Path = result.run_dir
    assert validate_run_dir(run_dir) == []
    assert (run_dir / "run.json").is_file() and (run_dir / "summary.json").is_file()
    for line in (run_dir / "turns.jsonl").read_text().splitlines():
        json.loads(line)  # no truncated lines
    for line in (run_dir / "exchange.jsonl").read_text().splitlines():
        json.loads(line)
    summary = load_summary(run_dir)
    assert summary["outcome"] == result.outcome
    assert list(iter_turns(run_dir))


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("fault", FAULTS)
def test_a_transient_fault_is_retried_or_reported(tmp_path: Path, fault: str, stream: bool,
                                                  figures: list[dict[str, Any]]) -> None:
    timeout = STALL_TIMEOUT if fault == "stall" else 5.0
    result, proxy, server = run_through(tmp_path, [fault], stream=stream, timeout=timeout)
    check_complete_run_dir(result)
    attempts = len(proxy.log)
    figures.append({"fault": fault, "stream": stream, "kind": "transient", "outcome": result.outcome,
                    "attempts": attempts, "served": len(server.requests), "valid": True})
    if fault == "stall":
        # a read timeout after the server started answering is not retried (the answer
        # may have been acted on): a clear timeout error
        assert result.outcome in ("error", "answered")
        if result.outcome == "error":
            assert "ModelTimeoutError" in (result.error or "") and "timed out" in (result.error or "").lower()
        return
    assert result.outcome == "answered", result.error
    assert proxy.log[0] == fault and attempts >= 3  # the faulty attempt, its retry, the next turn
    assert server.problems == []
    # a retried request never repeats an action: the target was clicked exactly once
    assert len(DESKS[-1].target_clicks) == 1


def _clear_message(fault: str, error: str) -> bool:
    expected = {
        "drop": ("ModelConnectionError", "ModelResponseError"),
        "reset": ("ModelConnectionError", "ModelResponseError"),
        "429": ("ModelHTTPError",),
        "500": ("ModelHTTPError",),
        "502": ("ModelHTTPError",),
        "invalid_json": ("ModelResponseError",),
        "html": ("ModelResponseError",),
        "stall": ("ModelTimeoutError",),
        "truncate": ("ModelResponseError", "ModelConnectionError"),
    }[fault]
    return any(name in error for name in expected)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("fault", FAULTS)
def test_a_persistent_fault_ends_with_a_clear_error(tmp_path: Path, fault: str, stream: bool,
                                                    figures: list[dict[str, Any]]) -> None:
    timeout = STALL_TIMEOUT if fault == "stall" else 5.0
    started = time.monotonic()
    result, proxy, server = run_through(tmp_path, [], stream=stream, default=fault, timeout=timeout)
    elapsed = time.monotonic() - started
    check_complete_run_dir(result)
    figures.append({"fault": fault, "stream": stream, "kind": "persistent", "outcome": result.outcome,
                    "attempts": len(proxy.log), "served": len(server.requests), "valid": True,
                    "elapsed_s": round(elapsed, 2)})
    assert result.outcome == "error"
    error = result.error or ""
    assert _clear_message(fault, error), error
    assert "127.0.0.1" in error or "server" in error.lower()  # says which endpoint / what happened
    summary = load_summary(result.run_dir)
    assert summary["error"] == result.error
    assert 1 <= len(proxy.log) <= 3  # bounded retries, no retry storm


@pytest.mark.parametrize("persistent", [False, True], ids=["transient", "persistent"])
@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_a_mislabelled_answer_is_read_by_its_body(tmp_path: Path, stream: bool, persistent: bool,
                                                   figures: list[dict[str, Any]]) -> None:
    """A body under the wrong content type is still read for what it is (a JSON
    completion, or SSE events), so the run goes on: never a crash, never a double click."""
    script, default = (["mislabel"], "pass") if not persistent else ([], "mislabel")
    result, proxy, server = run_through(tmp_path, script, stream=stream, default=default)
    check_complete_run_dir(result)
    figures.append({"fault": "mislabel", "stream": stream, "kind": "persistent" if persistent else "transient",
                    "outcome": result.outcome, "attempts": len(proxy.log), "served": len(server.requests),
                    "valid": True})
    assert result.outcome == "answered", result.error
    assert proxy.log[0] == "mislabel"
    # read at the first try, nothing retried: the click turn and the answer turn, as with no fault
    assert len(proxy.log) == len(server.requests) == 2
    assert len(DESKS[-1].target_clicks) == 1
