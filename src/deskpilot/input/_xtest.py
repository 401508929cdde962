"""X11 input through the XTEST extension (ctypes on libX11 + libXtst).

Keys are found through the server's keymap (levels 0 and 1: plain and shifted).
Characters and keys the keymap does not carry are typed through a *spare* keycode
(one with no keysym at all) that is temporarily given the character's keysym.

Why a pool, a batch, a settle and a guard. A client does not re-read the keymap when
it is told (MappingNotify / XkbMapNotify) that it changed: Xlib notes the change and
fetches it later, and notes that arrive while such a fetch is in flight can be lost.
If key events follow a remap too closely, or a keycode is remapped again before the
client has looked up the previous key event, the client translates a key with a stale
mapping: that is how xdotool (one scratch keycode, 5 ms apart) drops, doubles and
swaps non-ASCII characters. Measured here against Tk on Xvfb (60 random characters
from a 70-character non-ASCII alphabet per run): one remap per character with no
waits garbled 5 runs of 5; batched remaps without a settle 2 of 8; batched with a
5-50 ms settle 0 of 36.

So: every spare keycode of the server (one with no keysym at all) forms a pool.
The text is cut into chunks that need at most as many unmapped characters as there
are spares; each chunk's characters are mapped in one batch (one XSync), then the
client gets ``settle`` seconds to take the new mapping in before the first key event
of the chunk; a keycode is only remapped once its last key event is ``remap_guard``
seconds old (least recently used first); characters already on a spare keycode are
reused without a remap. Mappings stay in place as a cache for later calls and are
restored to NoSymbol by :meth:`XTestBackend.close`, after the same guard.
"""

from __future__ import annotations

import contextlib
import ctypes
import threading
import time
from collections import OrderedDict

from deskpilot._errors import InputError
from deskpilot._x11 import XDisplay, library
from deskpilot.geometry import Rect
from deskpilot.input._base import Button
from deskpilot.input._keys import KeySpec

__all__ = ["XTestBackend", "char_keysym"]

_BUTTONS: dict[str, int] = {"left": 1, "middle": 2, "right": 3}
# Wheel notches are clicks of buttons 4 (up), 5 (down), 6 (left), 7 (right).
_WHEEL_UP, _WHEEL_DOWN, _WHEEL_LEFT, _WHEEL_RIGHT = 4, 5, 6, 7

_XK_SHIFT_L, _XK_SHIFT_R = 0xFFE1, 0xFFE2
_CONTROL_KEYSYMS: dict[str, int] = {
    "\n": 0xFF0D,  # Return
    "\r": 0xFF0D,
    "\t": 0xFF09,  # Tab
    "\b": 0xFF08,  # BackSpace
    "\x1b": 0xFF1B,  # Escape
}


def char_keysym(ch: str) -> int:
    """The keysym that types ``ch``: Latin-1 keysyms equal their code point, every
    other character has the Unicode keysym ``0x01000000 | code point``."""
    control = _CONTROL_KEYSYMS.get(ch)
    if control is not None:
        return control
    cp = ord(ch)
    if cp < 0x20 or cp == 0x7F or 0x80 <= cp < 0xA0:
        raise InputError(f"cannot type control character {ch!r}", char=ch, code_point=cp)
    if 0xD800 <= cp <= 0xDFFF:
        raise InputError(f"cannot type a lone surrogate {ch!r}", char=ch, code_point=cp)
    if cp <= 0xFF:
        return cp
    return 0x01000000 | cp


