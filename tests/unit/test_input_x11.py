"""The X11 ctypes layer and the XTest backend's pure parts (no display needed)."""

from __future__ import annotations

import ctypes
import os
import struct
import sys

import pytest

from deskpilot._errors import InputError
from deskpilot._x11 import CFUNCTIONS, LIBRARIES, XErrorEvent, XFixesCursorImage
from deskpilot.input._xtest import char_keysym


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
