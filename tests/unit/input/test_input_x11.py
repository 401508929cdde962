"""The X11 ctypes layer and the XTest backend's pure parts (no display needed)."""

from __future__ import annotations

import contextlib
import ctypes
import os
import struct
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from deskpilot._errors import InputError
from deskpilot._x11 import CFUNCTIONS, LIBRARIES, XErrorEvent, XFixesCursorImage
from deskpilot.input import parse_combo
from deskpilot.input._xtest import XTestBackend, char_keysym


def test_prototype_table_is_sorted_and_names_known_libraries() -> None:
    assert list(CFUNCTIONS) == sorted(CFUNCTIONS)
    assert {lib for lib, _, _ in CFUNCTIONS.values()} == set(LIBRARIES)


@pytest.mark.skipif(struct.calcsize("P") != 8 or sys.platform == "win32", reason="LP64 layout")
def test_xfixes_cursor_image_has_the_lp64_layout() -> None:
    # Xfixes.h: short x, y; unsigned short width, height, xhot, yhot; unsigned long
    # cursor_serial; unsigned long *pixels; Atom atom; const char *name.
    offsets = {name: getattr(XFixesCursorImage, name).offset for name, *_ in XFixesCursorImage._fields_}
    assert offsets == {"x": 0, "y": 2, "width": 4, "height": 6, "xhot": 8, "yhot": 10,
                       "cursor_serial": 16, "pixels": 24, "atom": 32, "name": 40}
    assert ctypes.sizeof(XFixesCursorImage) == 48
    assert ctypes.sizeof(ctypes.c_ulong) == 8  # one pixel per unsigned long: 8 bytes
    assert XErrorEvent.error_code.offset == 32 and XErrorEvent.minor_code.offset == 34


@pytest.mark.parametrize(
    ("ch", "keysym"),
    [
        ("a", 0x61), ("A", 0x41), (" ", 0x20), ("~", 0x7E),
        ("é", 0xE9), ("ß", 0xDF), ("\u00a0", 0xA0),
        ("€", 0x010020AC), ("世", 0x01004E16), ("✓", 0x01002713), ("𝄞", 0x0101D11E),
        ("\n", 0xFF0D), ("\r", 0xFF0D), ("\t", 0xFF09), ("\b", 0xFF08), ("\x1b", 0xFF1B),
    ],
)
def test_char_keysym(ch: str, keysym: int) -> None:
    assert char_keysym(ch) == keysym


@pytest.mark.parametrize("ch", ["\x00", "\x07", "\x7f", "\x85", "\ud800"])
def test_untypeable_characters_are_refused(ch: str) -> None:
    with pytest.raises(InputError):
        char_keysym(ch)


@pytest.mark.skipif(sys.platform == "win32", reason="needs libX11")
def test_no_display_gives_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("ctypes.util")
    from deskpilot._x11 import library

    try:
        library("X11")
    except OSError:
        pytest.skip("libX11 is not installed")
    monkeypatch.delenv("DISPLAY", raising=False)
    from deskpilot.input import InputController

    with pytest.raises(InputError, match="no X display: is DISPLAY set"):
        InputController("xtest")
    assert "DISPLAY" not in os.environ


# -- XTestBackend over a fake libX11/libXtst ------------------------------------------

_CONTROL_L, _SHIFT_L, _A, _CAPITAL_A, _F13 = 0xFFE3, 0xFFE1, 0x61, 0x41, 0xFFCA
_SPARE = 12


class FakeXlib:
    """libX11 and libXtst as XTestBackend calls them: a four-keycode keymap (Control_L,
    Shift_L, a/A and one spare) and every key event and remap in order."""

    def __init__(self) -> None:
        self.keymap: dict[int, tuple[int, int]] = {
            9: (_CONTROL_L, 0), 10: (_SHIFT_L, 0), 11: (_A, _CAPITAL_A), _SPARE: (0, 0),
        }
        self.events: list[tuple[str, int, int]] = []

    def XTestQueryExtension(self, display: int, *out: object) -> int:
        return 1

    def XDisplayKeycodes(self, display: int, lo: Any, hi: Any) -> None:
        lo._obj.value, hi._obj.value = min(self.keymap), max(self.keymap)

    def XGetKeyboardMapping(
        self, display: int, first: int, count: int, per: Any
    ) -> ctypes.Array[ctypes.c_ulong]:
        per._obj.value = 2
        syms = [sym for kc in range(first, first + count) for sym in self.keymap[kc]]
        return (ctypes.c_ulong * len(syms))(*syms)

    def XChangeKeyboardMapping(
        self, display: int, first: int, per: int, syms: Any, count: int
    ) -> None:
        self.keymap[first] = (syms[0], syms[1])
        self.events.append(("map", first, syms[0]))

    def XTestFakeKeyEvent(self, display: int, keycode: int, down: int, delay: int) -> None:
        self.events.append(("key", keycode, down))

    def XFree(self, pointer: object) -> None:
        pass

    def XFlush(self, display: int) -> None:
        pass

    def XkbQueryExtension(self, display: int, *out: object) -> int:
        return 0  # no XKB: no layout notifications, no lock handling


