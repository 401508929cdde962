"""The xdg-desktop-portal ScreenCast (``org.freedesktop.portal.ScreenCast`` on the session
bus): screen capture on Wayland desktops whose compositor's own interfaces deskpilot does not
speak (KDE Plasma, ...), the user approving once.

The handshake (portal ScreenCast version 4 and later): ``CreateSession`` → ``SelectSources``
(monitors, several allowed, the cursor as metadata where offered else drawn in,
``persist_mode`` 2 and the saved restore token if any) → ``Start`` → ``OpenPipeWireRemote``
(a file descriptor to a PipeWire connection that sees only this session's streams). Every
step but the last answers through a ``Response`` signal on a Request object whose path is
known before the call (``/org/freedesktop/portal/desktop/request/SENDER/TOKEN``), so the
subscription is made first. ``Start`` shows the desktop's chooser dialog unless a valid
restore token was passed; its answer carries the streams (PipeWire node, position, size)
and a new restore token (tokens are single use), kept in
``$XDG_STATE_HOME/deskpilot/portal-restore-token`` (0600, written atomically) so the next
session starts without a dialog.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import queue
import secrets
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deskpilot._errors import PlatformError
from deskpilot._wayland._dbus import SessionBus, variant
from deskpilot._wayland._pipewire import PipeWireStream

__all__ = [
    "PORTAL",
    "PortalScreenCast",
    "PortalStream",
    "load_restore_token",
    "portal_screencast_version",
    "restore_token_path",
    "save_restore_token",
]

PORTAL = "org.freedesktop.portal.Desktop"
_PORTAL_PATH = "/org/freedesktop/portal/desktop"
_SCREEN_CAST = "org.freedesktop.portal.ScreenCast"
_REQUEST = "org.freedesktop.portal.Request"
_SESSION = "org.freedesktop.portal.Session"
#: SelectSources ``types``: 1 monitor, 2 window, 4 virtual.
_SOURCE_MONITOR = 1
#: ``cursor_mode`` bits: 1 hidden, 2 embedded (drawn into frames), 4 metadata.
_CURSOR_EMBEDDED, _CURSOR_METADATA = 2, 4
#: ``persist_mode`` 2: the permission lasts until revoked (not only while this app runs).
_PERSIST_UNTIL_REVOKED = 2
#: The portal version that has ``persist_mode`` and restore tokens.
_MIN_VERSION = 4
#: Seconds a step without a dialog may take (the portal starts its backend on first use).
_STEP_TIMEOUT = 30.0
#: Seconds ``Start`` waits for the user to answer the chooser dialog by default.
APPROVAL_TIMEOUT = 120.0
_STREAM_TIMEOUT = 10.0
_CREATE_TRIES = 5
_counter = itertools.count(1)


def restore_token_path() -> Path:
    """Where the restore token is kept: ``$XDG_STATE_HOME/deskpilot/portal-restore-token``
    (``~/.local/state`` when ``XDG_STATE_HOME`` is not set)."""
    state = os.environ.get("XDG_STATE_HOME", "").strip() or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(state) / "deskpilot" / "portal-restore-token"


def load_restore_token() -> str | None:
    """The saved restore token, or None when there is none (or it cannot be read)."""
    try:
        token = restore_token_path().read_text().strip()
    except OSError:
        return None
    return token or None


def save_restore_token(token: str) -> None:
    """Keep ``token`` for the next session: written to a temporary file created 0600 in the
    same directory, then renamed over the old one, so a reader never sees half a token."""
    path = restore_token_path()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=".portal-restore-token.")
    try:
        with os.fdopen(fd, "w") as out:
            out.write(token + "\n")
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def portal_screencast_version(bus_address: str | None = None) -> int | None:
    """The ScreenCast portal's version when the session bus offers it (the portal is started
    by bus activation if it is not running), else None (no bus, no jeepney, no portal, or a
    portal without a ScreenCast backend for this desktop)."""
    try:
        bus = SessionBus(bus_address)
    except (PlatformError, ImportError):
        return None
    try:
        return int(bus.get_property(PORTAL, _PORTAL_PATH, _SCREEN_CAST, "version"))
    except PlatformError:
        return None
    finally:
        bus.close()


@dataclass
class PortalStream:
    """One monitor the user shared: its PipeWire node and rect (the portal's position and
    size; (0, 0) when the portal gives no position)."""

    node_id: int
    x: int
    y: int
    width: int
    height: int
    fd: int = field(repr=False)
    _frames: PipeWireStream | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def frames(self) -> PipeWireStream:
        """This monitor's PipeWire stream over the portal's connection, connected on first use
        (first frame awaited)."""
        with self._lock:
            if self._frames is None:
                stream = PipeWireStream(self.node_id, name=f"deskpilot portal {self.node_id}", cursor=True,
                                        remote_fd=os.dup(self.fd))
                try:
                    stream.wait_first_frame(_STREAM_TIMEOUT)
                except BaseException:
                    stream.close()
                    raise
                self._frames = stream
            return self._frames

    def cursor(self) -> tuple[int, int] | None:
        """The pointer as this stream's metadata last said, in desktop pixels (None before)."""
        frames = self._frames
        if frames is None or frames.cursor is None:
            return None
        return self.x + frames.cursor[0], self.y + frames.cursor[1]

    def close(self) -> None:
        with self._lock:
            if self._frames is not None:
                self._frames.close()
                self._frames = None


