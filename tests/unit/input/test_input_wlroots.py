"""How the wlroots input backend splits a text into keymap uploads (no compositor needed:
the sway tier types the texts for real)."""

from __future__ import annotations

import pytest

from deskpilot._wayland._xkb import XkbKeymap
from deskpilot.input._wlroots import WlrootsInput, _text_keysym


def _backend(spares: int) -> WlrootsInput:
    keymap = XkbKeymap.build("us")
    keymap.spare = keymap.spare[:spares]
    backend = WlrootsInput.__new__(WlrootsInput)  # its planning only: no connection
    backend._keymap = keymap
    backend._extras = {}
    return backend


def _plan(backend: WlrootsInput, text: str) -> list[tuple[str, dict[int, int]]]:
    keysyms = [_text_keysym(ch) for ch in text]
    start, segments = 0, []
    while start < len(keysyms):
        end, extras = backend._segment(keysyms, start)
        segments.append((text[start:end], extras))
        backend._extras = extras
        start = end
    return segments


def test_layout_text_needs_no_upload() -> None:
    backend = _backend(3)
    [(segment, extras)] = _plan(backend, "Hello, World! ~")
    assert segment == "Hello, World! ~" and extras == {}


def test_extras_split_the_text_where_the_spares_run_out() -> None:
    backend = _backend(3)
    segments = _plan(backend, "a€b日本c語d😀€")
    assert [s for s, _ in segments] == ["a€b日本c", "語d😀€"]
    first, second = (e for _, e in segments)
    assert set(first) == {0x20AC, 0x10065E5, 0x100672C}
    assert set(second) == {0x1008A9E, 0x101F600, 0x20AC}
    assert first[0x20AC] == second[0x20AC]  # kept where it was: no change for it
    assert set(first.values()) <= set(backend._keymap.spare)
    # A text whose extras are bound already uploads nothing.
    [(_, again)] = _plan(backend, "語😀€")
    assert again is backend._extras


def test_control_characters() -> None:
    assert _text_keysym("\n") == 0xFF0D and _text_keysym("\t") == 0xFF09
    with pytest.raises(Exception, match="control character"):
        _text_keysym("\x01")
