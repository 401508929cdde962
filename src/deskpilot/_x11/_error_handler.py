"""The one process-wide Xlib error handler, and the traps that read what it recorded.

Xlib's default error handler prints and calls ``exit()``: a stray BadValue from a keymap
change, or a BadWindow from a window that closed while its title was read, would kill
the agent. ``XSetErrorHandler`` is per *process*, not per connection, so exactly one
module may set it: this one. :func:`watch` installs the handler on first use (once,
under a lock) and starts recording the errors of one connection; every connection that
deskpilot opens (capture, input, damage, the kill-switch watcher, the window reader)
goes through :class:`~deskpilot._x11.XDisplay`, which calls it. Errors of connections
nobody here watches (another library's) go to the handler that was installed before.

Xlib calls the handler from the thread that reads the failing request's reply, which
is the thread making calls on that connection (each connection here is used by one
thread at a time), so errors are kept per connection, and :func:`take` after a round
trip (``XSync``) returns exactly the errors that connection's requests caused.

The handler is never removed. Restoring the previous one when the last connection
closes would race with threads that open a connection at that moment (their errors
would reach Xlib's exit-on-error default), and another library that installed its own
handler after ours, chaining to ours, would have its handler silently replaced. Left in
place it costs nothing: errors of unwatched connections are handed on unchanged.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from deskpilot._x11._lib import XERROR_HANDLER, library

__all__ = ["XError", "forget", "install", "take", "watch"]


@dataclass(frozen=True, slots=True)
class XError:
    """One X protocol error: its code and the request (major.minor) that caused it."""

    code: int
    request: int
    minor: int
    resource: int


_lock = threading.Lock()
_handler: Any = None  # the installed XERROR_HANDLER, kept alive here: ctypes does not
_previous: Any = None  # the handler it replaced (Xlib's default, or another library's)
# Display* -> errors not yet taken. Written by the handler without the lock: a dict
# lookup and a list append are atomic under the GIL, and the handler must never wait
# for a lock that a thread blocked inside Xlib might hold.
_pending: dict[int, list[XError]] = {}


def _on_error(display: int | None, event: Any) -> int:
    err = event.contents
    pending = _pending.get(display or 0)
    if pending is not None:
        pending.append(
            XError(int(err.error_code), int(err.request_code), int(err.minor_code), int(err.resourceid))
        )
        return 0
    if _previous:
        return int(_previous(display, event))
    return 0


def install() -> None:
    """Install the handler (idempotent, thread-safe); loads libX11."""
    global _handler, _previous
    with _lock:
        if _handler is None:
            handler = XERROR_HANDLER(_on_error)
            _previous = library("X11").XSetErrorHandler(handler)
            _handler = handler


def watch(display: int) -> None:
    """Record the errors of connection ``display`` from now on (installs the handler)."""
    install()
    with _lock:
        _pending.setdefault(display, [])


def forget(display: int) -> None:
    """Stop recording ``display`` (call when the connection is closed)."""
    with _lock:
        _pending.pop(display, None)


def take(display: int) -> list[XError]:
    """The errors recorded for ``display`` so far, removed from the record.

    Only errors whose replies Xlib has read are here: call after ``XSync`` to have all
    of them (:meth:`~deskpilot._x11.XDisplay.take_errors` does both)."""
    pending = _pending.get(display)
    if not pending:
        return []
    out = list(pending)
    del pending[: len(out)]
    return out
