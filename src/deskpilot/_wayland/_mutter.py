"""Mutter's own screencast and remote-desktop interfaces (GNOME on Wayland, no dialog on
GNOME 43), shared by the capture and input backends of one process.

A :class:`MutterSession` is one D-Bus connection (Mutter ends its sessions when it closes)
holding, for the remote-desktop kind, ``RemoteDesktop.CreateSession`` → its ``SessionId``
→ ``ScreenCast.CreateSession({"remote-desktop-session-id": id})``, and for the
screencast-only kind ``ScreenCast.CreateSession({})``; then ``RecordMonitor`` per monitor
(cursor-mode 2: metadata, so the pointer is never drawn into a frame and the agent's settle
never mistakes its moves for a reaction, while its position comes with the stream) → each stream's ``PipeWireStreamAdded(node)`` → ``Start``.
Frames come from the PipeWire node of each stream (:mod:`._pipewire`), connected on first
use, so an input-only user opens no PipeWire stream.

Monitors: physical pixels from ``org.gnome.Mutter.DisplayConfig.GetCurrentState`` (the
current mode's size; positions are logical in GNOME's default layout mode and are turned
into physical ones by the monitor's scale). At scales 1.25 and 2.0 a stream stays at the
mode's physical size and pointer coordinates are that stream's frame pixels (measured).

:func:`acquire_mutter` / :func:`release_mutter` share one session per kind per process between the
capture and input backends (reference-counted).
"""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from deskpilot._errors import PlatformError
from deskpilot._wayland._dbus import DBusCallError, SessionBus, variant
from deskpilot._wayland._pipewire import PipeWireStream

__all__ = [
    "REMOTE_DESKTOP",
    "SCREEN_CAST",
    "MonitorStream",
    "MutterSession",
    "acquire_mutter",
    "mutter_available",
    "pointer_position",
    "release_mutter",
]

SCREEN_CAST = "org.gnome.Mutter.ScreenCast"
REMOTE_DESKTOP = "org.gnome.Mutter.RemoteDesktop"
_DISPLAY_CONFIG = "org.gnome.Mutter.DisplayConfig"
_SC_PATH, _RD_PATH, _DC_PATH = "/org/gnome/Mutter/ScreenCast", "/org/gnome/Mutter/RemoteDesktop", \
    "/org/gnome/Mutter/DisplayConfig"
#: cursor-mode 2: the pointer is not drawn into frames, its position comes as metadata.
_CURSOR_METADATA = 2
#: Seconds to wait for a stream's PipeWire node and for its first frame.
_STREAM_TIMEOUT = 10.0


def mutter_available(*, remote_desktop: bool = False, bus_address: str | None = None) -> bool:
    """Whether the session bus has Mutter's ScreenCast (and RemoteDesktop when asked) owned.
    False when there is no bus or jeepney is missing (nothing to talk to, or nothing to talk
    with). One connection, one or two round trips."""
    try:
        bus = SessionBus(bus_address)
    except (PlatformError, ImportError):
        return False
    try:
        names = (SCREEN_CAST, REMOTE_DESKTOP) if remote_desktop else (SCREEN_CAST,)
        return all(bus.name_has_owner(name) for name in names)
    except PlatformError:
        return False
    finally:
        bus.close()


@dataclass
class MonitorStream:
    """One monitor's screencast stream: its D-Bus path, PipeWire node and physical rect."""

    connector: str
    path: str
    node_id: int
    x: int
    y: int
    width: int
    height: int
    scale: float
    primary: bool
    _frames: PipeWireStream | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def frames(self) -> PipeWireStream:
        """The PipeWire stream of this monitor, connected on first use (first frame awaited)."""
        with self._lock:
            if self._frames is None:
                stream = PipeWireStream(self.node_id, name=f"deskpilot {self.connector}", cursor=True)
                try:
                    stream.wait_first_frame(_STREAM_TIMEOUT)
                except BaseException:
                    stream.close()
                    raise
                self._frames = stream
            return self._frames

    def cursor(self) -> tuple[float, tuple[int, int]] | None:
        """(when, physical position) of the pointer as this stream's metadata last said, or
        None before any (or before the stream was connected)."""
        frames = self._frames
        if frames is None or frames.cursor is None:
            return None
        x, y = frames.cursor
        return frames.cursor_at, (self.x + x, self.y + y)

    def cursor_log(self) -> list[tuple[float, tuple[int, int]]]:
        """The newest metadata updates as (when received, physical position), oldest first."""
        frames = self._frames
        if frames is None:
            return []
        return [(at, (self.x + x, self.y + y)) for at, (x, y) in list(frames.cursor_log)]

    def close(self) -> None:
        with self._lock:
            if self._frames is not None:
                self._frames.close()
                self._frames = None


