"""The xdg-desktop-portal capture backend: the ScreenCast portal's PipeWire streams, for
Wayland desktops whose compositor's own interfaces deskpilot does not speak (KDE Plasma, ...).

The user approves screen sharing once in the desktop's dialog; the restore token the portal
answers with is kept (:mod:`deskpilot._wayland._portal`), so later sessions start without a
dialog. One stream per shared monitor stays open for the backend's life; a grab is a view of
the newest frame, and the stream's frames are the settle's change signal, as with Mutter.
The cursor comes as metadata where the portal offers it (drawn here as the arrow, as the
Mutter backend does), else it is drawn into the frames by the compositor.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from deskpilot._errors import CaptureError
from deskpilot._wayland import APPROVAL_TIMEOUT, PortalScreenCast, PortalStream
from deskpilot.capture._base import CursorImage, Monitor
from deskpilot.capture._mutter import ARROW_CURSOR, StreamDamage, stream_index, stream_view
from deskpilot.geometry import Rect

__all__ = ["PortalBackend"]

Pixels = npt.NDArray[np.uint8]
_CURSOR_METADATA = 4


class PortalBackend:
    """Frames of every monitor the user shares through the ScreenCast portal.

    ``restore_token``: the token to pass (default the saved one). ``approval_timeout``:
    seconds to wait for the user's answer when the portal shows its dialog. Raises
    :class:`~deskpilot.PlatformError` when there is no ScreenCast portal, the user declines or
    does not answer; :class:`ImportError` (jeepney) without the ``wayland`` extra.
    """

    name = "portal"

    def __init__(self, *, cursor: bool = True, restore_token: str | None = None,
                 approval_timeout: float = APPROVAL_TIMEOUT) -> None:
        self._session = PortalScreenCast(restore_token=restore_token, approval_timeout=approval_timeout)
        self._want_cursor = cursor
        self._closed = False

    @property
    def session(self) -> PortalScreenCast:
        """The portal session (for tests and doctor)."""
        return self._session

    def _check_open(self) -> None:
        if self._closed:
            raise CaptureError("the portal capture backend is closed")
        if self._session.ended:
            raise CaptureError("the screen-sharing session ended (the user stopped sharing, or the desktop "
                               "closed it): open a new capturer")

    def monitors(self) -> list[Monitor]:
        self._check_open()
        return [Monitor(i, Rect(s.x, s.y, s.width, s.height), i == 1, f"portal-{s.node_id}")
                for i, s in enumerate(self._session.streams, start=1)]

    def _stream(self, monitor: int) -> PortalStream:
        self._check_open()
        return self._session.streams[monitor - 1]

    def monitor_of(self, rect: Rect) -> int:
        """The 1-based index of the shared monitor that contains ``rect`` whole."""
        return stream_index(self._session.streams, rect, "shared monitor")

    def grab_bgra(self, rect: Rect) -> Pixels:
        self._check_open()
        stream = self._session.streams[self.monitor_of(rect) - 1]
        return stream_view(stream, rect, f"portal node {stream.node_id}")

    def damage_source(self, monitor: int) -> StreamDamage:
        """The drawing notifications of monitor ``monitor`` (1-based) for the agent's settle."""
        return StreamDamage(self._stream(monitor).frames())

    def pointer(self) -> tuple[int, int] | None:
        """Where the pointer is as the newest stream metadata said (None before any, or when the
        portal draws the cursor into the frames)."""
        self._check_open()
        seen = [p for p in (s.cursor() for s in self._session.streams) if p is not None]
        return seen[-1] if seen else None

    def cursor(self) -> CursorImage | None:
        self._check_open()
        if not self._want_cursor or self._session.cursor_mode != _CURSOR_METADATA:
            return None  # not wanted, or already drawn into the frames by the compositor
        position = self.pointer()
        if position is None:
            return None
        return CursorImage(ARROW_CURSOR, "straight", (0, 0), position, serial=1)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._session.close()