class FakeRecord:
    """The shared input record kept in memory (the real one is a root-window property)."""

    def __init__(self, display: object, owner: Any) -> None:
        from deskpilot._x11._record import OwnerEntry

        self.owner = owner
        self.owners: dict[str, OwnerEntry] = {}

    def publish(self, entry: Any) -> None:
        self.owners[self.owner.key] = entry

    @contextlib.contextmanager
    def transaction(self) -> Iterator[dict[str, Any]]:
        owners = dict(self.owners)
        yield owners
        self.owners = owners


class FakeDisplay:
    def __init__(self, x11: FakeXlib) -> None:
        self.x11 = x11
        self.ptr = 1
        self.root = 1

    @property
    def closed(self) -> bool:
        return self.ptr == 0

    def handle(self) -> int:
        return self.ptr

    def sync(self, call: str) -> None:
        pass

    def close(self) -> None:
        self.ptr = 0


@pytest.fixture
def fake_xtest(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[XTestBackend, FakeXlib]]:
    from deskpilot.input import _xtest

    xlib = FakeXlib()
    monkeypatch.setattr(_xtest, "library", lambda short: xlib)
    monkeypatch.setattr(_xtest, "XDisplay", lambda error, name: FakeDisplay(xlib))
    monkeypatch.setattr(_xtest, "InputRecord", FakeRecord)
    backend = XTestBackend(remap_guard=0, settle=0)
    real_chunk = backend._chunk
    calls = 0

    def chunk(keysyms: list[int], start: int) -> int:
        # A planner that stops advancing would spin in type_text forever: fail instead.
        nonlocal calls
        calls += 1
        assert calls <= 100, "type_text made no progress"
        return real_chunk(keysyms, start)

    monkeypatch.setattr(backend, "_chunk", chunk)
    yield backend, xlib
    backend.close()


def test_held_modifiers_leave_the_spare_keycodes_free(
    fake_xtest: tuple[XTestBackend, FakeXlib],
) -> None:
    backend, xlib = fake_xtest
    (ctrl,) = parse_combo("ctrl")
    backend.key(ctrl, True)  # held on its own keycode, not a spare
    backend.type_text("世a世")
    backend.key(ctrl, False)
    # (the spare is given back once typing is over: remap_guard is 0 here, so maybe already)
    assert [e for e in xlib.events if e != ("map", _SPARE, 0)] == [
        ("key", 9, 1),
        ("map", _SPARE, 0x01004E16),  # the one spare, mapped once and reused
        ("key", _SPARE, 1), ("key", _SPARE, 0),
        ("key", 11, 1), ("key", 11, 0),
        ("key", _SPARE, 1), ("key", _SPARE, 0),
        ("key", 9, 0),
    ]


def test_typing_while_every_spare_is_held_is_refused(
    fake_xtest: tuple[XTestBackend, FakeXlib],
) -> None:
    backend, xlib = fake_xtest
    (f13,) = parse_combo("f13")  # not in the keymap: pressed through the only spare
    backend.key(f13, True)
    assert xlib.keymap[_SPARE] == (_F13, _F13)
    with pytest.raises(InputError, match=r"cannot type '世': all 1 spare keycodes are held down"):
        backend.type_text("世")
    assert xlib.keymap[_SPARE] == (_F13, _F13)  # the held key was not remapped under it
    backend.type_text("a")  # mapped characters need no spare
    backend.key(f13, False)
    backend.type_text("世")
    # (the spare may have been given back in between: remap_guard is 0 here)
    assert [e for e in xlib.events if e != ("map", _SPARE, 0)][-4:] == [
        ("key", _SPARE, 0), ("map", _SPARE, 0x01004E16), ("key", _SPARE, 1), ("key", _SPARE, 0),
    ]


def test_the_spare_is_given_back_after_typing_without_close(
    fake_xtest: tuple[XTestBackend, FakeXlib],
) -> None:
    import time

    backend, xlib = fake_xtest
    backend.type_text("世")
    deadline = time.monotonic() + 10
    while xlib.keymap[_SPARE] != (0, 0) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert xlib.keymap[_SPARE] == (0, 0)
    assert xlib.events[-1] == ("map", _SPARE, 0)
