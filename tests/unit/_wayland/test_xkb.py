"""The virtual keyboard's keymap: libxkbcommon's layout plus spare keycodes; the keymap text
with extras compiles again and binds what was asked (libxkbcommon itself checks it)."""

from __future__ import annotations

import ctypes

import pytest

from deskpilot._wayland import _xkb
from deskpilot._wayland._xkb import XkbKeymap, utf32_to_keysym


@pytest.fixture(scope="module")
def keymap() -> XkbKeymap:
    try:
        return XkbKeymap.build("us")
    except Exception as exc:  # pragma: no cover - libxkbcommon0 and xkb-data come with GTK
        pytest.fail(f"libxkbcommon cannot build the us keymap: {exc}")


def test_the_layout_index_and_spares(keymap: XkbKeymap) -> None:
    a, shifted_a, shift = keymap.index[ord("a")], keymap.index[ord("A")], keymap.index[0xFFE1]
    assert a == (38, False) and shifted_a == (38, True) and shift == (50, False)
    assert all(code <= 255 for code, _ in keymap.index.values())  # Xwayland clips higher ones
    assert keymap.spare and all(8 <= code <= 255 for code in keymap.spare)
    assert not {code for code, _ in keymap.index.values()} & set(keymap.spare)
    assert keymap.masks["Shift"] == 1 and keymap.masks["Control"] == 4
    assert utf32_to_keysym("€") == 0x20AC and utf32_to_keysym("😀") == 0x101F600 and utf32_to_keysym("ü") == 0xFC


def test_extras_compile_to_the_asked_keysyms(keymap: XkbKeymap) -> None:
    extras = {keymap.spare[0]: 0x101F600, keymap.spare[1]: 0x20AC}
    text = keymap.with_extras(extras)
    lib = _xkb._xkb()
    lib.xkb_keymap_new_from_string.restype = ctypes.c_void_p
    lib.xkb_keymap_new_from_string.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_int]
    context = lib.xkb_context_new(0)
    compiled = lib.xkb_keymap_new_from_string(context, text.encode(), 1, 0)
    try:
        assert compiled, "the keymap text with extras does not compile"
        syms = ctypes.POINTER(ctypes.c_uint32)()
        for code, keysym in extras.items():
            assert lib.xkb_keymap_key_get_syms_by_level(compiled, code, 0, 0, ctypes.byref(syms)) == 1
            assert syms[0] == keysym
        # The layout is unchanged around them.
        assert lib.xkb_keymap_key_get_syms_by_level(compiled, 38, 0, 0, ctypes.byref(syms)) == 1 and syms[0] == ord("a")
    finally:
        if compiled:
            lib.xkb_keymap_unref(compiled)
        lib.xkb_context_unref(context)
    assert keymap.with_extras({}) == keymap.text