def _monitor_layout(bus: SessionBus) -> dict[str, tuple[int, int, int, int, float, bool]]:
    """connector -> (x, y, width, height, scale, primary) in physical pixels."""
    _serial, monitors, logical_monitors, properties = bus.call(
        _DISPLAY_CONFIG, _DC_PATH, _DISPLAY_CONFIG, "GetCurrentState")
    physical_layout = properties.get("layout-mode", ("u", 1))[1] == 2
    sizes: dict[str, tuple[int, int]] = {}
    for (connector, _vendor, _product, _serial_no), modes, _props in monitors:
        current = [m for m in modes if m[6].get("is-current", ("b", False))[1]]
        if current:
            sizes[connector] = (int(current[0][1]), int(current[0][2]))
    layout: dict[str, tuple[int, int, int, int, float, bool]] = {}
    for x, y, scale, transform, primary, specs, _props in logical_monitors:
        for connector, *_ in specs:
            if connector not in sizes:
                continue
            width, height = sizes[connector]
            if transform % 2:  # 90 / 270 degrees: the stream is the rotated picture
                width, height = height, width
            factor = 1.0 if physical_layout else float(scale)
            layout[connector] = (round(x * factor), round(y * factor), width, height, float(scale),
                                 bool(primary))
    return layout


class MutterSession:
    """A screencast session (``remote_desktop=False``) or a remote-desktop session with its
    linked screencast (``remote_desktop=True``), recording every monitor.

    Raises :class:`PlatformError` when Mutter's interfaces are not on the session bus or
    refuse; :class:`ImportError` (jeepney) when the ``wayland`` extra is missing.
    """

    def __init__(self, *, remote_desktop: bool, bus_address: str | None = None) -> None:
        self.remote_desktop = remote_desktop
        self.bus = SessionBus(bus_address, enable_fds=True)
        self.streams: list[MonitorStream] = []
        self.rd_session: str | None = None
        self.sc_session: str | None = None
        self._closed_signals: list[queue.Queue[Any]] = []
        self._closed = False
        self._lost = False  # a call found the session gone
        try:
            self._start()
        except BaseException:
            self.close()
            raise

    def _start(self) -> None:
        bus = self.bus
        for name in (SCREEN_CAST, REMOTE_DESKTOP) if self.remote_desktop else (SCREEN_CAST,):
            if not bus.name_has_owner(name):
                raise PlatformError(f"{name} is not on the session bus: this is not a GNOME (Mutter) "
                                    "Wayland session", name=name)
        options: dict[str, Any] = {}
        if self.remote_desktop:
            (self.rd_session,) = bus.call(REMOTE_DESKTOP, _RD_PATH, REMOTE_DESKTOP, "CreateSession")
            session_id = bus.get_property(REMOTE_DESKTOP, self.rd_session, f"{REMOTE_DESKTOP}.Session",
                                          "SessionId")
            options["remote-desktop-session-id"] = variant("s", session_id)
        (sc_session,) = bus.call(SCREEN_CAST, _SC_PATH, SCREEN_CAST, "CreateSession", "a{sv}", (options,))
        self.sc_session = sc_session
        # Mutter ends its sessions itself when the monitors change (a new scale, a monitor
        # plugged in): their streams are gone then, and so is the input session.
        self._closed_signals = [bus.subscribe(interface=f"{SCREEN_CAST}.Session", member="Closed",
                                              path=self.sc_session)]
        if self.rd_session is not None:
            self._closed_signals.append(bus.subscribe(interface=f"{REMOTE_DESKTOP}.Session", member="Closed",
                                                      path=self.rd_session))
        layout = _monitor_layout(bus)
        if not layout:
            raise PlatformError("Mutter's DisplayConfig reports no active monitor", call="GetCurrentState")
        added: dict[str, tuple[str, queue.Queue[Any]]] = {}
        for connector in layout:
            (path,) = bus.call(SCREEN_CAST, self.sc_session, f"{SCREEN_CAST}.Session", "RecordMonitor",
                               "sa{sv}", (connector, {"cursor-mode": variant("u", _CURSOR_METADATA)}))
            added[connector] = (path, bus.subscribe(interface=f"{SCREEN_CAST}.Stream",
                                                    member="PipeWireStreamAdded", path=path))
        if self.remote_desktop:
            bus.call(REMOTE_DESKTOP, str(self.rd_session), f"{REMOTE_DESKTOP}.Session", "Start")
        else:
            bus.call(SCREEN_CAST, self.sc_session, f"{SCREEN_CAST}.Session", "Start")
        for connector, (path, signals) in added.items():
            try:
                (node_id,) = signals.get(timeout=_STREAM_TIMEOUT)
            except queue.Empty as exc:
                raise PlatformError(f"Mutter did not announce the PipeWire node of {connector} within "
                                    f"{_STREAM_TIMEOUT:g} s (is PipeWire running?)", connector=connector) from exc
            x, y, width, height, scale, primary = layout[connector]
            self.streams.append(MonitorStream(connector, path, int(node_id), x, y, width, height, scale, primary))
        self.streams.sort(key=lambda s: (not s.primary, s.x, s.y))

    @property
    def ended(self) -> bool:
        """Whether Mutter closed this session (the display configuration changed) or it was
        closed here: a new one must be opened."""
        if self._closed or self._lost:
            return True
        return any(not signals.empty() for signals in self._closed_signals)

    @property
    def pointer(self) -> tuple[int, int] | None:
        """Where this process's Mutter input last put the pointer (physical pixels; None
        before any): one value per process, as the capture may hold a session of its own."""
        return _pointer[0][1] if _pointer[0] else None

    @pointer.setter
    def pointer(self, position: tuple[int, int]) -> None:
        _pointer[0] = (time.monotonic(), position)

    def stream_at(self, x: int, y: int) -> MonitorStream:
        """The stream of the monitor containing the physical point (the nearest one if none)."""
        def distance(s: MonitorStream) -> int:
            dx = max(s.x - x, 0, x - (s.x + s.width - 1))
            dy = max(s.y - y, 0, y - (s.y + s.height - 1))
            return dx + dy
        return min(self.streams, key=distance)

    def notify(self, method: str, signature: str, body: tuple[Any, ...]) -> None:
        """One input call on the remote-desktop session (``NotifyPointerButton`` ...)."""
        if self.rd_session is None:
            raise PlatformError("this Mutter session has no remote-desktop part", call=method)
        try:
            self.bus.call(REMOTE_DESKTOP, self.rd_session, f"{REMOTE_DESKTOP}.Session", method, signature, body)
        except DBusCallError as exc:
            if exc.details.get("error") == "org.freedesktop.DBus.Error.UnknownMethod":
                self._lost = True  # Mutter closed it (measured: a scale change does, no signal seen)
            raise

    def round_trip(self) -> None:
        """Wait until Mutter has handled every call sent before (a D-Bus round trip)."""
        self.bus.name_has_owner(SCREEN_CAST)

    def close(self) -> None:
        """Stop the session and its streams, close the connection. Idempotent."""
        if self._closed:
            return
        self._closed = True
        for stream in self.streams:
            stream.close()
        try:
            if self.rd_session is not None:
                self.bus.call(REMOTE_DESKTOP, self.rd_session, f"{REMOTE_DESKTOP}.Session", "Stop", timeout=2.0)
            elif self.sc_session is not None:
                self.bus.call(SCREEN_CAST, self.sc_session, f"{SCREEN_CAST}.Session", "Stop", timeout=2.0)
        except DBusCallError:
            pass  # already stopped (Mutter went away): closing the connection ends it anyway
        self.bus.close()


