"""Serving the panel: uvicorn on a socket we bind ourselves, inside the engine's event loop.

Binding the socket first means a taken port fails at once with a clear error, and port 0
gives a free port whose number is known before the first request. The server runs as a
task of the caller's loop (:meth:`PanelServer.start`), or on its own thread
(:meth:`PanelServer.start_in_thread`, for tests and tools without a loop). uvicorn's own
signal handling is switched off: the agent's Ctrl+C handling stays in charge.

Who may talk to it is :class:`~deskpilot.panel._access.PanelAccess`'s business: a
non-loopback ``host`` without a ``token`` is refused here, before anything is bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import socket
import threading
from collections.abc import Generator, Iterable
from urllib.parse import quote

import uvicorn

from deskpilot._errors import ConfigError
from deskpilot.panel._access import PanelAccess, is_loopback
from deskpilot.panel._app import create_app
from deskpilot.panel._state import PanelState

__all__ = ["PanelServer"]

log = logging.getLogger("deskpilot.panel")


class _UvicornServer(uvicorn.Server):
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
    """The panel web server for one :class:`PanelState`.

    ``token``: required on every request when set (and required to bind beyond
    loopback); ``allowed_hosts``: extra ``Host`` names the panel answers for."""

    def __init__(
        self,
        state: PanelState,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        token: str | None = None,
        allowed_hosts: Iterable[str] = (),
    ) -> None:
        self.state = state
        self.host = host
        self.requested_port = port
        self.token = token or None
        self.allowed_hosts = tuple(allowed_hosts)
        # Refuse a bad setup now (non-loopback without a token, malformed host names),
        # before a socket is bound; the real rules are built once the port is known.
        PanelAccess(host, port, token=self.token, allowed_hosts=self.allowed_hosts)
        self.access: PanelAccess | None = None
        self.port: int | None = None
        self._server: _UvicornServer | None = None
        self._task: asyncio.Task[None] | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        if not is_loopback(host):
            log.warning("panel bound to %s: reachable from the network, guarded by its token", host)

    @property
    def url(self) -> str:
        if self.port is None:
            raise RuntimeError("the panel is not started")
        host = self.host
        if host in ("0.0.0.0", "::"):
            host = "127.0.0.1"  # where this machine's own browser reaches a wildcard bind
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{self.port}"

    @property
    def page_url(self) -> str:
        """The page's address to open: with ``?token=`` when the panel has a token (the
        first answer stores it in a cookie and drops it from the address bar)."""
        if self.token is None:
            return self.url + "/"
        return f"{self.url}/?token={quote(self.token, safe='')}"

    def _make(self) -> tuple[_UvicornServer, socket.socket]:
        sock = _bind(self.host, self.requested_port)
        self.port = int(sock.getsockname()[1])
        self.access = PanelAccess(
            self.host, self.port, token=self.token, allowed_hosts=self.allowed_hosts
        )
        config = uvicorn.Config(
            create_app(self.state, self.access),
            lifespan="off",
            proxy_headers=False,  # nothing stands in front of the panel: trust no X-Forwarded-*
            server_header=False,
            limit_concurrency=64,
            log_level="warning",
            access_log=False,
            timeout_graceful_shutdown=1,
            timeout_keep_alive=5,
        )
        return _UvicornServer(config), sock

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
