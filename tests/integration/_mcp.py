"""The official MCP SDK's client, driven from synchronous tests.

:class:`McpClient` runs the SDK's ``ClientSession`` (over ``mcp.client.stdio`` or the
streamable-HTTP client) on an event loop of its own thread, so one server process serves
every test of a module and each test calls ``client.call("click", {...})``.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import io
import json
import os
import sys
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any, TypeVar

from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp_types import CallToolResult

T = TypeVar("T")


def server_command(runs_dir: Path, *args: str) -> StdioServerParameters:
    """``python -m deskpilot mcp`` with ``args``, recording into ``runs_dir``, on this DISPLAY."""
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "deskpilot", "mcp", "--runs-dir", str(runs_dir), *args],
        env={**os.environ, "NO_COLOR": "1"},
        cwd=str(runs_dir.parent),
    )


class McpClient:
    """One SDK client session on a thread of its own (see the module doc)."""

    def __init__(self, connect: Callable[[], contextlib.AbstractAsyncContextManager[Any]]) -> None:
        self._connect = connect
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="mcp-client", daemon=True)
        self._thread.start()
        self._closed: asyncio.Event | None = None
        self._ready: Future[ClientSession] = Future()
        self._done: Future[None] | None = None
        self.stderr = io.StringIO()
        self._done = asyncio.run_coroutine_threadsafe(self._main(), self._loop)  # type: ignore[assignment]
        self.session = self._ready.result(timeout=60)

    async def _main(self) -> None:
        self._closed = asyncio.Event()
        try:
            async with self._connect() as streams, ClientSession(streams[0], streams[1]) as session:
                await session.initialize()
                self._ready.set_result(session)
                await self._closed.wait()
        except BaseException as exc:
            if not self._ready.done():
                self._ready.set_exception(exc)
            raise

    def run(self, coro: Awaitable[T], timeout: float = 60.0) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)  # type: ignore[arg-type]

    def call(self, name: str, arguments: dict[str, Any] | None = None, timeout: float = 60.0) -> CallToolResult:
        return self.run(self.session.call_tool(name, arguments or {}), timeout)

    def close(self) -> None:
        if self._closed is not None:
            self._loop.call_soon_threadsafe(self._closed.set)
        if self._done is not None:
            with contextlib.suppress(Exception):
                self._done.result(timeout=30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)


def stdio(params: StdioServerParameters) -> McpClient:
    return McpClient(lambda: stdio_client(params, errlog=sys.stderr))


def meta(result: CallToolResult) -> dict[str, Any]:
    """The JSON text block of a result (the last text block)."""
    texts = [c.text for c in result.content if getattr(c, "type", None) == "text"]
    assert texts, result
    data: dict[str, Any] = json.loads(texts[-1])
    return data


def error_text(result: CallToolResult) -> str:
    assert result.is_error, result
    return " ".join(c.text for c in result.content if getattr(c, "type", None) == "text")


def png_of(result: CallToolResult) -> bytes:
    images = [c for c in result.content if getattr(c, "type", None) == "image"]
    assert len(images) == 1, result
    assert images[0].mime_type == "image/png"
    return base64.b64decode(images[0].data)


def image_b64_len(result: CallToolResult) -> int:
    return sum(len(c.data) for c in result.content if getattr(c, "type", None) == "image")


def result_bytes(result: CallToolResult) -> int:
    """The result as the client receives it, serialized (what a 1 MB cap counts)."""
    return len(result.model_dump_json(by_alias=True, exclude_none=True).encode())
