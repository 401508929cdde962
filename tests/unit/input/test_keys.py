"""The key vocabulary: names, aliases, codes and combo parsing."""

from __future__ import annotations

import pytest

from deskpilot._errors import InputError, UnknownKeyError
from deskpilot.input._keys import (
    KEY_NAMES,
    SHIFTED_KEYS,
    KeySpec,
    key_aliases,
    parse_combo,
    resolve_key,
)


def names(combo: str) -> list[str]:
    return [k.name for k in parse_combo(combo)]


def test_letters_digits_and_function_keys_are_complete() -> None:
    for ch in "abcdefghijklmnopqrstuvwxyz":
        spec = resolve_key(ch.upper())
        assert spec == KeySpec(ch, ord(ch.upper()), False, ord(ch))
    for d in "0123456789":
        assert resolve_key(d).vk == ord(d) and resolve_key(d).keysym == ord(d)
    for n in range(1, 25):
        spec = resolve_key(f"F{n}")
        assert spec.vk == 0x6F + n  # VK_F1 = 0x70
        assert spec.keysym == 0xFFBD + n  # XK_F1 = 0xFFBE
    assert resolve_key("f24").vk == 0x87 and resolve_key("f24").keysym == 0xFFD5


@pytest.mark.parametrize(
    ("name", "vk", "extended", "keysym"),
    [
        ("enter", 0x0D, False, 0xFF0D),
        ("numenter", 0x0D, True, 0xFF8D),
        ("tab", 0x09, False, 0xFF09),
        ("escape", 0x1B, False, 0xFF1B),
        ("space", 0x20, False, 0x20),
        ("backspace", 0x08, False, 0xFF08),
        ("delete", 0x2E, True, 0xFFFF),
        ("insert", 0x2D, True, 0xFF63),
        ("home", 0x24, True, 0xFF50),
        ("end", 0x23, True, 0xFF57),
        ("pageup", 0x21, True, 0xFF55),
        ("pagedown", 0x22, True, 0xFF56),
        ("left", 0x25, True, 0xFF51),
        ("up", 0x26, True, 0xFF52),
        ("right", 0x27, True, 0xFF53),
        ("down", 0x28, True, 0xFF54),
        ("lctrl", 0xA2, False, 0xFFE3),
        ("rctrl", 0xA3, True, 0xFFE4),
        ("lalt", 0xA4, False, 0xFFE9),
        ("ralt", 0xA5, True, 0xFFEA),
        ("lshift", 0xA0, False, 0xFFE1),
        ("rshift", 0xA1, False, 0xFFE2),
        ("lwin", 0x5B, True, 0xFFEB),
        ("rwin", 0x5C, True, 0xFFEC),
        ("menu", 0x5D, True, 0xFF67),
        ("printscreen", 0x2C, True, 0xFF61),
        ("pause", 0x13, False, 0xFF13),
        ("scrolllock", 0x91, False, 0xFF14),
        ("capslock", 0x14, False, 0xFFE5),
        ("numlock", 0x90, True, 0xFF7F),
        ("num0", 0x60, False, 0xFFB0),
        ("num9", 0x69, False, 0xFFB9),
        ("multiply", 0x6A, False, 0xFFAA),
        ("add", 0x6B, False, 0xFFAB),
        ("subtract", 0x6D, False, 0xFFAD),
        ("decimal", 0x6E, False, 0xFFAE),
        ("divide", 0x6F, True, 0xFFAF),
        ("volumemute", 0xAD, True, 0x1008FF12),
        ("volumedown", 0xAE, True, 0x1008FF11),
        ("volumeup", 0xAF, True, 0x1008FF13),
        ("nexttrack", 0xB0, True, 0x1008FF17),
        ("prevtrack", 0xB1, True, 0x1008FF16),
        ("stop", 0xB2, True, 0x1008FF15),
        ("playpause", 0xB3, True, 0x1008FF14),
        ("browserback", 0xA6, True, 0x1008FF26),
        ("browserrefresh", 0xA8, True, 0x1008FF29),
        ("comma", 0xBC, False, ord(",")),
        ("minus", 0xBD, False, ord("-")),
        ("period", 0xBE, False, ord(".")),
        ("slash", 0xBF, False, ord("/")),
        ("semicolon", 0xBA, False, ord(";")),
        ("equal", 0xBB, False, ord("=")),
        ("grave", 0xC0, False, ord("`")),
        ("bracketleft", 0xDB, False, ord("[")),
        ("backslash", 0xDC, False, ord("\\")),
        ("bracketright", 0xDD, False, ord("]")),
        ("apostrophe", 0xDE, False, ord("'")),
    ],
)
def test_codes_match_the_documented_tables(name: str, vk: int, extended: bool, keysym: int) -> None:
    spec = resolve_key(name)
    assert (spec.name, spec.vk, spec.extended, spec.keysym) == (name, vk, extended, keysym)


