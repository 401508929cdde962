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
import os
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TextIO

from deskpilot.agent import AgentConfig
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
    #: Go on where the X display is Xwayland (``--allow-xwayland``): captures show X11 windows only.
    allow_xwayland: bool = False


def check_display(*, allow_xwayland: bool = False, capture: str = "auto") -> None:
    """Refuse to start where capture would show a client black screenshots: an X display
    that is Xwayland sees only X11 windows (:func:`deskpilot.capture.check_screen_visible`
    raises :class:`~deskpilot.errors.ScreenNotVisibleError` saying what to do). The one
    place start-up checks the display; a dry run shows the screen too, so it is checked
    as well. ``capture``: the capture backend the session will use (``auto`` sees a GNOME
    or wlroots Wayland session through its own backend; ``mss`` on one is refused)."""
    from deskpilot.capture import check_screen_visible

    check_screen_visible(allow_xwayland=allow_xwayland, capture=capture)


def serve(
    config: AgentConfig,
    desktop_options: DesktopOptions,
    options: ServeOptions,
    *,
    stderr: TextIO | None = None,
) -> int:
    """Serve until the client goes; 0 when the session ended normally."""
    check_display(allow_xwayland=options.allow_xwayland, capture=config.screen.capture_backend)
    out = stderr or sys.stderr
    access = None
    if options.transport == "http":
        # Refused before anything opens: binding beyond loopback without a token, a bad token.
        from deskpilot.panel import PanelAccess, resolve_token

        token, _generated = resolve_token(options.token)
        access = PanelAccess(options.host, options.port, token=token)
    code, abandoned = asyncio.run(_serve(config, desktop_options, options, access, out))
    if abandoned:
        # Stopped while the client still holds the pipe open: the SDK's stdin reader is
        # a thread blocked in read() that nothing can cancel. The desktop is closed (held
        # input released, the record written): leave without waiting for that thread.
        with contextlib.suppress(Exception):
            out.flush()
        os._exit(code)
    return code


def _on_stop_signals(stop: Callable[[str], None]) -> Callable[[], None]:
    """SIGTERM and SIGINT stop the session (its clean-up releases held input); returns the undo."""
    loop = asyncio.get_running_loop()
    installed: list[signal.Signals] = []
    replaced: list[tuple[signal.Signals, Any]] = []
    for sig, name in ((signal.SIGINT, "SIGINT"), (signal.SIGTERM, "SIGTERM")):
        try:
            loop.add_signal_handler(sig, stop, name)
            installed.append(sig)
        except (NotImplementedError, RuntimeError, ValueError):  # Windows: no loop signal handlers
            previous = signal.signal(sig, lambda *_a, _n=name: loop.call_soon_threadsafe(stop, _n))  # type: ignore[misc]
            replaced.append((sig, previous))

    def undo() -> None:
        for sig in installed:
            with contextlib.suppress(RuntimeError):
                loop.remove_signal_handler(sig)
        for sig, previous in replaced:
            with contextlib.suppress(ValueError, TypeError):
                signal.signal(sig, previous)

    return undo


async def _serve(
    config: AgentConfig, desktop_options: DesktopOptions, options: ServeOptions, access: Any, stderr: TextIO
) -> tuple[int, bool]:
    """``(exit code, whether the transport was abandoned)``: see :func:`serve`."""
    from deskpilot.mcp._server import build_server

    stopping = asyncio.Event()
    reasons: list[str] = []

    def stop(reason: str) -> None:
        if not reasons:
            reasons.append(reason)
        stopping.set()

    undo = _on_stop_signals(stop)
    abandoned = False
    try:
        async with Desktop.open(config, desktop_options) as desktop:
            loop = asyncio.get_running_loop()
            desktop.on_stop = lambda reason: loop.call_soon_threadsafe(stop, reason)  # from the watcher thread
            server = build_server(desktop, tools=options.tools)
            print(f"deskpilot mcp: run directory {desktop.run_dir}", file=stderr, flush=True)
            uv: Any = None
            if options.transport == "http":
                uv = _http_server(server, options, access, stderr)
                transport = asyncio.ensure_future(uv.serve())
            else:
                transport = asyncio.ensure_future(server.run_stdio_async())
            waiter = asyncio.ensure_future(stopping.wait())
            try:
                await asyncio.wait({transport, waiter}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                waiter.cancel()
            if not transport.done():
                print(f"deskpilot mcp: stopped by {reasons[0] if reasons else 'a stop'}", file=stderr, flush=True)
                desktop.stop(reasons[0] if reasons else "stop")
                if uv is not None:
                    uv.should_exit = True
                else:
                    transport.cancel()
                # A call in flight ends within a typing chunk (the stop flag is set).
                await asyncio.wait({transport}, timeout=3.0)
                abandoned = not transport.done()
            elif transport.exception() is not None and not isinstance(transport.exception(), asyncio.CancelledError):
                raise transport.exception()  # type: ignore[misc]
    finally:
        undo()
    return 0, abandoned


def _http_server(server: Any, options: ServeOptions, access: Any, stderr: TextIO) -> Any:
    import uvicorn

    from deskpilot.panel import AccessGuard

    token = access.token
    app = AccessGuard(server.streamable_http_app(streamable_http_path=HTTP_PATH, host=options.host),
                      access, body_limits={}, default_limit=1 << 20)
    config = uvicorn.Config(app, host=options.host, port=options.port, log_level="warning", lifespan="on")
    # uvicorn catches SIGINT/SIGTERM while it serves: it shuts down, the session ends
    # like a client that left (held input released, the record written).
    uv = uvicorn.Server(config)
    shown_host = f"[{options.host}]" if ":" in options.host else options.host
    url = f"http://{shown_host}:{options.port}{HTTP_PATH}"
    if token is not None:
        print(f"deskpilot mcp: serving {url}  token: {token}", file=stderr, flush=True)
        print("deskpilot mcp: clients send it as the header  Authorization: Bearer <token>", file=stderr, flush=True)
    else:
        print(f"deskpilot mcp: serving {url} (no token: loopback only)", file=stderr, flush=True)
    return uv