# -- one session per kind per process ------------------------------------------------------

_shared: dict[bool, tuple[MutterSession, int]] = {}
#: (time.monotonic(), position) of the newest pointer motion this process sent.
_pointer: list[tuple[float, tuple[int, int]] | None] = [None]
_shared_lock = threading.Lock()


def acquire_mutter(*, remote_desktop: bool) -> MutterSession:
    """The process's shared session: a remote-desktop one when asked (input), otherwise any
    open one (capture reuses the input's), else a new screencast-only one."""
    with _shared_lock:
        for kind, (held, _count) in list(_shared.items()):
            if held.ended:  # its holders still release it (then closed); nobody new gets it
                del _shared[kind]
        for kind in ((True,) if remote_desktop else (True, False)):
            if kind in _shared:
                session, count = _shared[kind]
                _shared[kind] = (session, count + 1)
                return session
        session = MutterSession(remote_desktop=remote_desktop)
        _shared[remote_desktop] = (session, 1)
        return session


def pointer_position(*sessions: MutterSession) -> tuple[int, int] | None:
    """Where the pointer is: the newest position any connected stream's cursor metadata gave
    (``sessions`` and the process's shared ones; the user's moves included) that lies on a
    monitor, or where this process's input last put it, whichever is newer; None before
    either."""
    with _shared_lock:
        candidates = {id(s): s for s in (*sessions, *(held for held, _ in _shared.values()))}
    seen: list[tuple[float, tuple[int, int]]] = []
    moved = _pointer[0]
    now = time.monotonic()
    for session in candidates.values():
        for stream in session.streams:
            log = [(at, (x, y)) for at, (x, y) in stream.cursor_log()
                   if any(s.x <= x < s.x + s.width and s.y <= y < s.y + s.height for s in session.streams)]
            found = newest_pointer_update(log, moved, now)
            if found is not None:
                seen.append(found)
    # The newer of the two: metadata arrives a frame after a motion we sent, and a position
    # the user moved to after ours arrives as metadata only.
    if moved is not None:
        seen.append(moved)
    return max(seen)[1] if seen else None