class XTestBackend:
    """Primitive input events through XTEST on the display named by ``display``
    (default: ``$DISPLAY``)."""

    name = "xtest"

    def __init__(self, display: str | None = None, *, remap_guard: float = 0.15, settle: float = 0.05) -> None:
        if remap_guard < 0 or settle < 0:
            raise ValueError(f"remap_guard and settle must be >= 0, got {remap_guard!r}, {settle!r}")
        self.remap_guard = remap_guard
        self.settle = settle
        self._lock = threading.RLock()
        self._xtst = library("Xtst")
        self._display = XDisplay(InputError, display)
        try:
            d = self._display.ptr
            ev, err, major, minor = (ctypes.c_int() for _ in range(4))
            if not self._xtst.XTestQueryExtension(d, ctypes.byref(ev), ctypes.byref(err), ctypes.byref(major), ctypes.byref(minor)):
                raise InputError("the X server has no XTEST extension", call="XTestQueryExtension")
            lo, hi = ctypes.c_int(), ctypes.c_int()
            self._display.x11.XDisplayKeycodes(d, ctypes.byref(lo), ctypes.byref(hi))
            # Keycode 8 is reserved by XKB in practice; never hand it out.
            self._min_keycode, self._max_keycode = max(lo.value, 9), hi.value
            self._index: dict[int, tuple[int, int]] = {}
            self._shifted: dict[int, int] = {}
            self._shift_keycodes: set[int] = set()
            keymap = self._read_keymap()
            spare = [kc for kc, syms in keymap.items() if not any(syms)]
            if not spare:
                raise InputError("the keymap has no spare keycode to type unmapped characters")
            #: spare keycode -> keysym it carries now (0: none); least recently used first.
            self._spare: OrderedDict[int, int] = OrderedDict((kc, 0) for kc in spare)
            self._spare_by_keysym: dict[int, int] = {}
            self._last_used: dict[int, float] = {}
            self._held: dict[int, int] = {}  # keycode -> presses not yet released (key())
            self._index_keymap(keymap)
        except BaseException:
            self._display.close()
            raise

    # -- keymap ---------------------------------------------------------------------

    def _read_keymap(self) -> dict[int, list[int]]:
        d = self._display
        count = self._max_keycode - self._min_keycode + 1
        per = ctypes.c_int()
        syms = d.x11.XGetKeyboardMapping(d.handle(), self._min_keycode, count, ctypes.byref(per))
        if not syms:
            raise InputError("XGetKeyboardMapping returned nothing", call="XGetKeyboardMapping")
        try:
            n = per.value
            return {
                self._min_keycode + i: [int(syms[i * n + j]) for j in range(n)] for i in range(count)
            }
        finally:
            d.x11.XFree(syms)

    def _index_keymap(self, keymap: dict[int, list[int]]) -> None:
        """keysym -> (keycode, level) for the plain and shifted levels; plain wins,
        then the lowest keycode. Our own spare keycodes are left out. ``_shifted``
        keeps the shifted-level keycode of keysyms that also sit on a plain level."""
        index: dict[int, tuple[int, int]] = {}
        shifted: dict[int, int] = {}
        for level in (0, 1):
            for kc, syms in keymap.items():
                if kc in self._spare or level >= len(syms):
                    continue
                sym = syms[level]
                if sym and sym not in index:
                    index[sym] = (kc, level)
                elif sym and level == 1 and sym not in shifted:
                    shifted[sym] = kc
        self._index = index
        self._shifted = shifted
        self._shift_keycodes = {
            kc for kc, syms in keymap.items() if syms and syms[0] in (_XK_SHIFT_L, _XK_SHIFT_R)
        }

    def refresh_keymap(self) -> None:
        """Re-read the server's keymap (after a layout change, e.g. setxkbmap)."""
        with self._lock:
            self._index_keymap(self._read_keymap())

    def _spare_for(self, keysym: int) -> int:
        """A spare keycode carrying ``keysym`` (mapped now if needed)."""
        kc = self._spare_by_keysym.get(keysym)
        if kc is None:
            self._map_spares([keysym], set())
            kc = self._spare_by_keysym[keysym]
        self._spare.move_to_end(kc)
        return kc

    def _keycode(self, keysym: int) -> tuple[int, bool]:
        """(keycode, needs shift) for a keysym."""
        found = self._index.get(keysym)
        if found is not None:
            return found[0], found[1] == 1
        return self._spare_for(keysym), False

    def _restore_spares(self) -> None:
        used = [kc for kc, sym in self._spare.items() if sym]
        if not used:
            return
        d = self._display
        d.x11.XFlush(d.handle())
        last = max(self._last_used.get(kc, 0.0) for kc in used)
        wait = last + self.remap_guard - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        empty = (ctypes.c_ulong * 2)(0, 0)
        for kc in used:
            d.x11.XChangeKeyboardMapping(d.handle(), kc, 2, empty, 1)
            self._spare[kc] = 0
        self._spare_by_keysym.clear()
        d.sync("XChangeKeyboardMapping")

    # -- events ---------------------------------------------------------------------

    def _key_event(self, keycode: int, down: bool) -> None:
        self._xtst.XTestFakeKeyEvent(self._display.handle(), keycode, 1 if down else 0, 0)

    def desktop(self) -> Rect:
        return Rect(0, 0, self._display.width, self._display.height)

    def move(self, x: int, y: int) -> None:
        with self._lock:
            d = self._display.handle()
            self._xtst.XTestFakeMotionEvent(d, -1, int(x), int(y), 0)
            self._display.x11.XFlush(d)

    def position(self) -> tuple[int, int]:
        with self._lock:
            d = self._display
            root, child = ctypes.c_ulong(), ctypes.c_ulong()
            rx, ry, wx, wy = (ctypes.c_int() for _ in range(4))
            mask = ctypes.c_uint()
            d.x11.XQueryPointer(
                d.handle(), d.root, ctypes.byref(root), ctypes.byref(child), ctypes.byref(rx),
                ctypes.byref(ry), ctypes.byref(wx), ctypes.byref(wy), ctypes.byref(mask),
            )
            return (rx.value, ry.value)

    def button(self, button: Button, down: bool) -> None:
        number = _BUTTONS.get(button)
        if number is None:
            raise ValueError(f"unknown mouse button {button!r} (left, right or middle)")
        with self._lock:
            d = self._display.handle()
            self._xtst.XTestFakeButtonEvent(d, number, 1 if down else 0, 0)
            self._display.x11.XFlush(d)

    def wheel(self, vertical: int, horizontal: int) -> None:
        with self._lock:
            d = self._display.handle()
            for count, negative, positive in (
                (vertical, _WHEEL_UP, _WHEEL_DOWN),
                (horizontal, _WHEEL_LEFT, _WHEEL_RIGHT),
            ):
                number = positive if count > 0 else negative
                for _ in range(abs(count)):
                    self._xtst.XTestFakeButtonEvent(d, number, 1, 0)
                    self._xtst.XTestFakeButtonEvent(d, number, 0, 0)
            self._display.x11.XFlush(d)

    def _key_keycode(self, keysym: int) -> int:
        """The keycode to press for a key: with shift held, the key whose shifted level
        carries the keysym ("<" is shift+comma, not the plain ISO key beside shift)."""
        if self._shift_keycodes & self._held.keys():
            found = self._index.get(keysym)
            if found is not None and found[1] == 1:
                return found[0]
            if keysym in self._shifted:
                return self._shifted[keysym]
        return self._keycode(keysym)[0]

    def key(self, key: KeySpec, down: bool) -> None:
        if key.keysym is None:
            raise InputError(f"key {key.name!r} does not exist on X11", key=key.name)
        with self._lock:
            keycode = self._key_keycode(key.keysym)
            if down:
                self._held[keycode] = self._held.get(keycode, 0) + 1
            self._key_event(keycode, down)
            if not down and keycode in self._held:
                self._held[keycode] -= 1
                if self._held[keycode] <= 0:
                    del self._held[keycode]
            if keycode in self._spare:
                self._last_used[keycode] = time.monotonic()
            self._display.x11.XFlush(self._display.handle())

    def _plan(self, keysyms: list[int], start: int) -> tuple[int, list[int]]:
        """The end of the next chunk of ``keysyms`` from ``start`` and the keysyms it
        needs on spare keycodes that are not mapped yet (at most the free spares).
        ``end == start`` when the next character needs a spare and none is free."""
        # Spares this chunk cannot remap: those held down by key() (other held keys,
        # ctrl for one, sit on keymap keycodes and take nothing from the pool) and
        # those carrying a keysym the chunk already relies on.
        busy = {kc for kc in self._held if kc in self._spare}
        new: list[int] = []
        end = start
        while end < len(keysyms):
            keysym = keysyms[end]
            if keysym not in self._index and keysym not in new:
                kc = self._spare_by_keysym.get(keysym)
                if kc is not None:
                    if kc not in busy and len(busy) + len(new) >= len(self._spare):
                        break
                    busy.add(kc)
                elif len(busy) + len(new) >= len(self._spare):
                    break
                else:
                    new.append(keysym)
            end += 1
        return end, new

    def _map_spares(self, keysyms: list[int], keep: set[int]) -> None:
        """Give each keysym a spare keycode (least recently used first, never one in
        ``keep`` or held), in one batch: one round trip, one guard wait at most."""
        d = self._display
        victims = [kc for kc in self._spare if kc not in keep and kc not in self._held][: len(keysyms)]
        if len(victims) < len(keysyms):
            raise InputError(f"all {len(self._spare)} spare keycodes are in use", needed=len(keysyms))
        wait = max(self._last_used.get(kc, 0.0) for kc in victims) + self.remap_guard - time.monotonic()
        if wait > 0:
            d.x11.XFlush(d.handle())
            time.sleep(wait)
        for kc, keysym in zip(victims, keysyms, strict=True):
            pair = (ctypes.c_ulong * 2)(keysym, keysym)
            d.x11.XChangeKeyboardMapping(d.handle(), kc, 2, pair, 1)
            old = self._spare[kc]
            if old:
                del self._spare_by_keysym[old]
            self._spare[kc] = keysym
            self._spare_by_keysym[keysym] = kc
            self._spare.move_to_end(kc)
        d.sync("XChangeKeyboardMapping")
        if self.settle:
            time.sleep(self.settle)

    def type_text(self, text: str) -> None:
        text = text.replace("\r\n", "\n")
        keysyms = [char_keysym(ch) for ch in text]
        with self._lock:
            d = self._display
            shift = self._index.get(_XK_SHIFT_L, (0, 0))[0]
            start = 0
            while start < len(keysyms):
                end, new = self._plan(keysyms, start)
                if end == start:
                    raise InputError(
                        f"cannot type {text[start]!r}: all {len(self._spare)} spare keycodes "
                        "are held down; release the held keys first",
                        keysym=hex(keysyms[start]),
                        held=len(self._held),
                    )
                if new:
                    keep = {self._spare_by_keysym[k] for k in keysyms[start:end] if k in self._spare_by_keysym}
                    self._map_spares(new, keep)
                for keysym in keysyms[start:end]:
                    keycode, shifted = self._keycode(keysym)
                    if shifted and not shift:
                        raise InputError("the keymap has no Shift_L key", keysym=hex(keysym))
                    try:
                        if shifted:
                            self._key_event(shift, True)
                        try:
                            self._key_event(keycode, True)
                        finally:
                            self._key_event(keycode, False)
                    finally:
                        if shifted:
                            self._key_event(shift, False)
                        d.x11.XFlush(d.handle())
                        if keycode in self._spare:
                            self._last_used[keycode] = time.monotonic()
                start = end
            d.sync("XTestFakeKeyEvent")

    def sync(self) -> None:
        with self._lock:
            self._display.sync("XSync")

    def close(self) -> None:
        with self._lock:
            if self._display.closed:
                return
            try:
                for keycode in list(self._held):
                    self._key_event(keycode, False)
                self._held.clear()
                self._restore_spares()
            finally:
                self._display.close()

    def __del__(self) -> None:
        display = getattr(self, "_display", None)
        if display is not None and not display.closed:
            with contextlib.suppress(Exception):
                self.close()
