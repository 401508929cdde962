"""How the Mutter input backend splits a text: characters of the layout as keysyms, the rest
pasted through Mutter's clipboard (the backend itself runs in the Mutter tier)."""

from __future__ import annotations

from deskpilot.input._mutter import LAYOUT_KEYSYMS, _runs, layout_keysym


def test_layout_characters_are_their_keysyms() -> None:
    assert layout_keysym("a") == 0x61 and layout_keysym("~") == 0x7E and layout_keysym(" ") == 0x20
    assert layout_keysym("\n") == 0xFF0D and layout_keysym("\t") == 0xFF09
    # Outside the US layout: pasted (Mutter drops keysyms its layout lacks).
    for ch in ("€", "ü", "😀", "日", "𝄞"):
        assert layout_keysym(ch) is None
    assert len(LAYOUT_KEYSYMS) == 95 + 3


def test_text_is_cut_into_typed_and_pasted_runs() -> None:
    assert _runs("Hello, World!") == [(False, "Hello, World!")]
    assert _runs("😀 日本語 𝄞 €") == [(True, "😀 日本語 𝄞 €")]  # short layout gaps join the paste
    assert _runs("x 日本 y") == [(False, "x "), (True, "日本"), (False, " y")]
    # A newline or tab between pasted parts is a key (Enter, Tab), never pasted.
    assert _runs("a € b\nc 😀") == [(False, "a "), (True, "€"), (False, " b\nc "), (True, "😀")]
    # A long layout stretch between two pasted parts stays typed.
    assert _runs("€ and then a long stretch 😀") == [(True, "€"), (False, " and then a long stretch "), (True, "😀")]
    assert _runs("") == []
    assert "".join(chunk for _, chunk in _runs("mixed: x€y😀z 日本語 w𝄞 end")) == "mixed: x€y😀z 日本語 w𝄞 end"