class PortalScreenCast:
    """One portal screencast session of every monitor the user shares.

    ``restore_token``: the token to pass (default the saved one; "" for none). The new token
    is saved when ``save_token`` (the default). ``approval_timeout``: seconds to wait for the
    user when the portal shows its chooser. Raises :class:`PlatformError` when the portal is
    missing or too old, the user declines, or nobody answers in time; :class:`ImportError`
    (jeepney) without the ``wayland`` extra.
    """

    def __init__(self, *, restore_token: str | None = None, save_token: bool = True,
                 approval_timeout: float = APPROVAL_TIMEOUT, bus_address: str | None = None) -> None:
        self.bus = SessionBus(bus_address, enable_fds=True)
        self.session: str | None = None
        self.streams: list[PortalStream] = []
        self.restore_token: str | None = None  # the one the portal gave this session
        self.cursor_mode = _CURSOR_EMBEDDED
        self._fd = -1
        self._closed_signal: queue.Queue[Any] | None = None
        self._closed = False
        try:
            self._start(load_restore_token() if restore_token is None else restore_token, save_token,
                        approval_timeout)
        except BaseException:
            self.close()
            raise

    def _request(self, method: str, signature: str, body: tuple[Any, ...], options: dict[str, Any],
                 timeout: float) -> dict[str, Any]:
        """Call a portal method that answers through a Request's ``Response``; its results."""
        token = f"deskpilot{os.getpid()}_{next(_counter)}_{secrets.token_hex(4)}"
        sender = self.bus.unique_name.lstrip(":").replace(".", "_")
        path = f"{_PORTAL_PATH}/request/{sender}/{token}"
        responses = self.bus.subscribe(interface=_REQUEST, member="Response", path=path)
        options = {**options, "handle_token": variant("s", token)}
        self.bus.call(PORTAL, _PORTAL_PATH, _SCREEN_CAST, method, signature + "a{sv}", (*body, options))
        try:
            code, results = responses.get(timeout=timeout)
        except queue.Empty as exc:
            with contextlib.suppress(PlatformError):
                self.bus.call(PORTAL, path, _REQUEST, "Close", timeout=2.0)
            raise PlatformError(f"the ScreenCast portal's {method} got no answer within {timeout:g} s"
                                + (" (nobody answered the screen-sharing dialog)" if method == "Start" else ""),
                                call=method) from exc
        if code != 0:
            what = "the user declined screen sharing" if code == 1 else "the portal ended the request"
            raise PlatformError(f"ScreenCast portal {method}: {what} (response {code})", call=method, response=code)
        return {key: value[1] for key, value in results.items()}

    def _start(self, token: str | None, save_token: bool, approval_timeout: float) -> None:
        bus = self.bus
        try:
            version = int(bus.get_property(PORTAL, _PORTAL_PATH, _SCREEN_CAST, "version"))
        except PlatformError as exc:
            raise PlatformError(f"the session bus offers no ScreenCast portal ({PORTAL}): install "
                                "xdg-desktop-portal and your desktop's portal backend "
                                f"(xdg-desktop-portal-kde, -gnome, -wlr): {exc}", name=PORTAL) from exc
        if version < _MIN_VERSION:
            raise PlatformError(f"the ScreenCast portal is version {version}; deskpilot needs {_MIN_VERSION} "
                                "(xdg-desktop-portal 1.12 or later) to keep the user's approval",
                                version=version)
        modes = int(bus.get_property(PORTAL, _PORTAL_PATH, _SCREEN_CAST, "AvailableCursorModes"))
        self.cursor_mode = _CURSOR_METADATA if modes & _CURSOR_METADATA else _CURSOR_EMBEDDED
        for attempt in range(_CREATE_TRIES):
            try:
                created = self._request("CreateSession", "", (),
                                        {"session_handle_token": variant("s", f"deskpilot{secrets.token_hex(6)}")},
                                        _STEP_TIMEOUT)
                break
            except PlatformError as exc:
                # Measured (portal 1.16 + gnome 43): for about a second after a chooser dialog
                # was closed unanswered, CreateSession ends with response 2; then it works.
                if exc.details.get("response") != 2 or attempt == _CREATE_TRIES - 1:
                    raise
                time.sleep(0.5)
        self.session = str(created["session_handle"])
        self._closed_signal = bus.subscribe(interface=_SESSION, member="Closed", path=self.session)
        select: dict[str, Any] = {
            "types": variant("u", _SOURCE_MONITOR),
            "multiple": variant("b", True),
            "cursor_mode": variant("u", self.cursor_mode),
            "persist_mode": variant("u", _PERSIST_UNTIL_REVOKED),
        }
        if token:
            select["restore_token"] = variant("s", token)
        self._request("SelectSources", "o", (self.session,), select, _STEP_TIMEOUT)
        started = self._request("Start", "os", (self.session, ""), {}, approval_timeout)
        new_token = started.get("restore_token")
        if isinstance(new_token, str) and new_token:
            self.restore_token = new_token
            if save_token:
                save_restore_token(new_token)
        streams = started.get("streams") or []
        if not streams:
            raise PlatformError("the ScreenCast portal started a session with no stream (no monitor shared)",
                                call="Start")
        (fd,) = bus.call(PORTAL, _PORTAL_PATH, _SCREEN_CAST, "OpenPipeWireRemote", "oa{sv}", (self.session, {}))
        self._fd = fd.to_raw_fd()
        for node_id, properties in streams:
            x, y = properties.get("position", ("(ii)", (0, 0)))[1]
            width, height = properties.get("size", ("(ii)", (0, 0)))[1]
            self.streams.append(PortalStream(int(node_id), int(x), int(y), int(width), int(height), self._fd))
        self.streams.sort(key=lambda s: (s.x, s.y))

    @property
    def ended(self) -> bool:
        """Whether the portal closed the session (the user stopped sharing) or it was closed here."""
        return self._closed or (self._closed_signal is not None and not self._closed_signal.empty())

    def close(self) -> None:
        """Close the streams, the session and the connection. Idempotent."""
        if self._closed:
            return
        self._closed = True
        for stream in self.streams:
            stream.close()
        if self.session is not None:
            with contextlib.suppress(PlatformError):
                self.bus.call(PORTAL, self.session, _SESSION, "Close", timeout=2.0)
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        self.bus.close()
