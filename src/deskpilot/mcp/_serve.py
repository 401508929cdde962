"""Serve one desktop over stdio (the default) or streamable HTTP, until the client goes.

Start-up order: the display check (:func:`check_display`), then the desktop (run
directory, screen, hands, guard, kill switch armed), then the transport. Whatever ends
the session (the client closes stdin or is killed, SIGTERM, Ctrl+C, the kill switch) the
desktop closes in reverse: held keys and buttons are released first, then the summary is
written.

HTTP is served on 127.0.0.1 unless asked otherwise, behind the panel's access guard
(:class:`deskpilot.panel._access.AccessGuard`: Host and Origin checks against DNS
rebinding, and the bearer token, printed once at start; binding beyond loopback without
a token is refused).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TextIO

from deskpilot.agent._config import AgentConfig
from deskpilot.mcp._desktop import Desktop, DesktopOptions

__all__ = ["ServeOptions", "check_display", "serve"]

#: The MCP endpoint's path over HTTP.
HTTP_PATH = "/mcp"


@dataclass(slots=True)
class ServeOptions:
    """How the server is reached (``deskpilot mcp`` flags)."""

    transport: str = "stdio"  # "stdio" or "http"
    host: str = "127.0.0.1"
    port: int = 8766
    #: "generate" (a fresh token, printed once), "off" (none: loopback only), or the token.
    token: str = "generate"
    #: Tool allowlist (None: every tool; --read-only keeps the looking ones).
    tools: tuple[str, ...] | None = None


def check_display(config: AgentConfig) -> None:
    """Refuse to start where capture or input would not work. The one place start-up
    checks the display (the XWayland check joins here)."""
    return None


def serve(
    config: AgentConfig,
    desktop_options: DesktopOptions,
    options: ServeOptions,
    *,
    stderr: TextIO | None = None,
) -> int:
    """Serve until the client goes; 0 when the session ended normally."""
    check_display(config)
    return asyncio.run(_serve(config, desktop_options, options, stderr or sys.stderr))


def _on_stop_signals(task: asyncio.Task[Any]) -> Callable[[], None]:
    """SIGTERM and SIGINT cancel the session (its clean-up releases held input); returns the undo."""
    loop = asyncio.get_running_loop()
    installed: list[signal.Signals] = []
    replaced: list[tuple[signal.Signals, Any]] = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, task.cancel)
            installed.append(sig)
        except (NotImplementedError, RuntimeError, ValueError):  # Windows: no loop signal handlers
            previous = signal.signal(sig, lambda *_a: loop.call_soon_threadsafe(task.cancel))
            replaced.append((sig, previous))

    def undo() -> None:
        for sig in installed:
            with contextlib.suppress(RuntimeError):
                loop.remove_signal_handler(sig)
        for sig, previous in replaced:
            with contextlib.suppress(ValueError, TypeError):
                signal.signal(sig, previous)

    return undo


async def _serve(config: AgentConfig, desktop_options: DesktopOptions, options: ServeOptions, stderr: TextIO) -> int:
    from deskpilot.mcp._server import build_server

    task = asyncio.current_task()
    assert task is not None
    undo = _on_stop_signals(task)
    try:
        async with Desktop.open(config, desktop_options) as desktop:
            server = build_server(desktop, tools=options.tools)
            print(f"deskpilot mcp: run directory {desktop.run_dir}", file=stderr, flush=True)
            watch = asyncio.ensure_future(_watch_stop(desktop, task))
            try:
                if options.transport == "http":
                    await _serve_http(server, options, stderr)
                else:
                    await server.run_stdio_async()
            finally:
                watch.cancel()
    except asyncio.CancelledError:
        pass  # a stop signal: the desktop above has closed (input released, summary written)
    finally:
        undo()
    return 0


async def _watch_stop(desktop: Desktop, task: asyncio.Task[Any]) -> None:
    """The kill switch ends the whole session (its tools refuse from the trip on)."""
    while desktop.stopped is None:
        await asyncio.sleep(0.1)
    print(f"deskpilot mcp: stopped by {desktop.stopped}", file=sys.stderr, flush=True)
    task.cancel()


async def _serve_http(server: Any, options: ServeOptions, stderr: TextIO) -> None:
    import uvicorn

    from deskpilot.panel._access import AccessGuard, PanelAccess, resolve_token

    token, _generated = resolve_token(options.token)
    access = PanelAccess(options.host, options.port, token=token)
    app = AccessGuard(server.streamable_http_app(streamable_http_path=HTTP_PATH, host=options.host),
                      access, body_limits={}, default_limit=1 << 20)
    config = uvicorn.Config(app, host=options.host, port=options.port, log_level="warning", lifespan="on")
    # uvicorn catches SIGINT/SIGTERM while it serves, shuts down, then raises them again:
    # this session's own handlers then close the desktop.
    uv = uvicorn.Server(config)
    shown_host = f"[{options.host}]" if ":" in options.host else options.host
    url = f"http://{shown_host}:{options.port}{HTTP_PATH}"
    if token is not None:
        print(f"deskpilot mcp: serving {url}  token: {token}", file=stderr, flush=True)
        print("deskpilot mcp: clients send it as the header  Authorization: Bearer <token>", file=stderr, flush=True)
    else:
        print(f"deskpilot mcp: serving {url} (no token: loopback only)", file=stderr, flush=True)
    await uv.serve()
