"""The one X error handler (:mod:`deskpilot._x11._error_handler`) and the traps of
:class:`~deskpilot._x11.XDisplay` that read it, against a fake libX11 (no server)."""

from __future__ import annotations

import ctypes
import threading
from typing import Any

import pytest

from deskpilot._errors import InputError
from deskpilot._x11 import XDisplay, XError, _error_handler
from deskpilot._x11._lib import XERROR_HANDLER, XErrorEvent

DPY = 0xD15
OTHER = 0xBEEF


class FakeX11:
    """XSetErrorHandler plus what XDisplay's error paths call. ``XSync`` delivers the
    errors queued for the connection through the installed handler, as Xlib does when
    the replies arrive."""

    def __init__(self) -> None:
        self.installed: list[Any] = []
        self.queued: list[tuple[int, int]] = []  # (error code, request code)
        self.previous_calls: list[int] = []
        self.previous = XERROR_HANDLER(self._previous)
        self.grabs: list[tuple[int, int]] = []

    def _previous(self, display: int | None, event: Any) -> int:
        self.previous_calls.append(event.contents.error_code)
        return 0

    def XSetErrorHandler(self, handler: Any) -> Any:
        self.installed.append(handler)
        return self.previous

    def XSync(self, display: int, discard: int) -> int:
        queued, self.queued = self.queued, []
        for code, request in queued:
            event = XErrorEvent(type=0, display=display, error_code=code, request_code=request)
            self.installed[-1](display, ctypes.pointer(event))
        return 1

    def XGetErrorText(self, display: int, code: int, buf: Any, size: int) -> int:
        buf.value = {10: b"BadAccess (attempt to access private resource denied)"}.get(code, b"")
        return 0

    def XGrabKey(self, display: int, keycode: int, modifiers: int, *rest: int) -> int:
        self.grabs.append((keycode, modifiers))
        return 1


@pytest.fixture
def x11(monkeypatch: pytest.MonkeyPatch) -> FakeX11:
    """A fresh, uninstalled handler state whose libX11 is the fake."""
    fake = FakeX11()
    monkeypatch.setattr(_error_handler, "_handler", None)
    monkeypatch.setattr(_error_handler, "_previous", None)
    monkeypatch.setattr(_error_handler, "_pending", {})
    monkeypatch.setattr(_error_handler, "library", lambda short: fake)
    return fake


def deliver(code: int, display: int = DPY, request: int = 33) -> None:
    """Call the installed handler the way Xlib does (through the C function pointer)."""
    event = XErrorEvent(type=0, display=display, error_code=code, request_code=request, minor_code=0)
    _error_handler._handler(display, ctypes.pointer(event))


def display(x11: FakeX11) -> XDisplay:
    """An XDisplay on the fake (built without XOpenDisplay)."""
    d = XDisplay.__new__(XDisplay)
    d.error, d.x11, d.ptr, d.root, d.lock, d._atoms = InputError, x11, DPY, 0x1E7, threading.RLock(), {}
    _error_handler.watch(DPY)
    return d


def test_installed_once_however_many_threads_race_to_install(x11: FakeX11) -> None:
    barrier = threading.Barrier(8)

    def install() -> None:
        barrier.wait()
        _error_handler.install()

    threads = [threading.Thread(target=install) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    _error_handler.watch(DPY)
    assert len(x11.installed) == 1 and x11.installed[0] is _error_handler._handler


def test_errors_are_kept_per_connection_and_taken_once(x11: FakeX11) -> None:
    _error_handler.watch(DPY)
    _error_handler.watch(OTHER)
    deliver(10, request=33)
    deliver(3, display=OTHER)
    assert _error_handler.take(DPY) == [XError(code=10, request=33, minor=0, resource=0)]
    assert _error_handler.take(DPY) == []
    assert [e.code for e in _error_handler.take(OTHER)] == [3]
    assert x11.previous_calls == []


def test_errors_of_connections_not_watched_go_to_the_previous_handler(x11: FakeX11) -> None:
    _error_handler.watch(DPY)
    deliver(8, display=OTHER)  # another library's connection
    _error_handler.forget(DPY)
    deliver(9)  # closed and forgotten: no longer ours
    assert x11.previous_calls == [8, 9]
    assert _error_handler.take(DPY) == [] and _error_handler.take(OTHER) == []


def test_trap_collects_the_errors_of_its_block_only(x11: FakeX11) -> None:
    d = display(x11)
    x11.queued = [(2, 1)]  # an earlier request's error, not yet read
    with d.trap() as errors:
        d.grab_key(24, 0x0C)
        x11.queued.append((10, 33))  # the server refuses the grab
        assert errors == []  # filled on leaving the block
    assert errors == [XError(code=10, request=33, minor=0, resource=0)]
    with d.trap() as none:
        d.grab_key(24, 0x0E)
    assert none == []
    assert x11.grabs == [(24, 0x0C), (24, 0x0E)]


def test_sync_raises_the_first_error_with_its_text(x11: FakeX11) -> None:
    d = display(x11)
    x11.queued = [(10, 33), (2, 1)]
    with pytest.raises(InputError, match=r"XGrabKey failed: BadAccess .* \(request 33\.0\)") as info:
        d.sync("XGrabKey")
    assert info.value.details["error_code"] == 10
    d.sync("XGrabKey")  # the rest were dropped with the first
    x11.queued = [(99, 7)]
    assert [e.code for e in d.take_errors()] == [99]
    assert d.error_text(99) == "X error 99"


def test_handler_is_the_only_xseterrorhandler_caller() -> None:
    import pathlib

    import deskpilot

    root = pathlib.Path(deskpilot.__file__).parent
    callers = sorted(
        str(path.relative_to(root))
        for path in root.rglob("*.py")
        if ".XSetErrorHandler(" in path.read_text(encoding="utf-8")
    )
    assert callers == ["_x11/_error_handler.py"]

