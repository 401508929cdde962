"""Every pointer motion on a display, as events: the RECORD extension.

The kill switch's fail-safe corner must see the pointer *reach* a corner, not where the
pointer happens to be when it looks: sampled every 50 ms, a corner the user touched
just before the agent's next move took the pointer away again is missed (the stateless
mode's several actions per turn did exactly that). RECORD hands a client a copy of
every device event the server processes, for every client, with the root coordinates
the pointer moved to; physical devices, XTest (the agent's own moves and xdotool's)
alike. XWarpPointer moves no device and is not seen (neither is it a user's gesture).

RECORD needs two connections: the *control* one creates the context, the *data* one
is enabled on it and then carries only the intercepted events; the watcher selects on
the data connection's socket and calls :meth:`MotionRecorder.drain` when it is readable.
"""

from __future__ import annotations

import contextlib
import ctypes
import struct
from ctypes import POINTER, byref, c_int, c_ulong

from deskpilot._errors import PlatformError
from deskpilot._x11._display import XDisplay
from deskpilot._x11._lib import XRECORD_INTERCEPT, XRecordInterceptData, XRecordRange, library

__all__ = ["MotionRecorder"]

_MOTION_NOTIFY = 6
_FROM_SERVER = 0  # XRecordFromServer: events and replies the server sends
_ALL_CLIENTS = 3  # XRecordAllClients
#: xEvent's keyButtonPointer: rootX and rootY are INT16 at bytes 20 and 22.
_ROOT_XY = struct.Struct("=hh")


class MotionRecorder:
    """The positions of every pointer motion on ``display`` since the last :meth:`drain`.

    Raises :class:`PlatformError` when the server has no RECORD extension (the caller
    then samples the pointer instead). ``control``: an open connection to create the
    context on (the kill switch's own), else one is opened. Not thread-safe: one thread
    opens, drains and closes it (the kill switch's watcher).
    """

    def __init__(self, display: str | None = None, *, control: XDisplay | None = None) -> None:
        self._xtst = library("Xtst")
        #: The control connection: the caller's (left open on close) or one of our own.
        self._own_control = control is None
        self.control = XDisplay(PlatformError, display) if control is None else control
        self.data: XDisplay | None = None
        self.context = 0
        self._positions: list[tuple[int, int]] = []
        # Kept referenced for as long as the context is enabled: ctypes frees the thunk
        # with the Python object.
        self._callback = XRECORD_INTERCEPT(self._intercept)
        try:
            major, minor = c_int(), c_int()
            if not self._xtst.XRecordQueryVersion(self.control.handle(), byref(major), byref(minor)):
                raise PlatformError("the X server has no RECORD extension", call="XRecordQueryVersion")
            self.version = (major.value, minor.value)
            ranges = self._xtst.XRecordAllocRange()
            if not ranges:
                raise PlatformError("XRecordAllocRange failed", call="XRecordAllocRange")
            try:
                ranges.contents.device_events.first = _MOTION_NOTIFY
                ranges.contents.device_events.last = _MOTION_NOTIFY
                clients = c_ulong(_ALL_CLIENTS)
                array = (POINTER(XRecordRange) * 1)(ranges)
                self.context = int(
                    self._xtst.XRecordCreateContext(self.control.handle(), 0, byref(clients), 1, array, 1)
                )
            finally:
                self.control.x11.XFree(ranges)
            if not self.context:
                raise PlatformError("XRecordCreateContext failed", call="XRecordCreateContext")
            self.control.sync("XRecordCreateContext")
            self.data = XDisplay(PlatformError, display)
            if not self._xtst.XRecordEnableContextAsync(self.data.handle(), self.context, self._callback, None):
                raise PlatformError("XRecordEnableContextAsync failed", call="XRecordEnableContextAsync")
            self.data.flush()
        except BaseException:
            self.close()
            raise

    def _intercept(self, _closure: int | None, data: ctypes._Pointer[XRecordInterceptData]) -> None:
        # Called by Xlib inside XRecordProcessReplies, on the draining thread. It must
        # not raise (a ctypes callback's exception is printed and lost) and must free
        # what it is given.
        try:
            record = data.contents
            if (
                record.category == _FROM_SERVER
                and record.data
                and record.data_len * 4 >= 24
                and record.data[0] & 0x7F == _MOTION_NOTIFY
            ):
                raw = ctypes.string_at(record.data, 24)
                self._positions.append(_ROOT_XY.unpack_from(raw, 20))
        except Exception:
            pass
        finally:
            self._xtst.XRecordFreeData(data)

    def fileno(self) -> int:
        """The data connection's socket: readable when motion has arrived."""
        if self.data is None:
            raise PlatformError("the motion recorder is closed", call="fileno")
        return self.data.fileno()

    def drain(self) -> list[tuple[int, int]]:
        """Root positions of the motions that arrived since the last call, in order."""
        if self.data is not None and not self.data.closed:
            self._xtst.XRecordProcessReplies(self.data.handle())
        positions, self._positions = self._positions, []
        return positions

    def close(self) -> None:
        """Disable and free the context, close the data connection and the control one if
        it opened it. Idempotent."""
        control, data = self.control, self.data
        if self.context and not control.closed:
            with contextlib.suppress(Exception), control.trap():
                self._xtst.XRecordDisableContext(control.handle(), self.context)
                self._xtst.XRecordFreeContext(control.handle(), self.context)
                control.x11.XSync(control.handle(), 0)
        self.context = 0
        if data is not None and not data.closed:
            data.close()
        self.data = None
        if self._own_control and not control.closed:
            control.close()
