"""One Xlib connection with errors turned into exceptions instead of process exits.

Xlib's default error handler prints and calls ``exit()``: a stray BadValue from a
keymap change would kill the agent. :func:`_install_handler` puts a process-wide
handler in place once; it records errors of the displays opened here (checked after
:meth:`XDisplay.sync`) and hands errors of other connections to whatever handler was
installed before.
"""

from __future__ import annotations

import ctypes
import os
import threading
from typing import Any

from deskpilot._errors import PlatformError
from deskpilot._x11._lib import XERROR_HANDLER, library

__all__ = ["XDisplay"]

_handler_lock = threading.Lock()
_handler: Any = None  # the installed XERROR_HANDLER (kept alive: ctypes does not)
_previous: Any = None
_errors: dict[int, list[tuple[int, int, int, int]]] = {}


def _on_error(display: int | None, event: Any) -> int:
    err = event.contents
    pending = _errors.get(display or 0)
    if pending is not None:
        pending.append((err.error_code, err.request_code, err.minor_code, err.resourceid))
        return 0
    if _previous:
        return int(_previous(display, event))
    return 0


def _install_handler() -> None:
    global _handler, _previous
    with _handler_lock:
        if _handler is None:
            _handler = XERROR_HANDLER(_on_error)
            _previous = library("X11").XSetErrorHandler(_handler)


class XDisplay:
    """An open X connection; ``error`` is the exception class its failures raise."""

    def __init__(self, error: type[PlatformError] = PlatformError, name: str | None = None) -> None:
        self.error = error
        self.x11 = library("X11")
        _install_handler()
        raw = name.encode() if name is not None else None
        ptr = self.x11.XOpenDisplay(raw)
        if not ptr:
            shown = name if name is not None else os.environ.get("DISPLAY")
            raise error(
                "no X display: is DISPLAY set?" if not shown else f"cannot open X display {shown!r}",
                display=shown,
                call="XOpenDisplay",
            )
        self.ptr: int = int(ptr)
        self.lock = threading.RLock()
        _errors[self.ptr] = []
        screen = int(self.x11.XDefaultScreen(self.ptr))
        self.root: int = int(self.x11.XDefaultRootWindow(self.ptr))
        self.width: int = int(self.x11.XDisplayWidth(self.ptr, screen))
        self.height: int = int(self.x11.XDisplayHeight(self.ptr, screen))

    @property
    def closed(self) -> bool:
        return self.ptr == 0

    def handle(self) -> int:
        """The Display* for a call; raises if the connection was closed."""
        if self.ptr == 0:
            raise self.error("X display connection is closed", call="handle")
        return self.ptr

    def sync(self, call: str) -> None:
        """Round-trip to the server and raise the first X error our requests caused."""
        self.x11.XSync(self.handle(), 0)
        self.raise_pending(call)

    def raise_pending(self, call: str) -> None:
        pending = _errors.get(self.ptr)
        if not pending:
            return
        code, request, minor, resource = pending[0]
        pending.clear()
        buf = ctypes.create_string_buffer(256)
        self.x11.XGetErrorText(self.ptr, code, buf, len(buf))
        text = buf.value.decode(errors="replace") or f"X error {code}"
        raise self.error(
            f"{call} failed: {text} (request {request}.{minor})",
            call=call,
            error_code=code,
            request_code=request,
            minor_code=minor,
            resource=resource,
        )

    def close(self) -> None:
        """Close the connection. Idempotent."""
        with self.lock:
            if self.ptr:
                ptr, self.ptr = self.ptr, 0
                self.x11.XCloseDisplay(ptr)
                _errors.pop(ptr, None)