#: Pixels a stream's pointer may differ from the motion sent (scaled monitors round).
_POINTER_SLACK = 2
#: Seconds after a motion we sent in which metadata counts only once it has shown that
#: motion: past them, a user's move that Mutter coalesced with ours still counts.
_CATCH_UP = 1.0


def newest_pointer_update(log: list[tuple[float, tuple[int, int]]], moved: tuple[float, tuple[int, int]] | None,
                          now: float) -> tuple[float, tuple[int, int]] | None:
    """The newest of a stream's metadata updates ``log`` ((when received, position), oldest
    first) that is newer than the motion ``moved`` this process sent, or the newest update
    where none is; None for an empty log.

    Metadata is stamped when it arrives, and a frame Mutter made before our motion can
    arrive after it on a loaded machine, carrying the old position: an update received
    after ``moved`` counts only from the first one that shows the motion's position (the
    stream caught up; the user's later moves come after it), or once ``_CATCH_UP`` seconds
    have passed since the motion."""
    if not log:
        return None
    if moved is None:
        return log[-1]
    sent_at, (mx, my) = moved
    after = [entry for entry in log if entry[0] >= sent_at]
    if not after:
        return log[-1]  # older than our motion: the caller takes ours
    for _at, (x, y) in after:
        if abs(x - mx) <= _POINTER_SLACK and abs(y - my) <= _POINTER_SLACK:
            return after[-1]  # caught up: everything from there on is newer than ours
    if now - sent_at > _CATCH_UP:
        return after[-1]
    return None  # only frames made before our motion so far: the caller takes ours


def release_mutter(session: MutterSession) -> None:
    """Give back a session from :func:`acquire_mutter`; the last release closes it."""
    with _shared_lock:
        kind = session.remote_desktop
        held = _shared.get(kind)
        if held is None or held[0] is not session:
            session.close()
            return
        if held[1] > 1:
            _shared[kind] = (session, held[1] - 1)
            return
        del _shared[kind]
    session.close()

