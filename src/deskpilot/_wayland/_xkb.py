"""XKB keymaps for a Wayland virtual keyboard, built with libxkbcommon (ctypes).

A ``zwp_virtual_keyboard_v1`` sends evdev keycodes and must upload the keymap that gives
them meaning. deskpilot builds the layout's keymap with libxkbcommon
(``xkb_keymap_new_from_names``: the same xkeyboard-config data the compositor uses, so
the keys mean what they mean on that desktop) and reads its keycode -> keysym table for
the plain and shifted levels. Characters the layout lacks go on *spare* keycodes: key
names the keycodes section declares (≤ 255: Xwayland clips higher ones) that no symbols
bind. The keymap text (``xkb_keymap_get_as_string``) gets one ``key <NAME> { [ sym ] };``
line per spare binding, so one upload carries the layout and every extra character of a
text. Hand-writing a keymap would duplicate a layout the system already describes.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import re
from dataclasses import dataclass, field

from deskpilot._errors import InputError

__all__ = ["XkbKeymap", "utf32_to_keysym"]

_lib: ctypes.CDLL | None = None


class _RuleNames(ctypes.Structure):
    _fields_ = [("rules", ctypes.c_char_p), ("model", ctypes.c_char_p), ("layout", ctypes.c_char_p),
                ("variant", ctypes.c_char_p), ("options", ctypes.c_char_p)]


def _xkb() -> ctypes.CDLL:
    global _lib
    if _lib is None:
        name = ctypes.util.find_library("xkbcommon") or "libxkbcommon.so.0"
        try:
            lib = ctypes.CDLL(name)
        except OSError as exc:
            raise InputError(f"libxkbcommon is missing ({exc}): install libxkbcommon0", library=name) from exc
        lib.xkb_context_new.restype = ctypes.c_void_p
        lib.xkb_context_new.argtypes = [ctypes.c_int]
        lib.xkb_context_unref.argtypes = [ctypes.c_void_p]
        lib.xkb_keymap_new_from_names.restype = ctypes.c_void_p
        lib.xkb_keymap_new_from_names.argtypes = [ctypes.c_void_p, ctypes.POINTER(_RuleNames), ctypes.c_int]
        lib.xkb_keymap_unref.argtypes = [ctypes.c_void_p]
        lib.xkb_keymap_get_as_string.restype = ctypes.c_void_p  # char*, freed with free()
        lib.xkb_keymap_get_as_string.argtypes = [ctypes.c_void_p, ctypes.c_int]
        lib.xkb_keymap_min_keycode.restype = ctypes.c_uint32
        lib.xkb_keymap_min_keycode.argtypes = [ctypes.c_void_p]
        lib.xkb_keymap_max_keycode.restype = ctypes.c_uint32
        lib.xkb_keymap_max_keycode.argtypes = [ctypes.c_void_p]
        lib.xkb_keymap_key_get_syms_by_level.restype = ctypes.c_int
        lib.xkb_keymap_key_get_syms_by_level.argtypes = [
            ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint32, ctypes.c_uint32,
            ctypes.POINTER(ctypes.POINTER(ctypes.c_uint32))]
        lib.xkb_keymap_mod_get_index.restype = ctypes.c_uint32
        lib.xkb_keymap_mod_get_index.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
        lib.xkb_utf32_to_keysym.restype = ctypes.c_uint32
        lib.xkb_utf32_to_keysym.argtypes = [ctypes.c_uint32]
        _lib = lib
    return _lib


def utf32_to_keysym(ch: str) -> int:
    """The canonical keysym of one character (``0x20ac`` for €; ``0x1000000 | cp`` where
    no legacy keysym exists)."""
    return int(_xkb().xkb_utf32_to_keysym(ord(ch)))


_LIBC = ctypes.CDLL(None)
_LIBC.free.argtypes = [ctypes.c_void_p]

#: ``<NAME> = 123;`` in the keycodes section; ``key <NAME> {`` in the symbols section.
_KEYCODE_LINE = re.compile(r"^\s*<([^>]+)>\s*=\s*(\d+)\s*;", re.MULTILINE)
_SYMBOLS_KEY = re.compile(r"^\s*key\s+<([^>]+)>", re.MULTILINE)
_MODIFIERS = ("Shift", "Lock", "Control", "Mod1", "Mod2", "Mod3", "Mod4", "Mod5")


@dataclass
class XkbKeymap:
    """The layout's keymap text, its keysym -> (keycode, shifted) index, its spare keycodes
    and the real modifiers' masks. Keycodes are XKB keycodes (evdev + 8)."""

    text: str
    index: dict[int, tuple[int, bool]]
    spare: list[int]
    names: dict[int, str]
    masks: dict[str, int] = field(default_factory=dict)

    @classmethod
    def build(cls, layout: str = "us", variant: str = "", model: str = "pc105") -> XkbKeymap:
        lib = _xkb()
        context = lib.xkb_context_new(0)
        if not context:
            raise InputError("xkb_context_new failed")
        try:
            names = _RuleNames(b"evdev", model.encode(), layout.encode(), variant.encode(), None)
            keymap = lib.xkb_keymap_new_from_names(context, ctypes.byref(names), 0)
            if not keymap:
                raise InputError(f"libxkbcommon cannot build the keymap of layout {layout!r} "
                                 "(is xkb-data installed?)", layout=layout)
            try:
                raw = lib.xkb_keymap_get_as_string(keymap, 1)
                try:
                    text = ctypes.string_at(raw).decode()
                finally:
                    _LIBC.free(raw)
                index: dict[int, tuple[int, bool]] = {}
                low, high = lib.xkb_keymap_min_keycode(keymap), lib.xkb_keymap_max_keycode(keymap)
                syms = ctypes.POINTER(ctypes.c_uint32)()
                # Plain level first: a keysym on both levels is typed without shift.
                # Keycodes above 255 never reach X11 clients (Xwayland clips them): such
                # keysyms (EuroSign on an inet key) go on a spare keycode like any other.
                for level, shifted in ((0, False), (1, True)):
                    for keycode in range(low, min(high, 255) + 1):
                        count = lib.xkb_keymap_key_get_syms_by_level(keymap, keycode, 0, level, ctypes.byref(syms))
                        if count == 1 and syms[0] not in index:
                            index[syms[0]] = (keycode, shifted)
                masks = {}
                for mod in _MODIFIERS:
                    bit = lib.xkb_keymap_mod_get_index(keymap, mod.encode())
                    if bit < 32:
                        masks[mod] = 1 << bit
            finally:
                lib.xkb_keymap_unref(keymap)
        finally:
            lib.xkb_context_unref(context)
        sections = _sections(text)
        declared = {int(code): name for name, code in _KEYCODE_LINE.findall(sections["xkb_keycodes"])}
        bound = set(_SYMBOLS_KEY.findall(sections["xkb_symbols"]))
        # Highest first: far from the keys a layout or a compositor binding would use.
        spare = sorted((code for code, name in declared.items() if code <= 255 and name not in bound),
                       reverse=True)
        return cls(text, index, spare, declared, masks)

    def with_extras(self, extras: dict[int, int]) -> str:
        """The keymap text with spare ``keycode -> keysym`` bindings added."""
        if not extras:
            return self.text
        lines = "".join(f"\tkey <{self.names[code]}> {{ [ 0x{sym:x} ] }};\n" for code, sym in sorted(extras.items()))
        start = self.text.index("xkb_symbols")
        # The symbols section ends with the first "};" at the start of a line after it.
        end = self.text.index("\n};", start) + 1
        return self.text[:end] + lines + self.text[end:]


def _sections(text: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for name in ("xkb_keycodes", "xkb_symbols"):
        start = text.index(name)
        end = text.index("\n};", start)
        found[name] = text[start:end]
    return found
