"""X DAMAGE through ctypes: learn *that* the screen changed without looking at it.

The settle loop used to grab and digest the whole screen every 10 ms to find out
whether an app was still repainting (two grabs at least, ~4 ms of CPU each). The X
server already knows: every drawing request damages a region of the window it draws
to, and the DAMAGE extension reports that to any client that asks. A
:class:`DamageWatcher` asks for the root window with ``IncludeInferiors`` semantics
(the server reports damage to the root's descendants on the root's damage object), at
the ``BoundingBox`` level: a ``DamageNotify`` whenever the bounding box of the
accumulated damage grows, carrying that box in root coordinates; ``XDamageSubtract``
empties the damage after each read. Only boxes that meet the working area count
(``area``): a video playing on another monitor does not keep the agent waiting. The
box of everything drawn since the last read covers every drawing, so drawing inside
the area is never missed (at worst, drawing on both sides of it counts). Its own X
connection carries nothing else, so its file descriptor becoming readable means
"something was drawn".

The watcher never blocks: :meth:`DamageWatcher.drain` reads whatever events have
arrived (``XPending`` / ``XNextEvent``) and says how many were damage. The caller
waits on :meth:`DamageWatcher.fileno` (``loop.add_reader``), which keeps Ctrl+C
immediate. One watcher belongs to one thread (the event loop's).

``lib`` is the function table (``XDamageQueryExtension``, ``XDamageCreate``, ...) and
``display`` an :class:`~deskpilot._x11.XDisplay`-like connection: both can be fakes,
which is how the unit tests drive it without a server.
"""

from __future__ import annotations

import ctypes
import time
from ctypes import c_int
from types import SimpleNamespace
from typing import Any, Protocol

from deskpilot._errors import PlatformError
from deskpilot._x11._lib import CFUNCTIONS, XEvent, XRectangle, library
from deskpilot.geometry import Rect

__all__ = [
    "DAMAGE_FUNCTIONS",
    "DAMAGE_NOTIFY",
    "REPORT_BOUNDING_BOX",
    "DamageWatcher",
    "damage_library",
]

#: ``XDamageReportBoundingBox``: an event whenever the damage's bounding box grows.
REPORT_BOUNDING_BOX = 2
#: ``XDamageNotify``: the event code, relative to the extension's event base.
DAMAGE_NOTIFY = 0

#: The functions a watcher calls (libXdamage's and libX11's event-queue calls), all
#: declared in :data:`deskpilot._x11._lib.CFUNCTIONS`. Sorted by name.
DAMAGE_FUNCTIONS: tuple[str, ...] = (
    "XConnectionNumber",
    "XDamageCreate",
    "XDamageDestroy",
    "XDamageQueryExtension",
    "XDamageSubtract",
    "XFlush",
    "XNextEvent",
    "XPending",
)


def damage_library() -> SimpleNamespace:
    """The functions of :data:`DAMAGE_FUNCTIONS` from the shared libX11/libXdamage
    handles (loaded once; PlatformError when libXdamage is missing)."""
    return SimpleNamespace(
        **{name: getattr(library(CFUNCTIONS[name][0]), name) for name in DAMAGE_FUNCTIONS}
    )


class _Display(Protocol):
    root: int

    def handle(self) -> int: ...
    def sync(self, call: str) -> None: ...
    def close(self) -> None: ...


class DamageWatcher:
    """DAMAGE notifications for the whole screen on a private connection.

    Raises :class:`PlatformError` when there is no display or the server lacks the
    DAMAGE extension (callers fall back to polling). ``area``: only drawing that meets
    this rectangle (root coordinates) counts; None: anywhere. ``display`` and ``lib``
    default to a new :class:`~deskpilot._x11.XDisplay` and :func:`damage_library`.
    """

    def __init__(
        self, area: Rect | None = None, display: _Display | None = None, lib: Any = None
    ) -> None:
        self.area = area
        if lib is None:
            lib = damage_library()
        if display is None:
            from deskpilot._x11._display import XDisplay

            display = XDisplay(PlatformError)
        self._lib = lib
        self._display: _Display | None = display
        self._event = XEvent()
        try:
            event_base, error_base = c_int(0), c_int(0)
            if not lib.XDamageQueryExtension(
                display.handle(), ctypes.byref(event_base), ctypes.byref(error_base)
            ):
                raise PlatformError(
                    "the X server has no DAMAGE extension", call="XDamageQueryExtension"
                )
            self._notify = event_base.value + DAMAGE_NOTIFY
            self._damage = int(
                lib.XDamageCreate(display.handle(), display.root, REPORT_BOUNDING_BOX)
            )
            display.sync("XDamageCreate")
            self._fd = int(lib.XConnectionNumber(display.handle()))
        except BaseException:
            display.close()
            self._display = None
            raise
        #: Damage events seen since the watcher was made (a counter for tests and records).
        self.events = 0
        #: ``time.perf_counter()`` of the last :meth:`drain` that found damage (0: none yet);
        #: other threads may read it to drop work on a frame already overtaken.
        self.last_damage = 0.0

    def fileno(self) -> int:
        """The connection's descriptor: readable when events (damage) have arrived."""
        return self._fd

    @property
    def closed(self) -> bool:
        return self._display is None

    def drain(self) -> int:
        """Read every event that has arrived, without blocking; empty the damage when
        any was damage. Returns the number of damage events that meet the area."""
        display = self._display
        if display is None:
            raise PlatformError("the damage watcher is closed", call="drain")
        lib, dpy = self._lib, display.handle()
        damaged = seen = 0
        while lib.XPending(dpy) > 0:
            lib.XNextEvent(dpy, ctypes.byref(self._event))
            if self._event.type == self._notify:
                damaged += 1
                if self._meets_area(self._event.damage.area):
                    seen += 1
        if damaged:
            # Empty the accumulated damage so the next drawing sends a new event.
            lib.XDamageSubtract(dpy, self._damage, 0, 0)
            lib.XFlush(dpy)
        if seen:
            self.last_damage = time.perf_counter()
            self.events += seen
        return seen

    def _meets_area(self, box: XRectangle) -> bool:
        area = self.area
        if area is None:
            return True
        return bool(
            box.x < area.left + area.width
            and area.left < box.x + box.width
            and box.y < area.top + area.height
            and area.top < box.y + box.height
        )

    def close(self) -> None:
        """Destroy the damage object and close the connection. Idempotent."""
        display, self._display = self._display, None
        if display is None:
            return
        try:
            self._lib.XDamageDestroy(display.handle(), self._damage)
            self._lib.XFlush(display.handle())
        finally:
            display.close()

    def __enter__(self) -> DamageWatcher:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