@pytest.mark.parametrize(
    ("alias", "canonical"),
    [
        ("Return", "enter"), ("ESC", "escape"), ("Del", "delete"), ("PgUp", "pageup"),
        ("Page Down", "pagedown"), ("page_down", "pagedown"), ("page-down", "pagedown"),
        ("control", "ctrl"), ("Super", "win"), ("meta", "win"), ("cmd", "win"),
        ("left ctrl", "lctrl"), ("RightAlt", "ralt"), ("AltGr", "ralt"), ("lsuper", "lwin"),
        ("apps", "menu"), ("PrtSc", "printscreen"), ("numpad5", "num5"), ("kp_enter", "numenter"),
        ("mute", "volumemute"), ("play", "playpause"), ("caps", "capslock"),
        (",", "comma"), ("-", "minus"), (".", "period"), ("=", "equal"), ("`", "grave"),
        ("?", "question"), ("+", "plus"), (" ", "space"), ("\t", "tab"), ("\n", "enter"),
    ],
)
def test_aliases_are_case_insensitive(alias: str, canonical: str) -> None:
    assert resolve_key(alias).name == canonical
    assert resolve_key(alias.upper()).name == canonical


def test_modifier_flag_marks_exactly_the_modifiers() -> None:
    mods = {n for n in KEY_NAMES if resolve_key(n).modifier}
    assert mods == {"ctrl", "lctrl", "rctrl", "alt", "lalt", "ralt", "shift", "lshift", "rshift", "win", "lwin", "rwin"}


def test_every_key_has_both_codes_and_its_aliases_resolve_back() -> None:
    for name in KEY_NAMES:
        spec = resolve_key(name)
        assert spec.name == name
        assert spec.vk is not None and 0 < spec.vk < 0xFF
        assert spec.keysym is not None and spec.keysym > 0
        for alias in key_aliases(name):
            assert resolve_key(alias) is spec


def test_canonical_names_are_lowercase_and_unique() -> None:
    assert len(set(KEY_NAMES)) == len(KEY_NAMES)
    assert all(n == n.lower() for n in KEY_NAMES)
    assert len(KEY_NAMES) > 150


@pytest.mark.parametrize(
    ("combo", "expected"),
    [
        ("ctrl+shift+t", ["ctrl", "shift", "t"]),
        ("Ctrl + Shift + T", ["ctrl", "shift", "t"]),
        ("CTRL+A", ["ctrl", "a"]),
        ("ctrl-c", ["ctrl", "c"]),
        ("alt-f4", ["alt", "f4"]),
        ("ctrl-l", ["ctrl", "l"]),
        ("ctrl l", ["ctrl", "l"]),
        ("ctrl shift left", ["ctrl", "shift", "left"]),
        ("ctrl--", ["ctrl", "minus"]),
        ("ctrl+-", ["ctrl", "minus"]),
        ("ctrl++", ["ctrl", "shift", "plus"]),
        ("ctrl+plus", ["ctrl", "shift", "plus"]),
        ("shift+plus", ["shift", "plus"]),
        ("?", ["shift", "question"]),
        ("-", ["minus"]),
        ("+", ["shift", "plus"]),
        (" ", ["space"]),
        ("enter", ["enter"]),
        ("page down", ["pagedown"]),
        ("ctrl+ctrl+a", ["ctrl", "a"]),
        ("win+r", ["win", "r"]),
    ],
)
def test_parse_combo(combo: str, expected: list[str]) -> None:
    assert names(combo) == expected


def test_shifted_keys_are_the_us_shift_characters() -> None:
    chars = "!@#$%^&*()_+{}|:\"<>?~"
    assert {resolve_key(c).name for c in chars} == set(SHIFTED_KEYS)
    for c in chars:
        assert resolve_key(c).keysym == ord(c)


@pytest.mark.parametrize("bad", ["ctrl+", "", "   ", "ctrl+foo", "f25", "ctrl+shift+"])
def test_bad_combos_raise_unknown_key(bad: str) -> None:
    with pytest.raises(UnknownKeyError) as info:
        parse_combo(bad)
    assert isinstance(info.value, InputError) and isinstance(info.value, ValueError)


def test_unknown_key_names_close_matches() -> None:
    with pytest.raises(UnknownKeyError) as info:
        resolve_key("contrl")
    assert "ctrl" in info.value.suggestions
    assert "did you mean" in str(info.value)
    with pytest.raises(UnknownKeyError) as info:
        resolve_key("pgae_up")
    assert info.value.suggestions[0] == "pageup"
    with pytest.raises(UnknownKeyError) as info:
        parse_combo("ctrl+volumeupp")
    assert info.value.key == "volumeupp" and "volumeup" in info.value.suggestions


def test_non_string_is_rejected() -> None:
    with pytest.raises(UnknownKeyError):
        resolve_key(5)  # type: ignore[arg-type]
    with pytest.raises(UnknownKeyError):
        parse_combo(None)  # type: ignore[arg-type]
