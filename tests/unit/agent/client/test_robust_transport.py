"""The client against real misbehaving HTTP servers on 127.0.0.1 (issue 14).

Each server is a raw asyncio socket server that writes exactly the bytes a slow,
drip-feeding or oversized server would: ``--timeout`` must be one deadline per request
(headers + whole body, streamed or not) and the body must be capped.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import Awaitable, Callable, Iterator

import pytest

from deskpilot._errors import ModelResponseError, ModelTimeoutError
from deskpilot.agent.client._chat import ChatClient

Handler = Callable[[asyncio.StreamWriter], Awaitable[None]]

ANSWER = json.dumps(
    {"choices": [{"message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}]}
).encode()
SSE_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
)


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def sse(delta: dict[str, object]) -> bytes:
    body = {"choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
    return chunk(b"data: " + json.dumps(body).encode() + b"\n\n")


@contextlib.contextmanager
def raw_server(handler: Handler) -> Iterator[str]:
    """Serve ``handler`` on 127.0.0.1; it writes the raw response after reading the request."""
    loop = asyncio.new_event_loop()
    started = threading.Event()
    port: list[int] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(
                (
                    int(line.split(b":")[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                ),
                0,
            )
            await reader.readexactly(length)
            await handler(writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def main() -> asyncio.AbstractServer:
        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port.append(server.sockets[0].getsockname()[1])
        started.set()
        return server

    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    server = asyncio.run_coroutine_threadsafe(main(), loop).result(10)
    started.wait(10)
    try:
        yield f"http://127.0.0.1:{port[0]}/v1/chat/completions"
    finally:

        async def shutdown() -> None:
            server.close()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(shutdown(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


async def drip(writer: asyncio.StreamWriter, data: bytes, pause: float, limit: int = 40) -> None:
    """Write ``data`` a piece at a time with a pause between (at most ``limit`` pieces)."""
    for index in range(min(limit, len(data))):
        writer.write(data[index : index + 1] if index < limit - 1 else data[index:])
        await writer.drain()
        await asyncio.sleep(pause)


def complete(
    endpoint: str, *, timeout: float = 1.0, stream: bool = False, **kwargs: object
) -> object:
    async def go() -> object:
        client = ChatClient(endpoint, "m", timeout=timeout, max_retries=0, stream=stream, **kwargs)  # type: ignore[arg-type]
        try:
            return await client.chat([{"role": "user", "content": "hi"}])
        finally:
            await client.aclose()

    return asyncio.run(go())


# Every server below keeps each gap (0.25 s) well under the 1 s timeout, and takes about
# 10 s in all: a per-read timeout never fires, one deadline per request does.


async def slow_headers(writer: asyncio.StreamWriter) -> None:
    head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n" % len(
        ANSWER
    )
    await drip(writer, head + ANSWER, 0.25)
    writer.write(ANSWER)


async def drip_json_body(writer: asyncio.StreamWriter) -> None:
    writer.write(
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n"
        % len(ANSWER)
    )
    await drip(writer, ANSWER, 0.25)


async def keep_alive_stream(writer: asyncio.StreamWriter) -> None:
    writer.write(SSE_HEAD)
    for _ in range(40):
        writer.write(chunk(b": keep-alive\n\n"))
        await writer.drain()
        await asyncio.sleep(0.25)
    writer.write(sse({"content": "late"}) + chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")


async def drip_token_stream(writer: asyncio.StreamWriter) -> None:
    writer.write(SSE_HEAD + sse({"role": "assistant"}))
    for _ in range(40):
        writer.write(sse({"content": "."}))
        await writer.drain()
        await asyncio.sleep(0.25)
    writer.write(chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")


@pytest.mark.parametrize(
    "handler",
    [slow_headers, drip_json_body, keep_alive_stream, drip_token_stream],
    ids=["slow_headers", "drip_json_body", "keep_alive_stream", "drip_token_stream"],
)
@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_timeout_is_one_deadline_per_request(handler: Handler, stream: bool) -> None:
    with (
        raw_server(handler) as endpoint,
        pytest.raises(ModelTimeoutError, match="one deadline per request") as info,
    ):
        complete(endpoint, timeout=1.0, stream=stream)
    assert info.value.details["timeout_s"] == 1.0


def test_a_body_over_the_cap_is_refused_without_reading_it_all() -> None:
    sent: list[int] = []

    async def huge_chunked(writer: asyncio.StreamWriter) -> None:
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n"
        )
        piece = chunk(b" " * 65536)
        for _ in range(3200):  # 200 MiB if read to the end
            writer.write(piece)
            await writer.drain()
            sent.append(1)
        writer.write(chunk(ANSWER) + b"0\r\n\r\n")

    with (
        raw_server(huge_chunked) as endpoint,
        pytest.raises(ModelResponseError, match="over the limit") as info,
    ):
        complete(endpoint, timeout=60, max_response_bytes=1024 * 1024)
    assert info.value.details["limit_bytes"] == 1024 * 1024
    assert len(sent) < 3200  # the client hung up long before the end


def test_an_announced_oversized_body_is_refused_at_the_headers() -> None:
    async def announced(writer: asyncio.StreamWriter) -> None:
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 209715200\r\n\r\n"
        )
        await writer.drain()
        await asyncio.sleep(5)

    with (
        raw_server(announced) as endpoint,
        pytest.raises(ModelResponseError, match="announces 209715200 bytes"),
    ):
        complete(endpoint, timeout=60, max_response_bytes=1024 * 1024)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_leading_whitespace_is_read_in_linear_time(stream: bool) -> None:
    # 24 MiB of blanks (under the default cap) in 1 KiB chunks before the answer: the former
    # quadratic read copies ~300 GB here and does not finish in hours; a linear one in a moment.
    async def blanks(writer: asyncio.StreamWriter) -> None:
        ctype = b"text/event-stream" if stream else b"application/json"
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: %s\r\ntransfer-encoding: chunked\r\n\r\n" % ctype
        )
        piece = chunk(b" " * 1024)
        for index in range(24 * 1024):
            writer.write(piece)
            if index % 256 == 0:
                await writer.drain()
        if stream:
            writer.write(
                chunk(b"\n")
                + sse({"role": "assistant", "content": "hi"})
                + chunk(b"data: [DONE]\n\n")
            )
        else:
            writer.write(chunk(ANSWER))
        writer.write(b"0\r\n\r\n")
        await writer.drain()

    with raw_server(blanks) as endpoint:
        completion = complete(endpoint, timeout=120)
    assert completion.content == "hi"  # type: ignore[attr-defined]


def test_the_model_list_request_has_the_same_deadline() -> None:
    async def drip_models(writer: asyncio.StreamWriter) -> None:
        body = b'{"data": [{"id": "m"}]}'
        head = (
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n"
            % len(body)
        )
        await drip(writer, head + body, 0.25)

    async def go(endpoint: str) -> list[str]:
        client = ChatClient(endpoint, "m", timeout=1.0, max_retries=0)
        try:
            return await client.models()
        finally:
            await client.aclose()

    with (
        raw_server(drip_models) as endpoint,
        pytest.raises(ModelTimeoutError, match="one deadline per request"),
    ):
        asyncio.run(go(endpoint))
