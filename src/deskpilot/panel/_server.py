"""Serving the panel: uvicorn on a socket we bind ourselves, inside the engine's event loop.

Binding the socket first means a taken port fails at once with a clear error, and port 0
gives a free port whose number is known before the first request. The server runs as a
task of the caller's loop (:meth:`PanelServer.start`), or on its own thread
(:meth:`PanelServer.start_in_thread`, for tests and tools without a loop). uvicorn's own
signal handling is switched off: the agent's Ctrl+C handling stays in charge.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import socket
import threading
from collections.abc import Generator

import uvicorn

from deskpilot._errors import ConfigError
from deskpilot.panel._app import create_app
from deskpilot.panel._state import PanelState

__all__ = ["PanelServer"]

log = logging.getLogger("deskpilot.panel")


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        # The agent handles SIGINT/SIGTERM itself (stop within a second, release keys).
        yield


def _bind(host: str, port: int) -> socket.socket:
    try:
        family = socket.AF_INET6 if ipaddress.ip_address(host).version == 6 else socket.AF_INET
    except ValueError:
        family = socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(64)
        sock.setblocking(False)
    except OSError as exc:
        sock.close()
        raise ConfigError(
            f"the panel cannot listen on {host}:{port}: {exc.strerror or exc} "
            "(pick another port with PANEL_PORT / --panel-port, 0 for any free one)",
            host=host,
            port=port,
        ) from None
    return sock


class PanelServer:
    """The panel web server for one :class:`PanelState`."""

    def __init__(self, state: PanelState, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self.state = state
        self.host = host
        self.requested_port = port
        self.port: int | None = None
        self._server: _Server | None = None
        self._task: asyncio.Task[None] | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        if not _is_loopback(host):
            log.warning(
                "panel bound to %s: its API drives this desktop and has no authentication", host
            )

    @property
    def url(self) -> str:
        if self.port is None:
            raise RuntimeError("the panel is not started")
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def _make(self) -> tuple[_Server, socket.socket]:
        sock = _bind(self.host, self.requested_port)
        self.port = int(sock.getsockname()[1])
        config = uvicorn.Config(
            create_app(self.state),
            lifespan="off",
            log_level="warning",
            access_log=False,
            timeout_graceful_shutdown=1,
            timeout_keep_alive=5,
        )
        return _Server(config), sock

    async def start(self) -> None:
        """Serve from the running loop; returns once the server accepts connections."""
        server, sock = self._make()
        self._server = server
        self._task = asyncio.ensure_future(server.serve(sockets=[sock]))
        while not server.started:
            if self._task.done():
                self._task.result()  # re-raise why it stopped
                raise RuntimeError("the panel server stopped during startup")
            await asyncio.sleep(0.01)

    async def stop(self) -> None:
        """Stop serving (open keep-alive connections are closed, not waited for)."""
        if self._server is None or self._task is None:
            return
        self._server.should_exit = True
        self._server.force_exit = True
        with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
            await asyncio.wait_for(asyncio.shield(self._task), 3.0)
        if not self._task.done():
            self._task.cancel()
        self._server = None
        self._task = None

    # ------------------------------------------------------------------ own thread
    def start_in_thread(self, timeout: float = 10.0) -> None:
        """Serve from a new daemon thread with its own event loop."""
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(self.start())
            except BaseException as exc:  # reported to the starting thread
                failure.append(exc)
                ready.set()
                loop.close()
                return
            ready.set()
            assert self._task is not None
            with contextlib.suppress(Exception):
                loop.run_until_complete(self._task)
            loop.close()

        self._thread = threading.Thread(target=run, name="deskpilot-panel", daemon=True)
        self._thread.start()
        if not ready.wait(timeout):
            raise RuntimeError(f"the panel did not start within {timeout} s")
        if failure:
            raise failure[0]

    def stop_thread(self, timeout: float = 5.0) -> None:
        if self._thread is None or self._server is None:
            return
        self._server.should_exit = True
        self._server.force_exit = True
        self._thread.join(timeout)
        self._thread = None
        self._server = None
        self._task = None


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
