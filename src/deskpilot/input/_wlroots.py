"""The wlroots input backend (sway, Hyprland, river...): a virtual pointer
(``wlr-virtual-pointer-unstable-v1``) and a virtual keyboard
(``virtual-keyboard-unstable-v1``) on one Wayland connection
(:mod:`deskpilot._wayland._wlr`).

Pointer: positions are physical desktop pixels (the capture backend's); each goes to the
compositor as ``motion_absolute`` within the layout's extent, at the centre of the
physical pixel in logical coordinates, so a scaled output (1.25, 2.0) gets the logical
point that pixel shows. Xwayland loses the first press after the pointer entered an X11
window through a single motion (measured on sway 1.7 / Xwayland 22.1): before a press
that follows a move, the pointer moves one pixel aside and back.

Keyboard: one XKB keymap, the layout's (``XKB_DEFAULT_LAYOUT``, default ``us``) built by
libxkbcommon (:mod:`deskpilot._wayland._xkb`), with the characters a text needs that the
layout lacks bound to spare keycodes (≤ 255, which Xwayland keeps). The keymap is
uploaded again only when a text needs characters it does not carry; the compositor loses
the first key after a keymap change, so a Shift tap goes first. wlroots does not derive
modifier state from a virtual keyboard's keys for its clients: every change of the held
modifiers is sent with ``modifiers``.

What a killed process leaves: the virtual devices are objects of the connection; when the
process dies the compositor destroys them and releases their keys, but a mouse button stays
down for the app (sway 1.7, measured): each backend's watchdog
(:mod:`deskpilot._wayland._watchdog`) releases those through a virtual pointer of its own.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Mapping

from deskpilot._errors import InputError
from deskpilot._wayland import (
    WHEEL_STEP,
    WlrootsClient,
    WlrootsWatchdog,
    WlrOutput,
    XkbKeymap,
    note_pointer,
    now_ms,
    start_watchdog,
    utf32_to_keysym,
)
from deskpilot.geometry import Rect
from deskpilot.input._base import Button
from deskpilot.input._keys import KeySpec

__all__ = ["WlrootsInput"]

#: Linux input event codes of the mouse buttons (BTN_LEFT, BTN_RIGHT, BTN_MIDDLE).
_BUTTONS: dict[str, int] = {"left": 0x110, "right": 0x111, "middle": 0x112}
#: motion_absolute's extent per logical pixel: sub-pixel precision for scaled outputs.
_SUBPIXEL = 256

_CONTROL_KEYSYMS: dict[str, int] = {"\n": 0xFF0D, "\r": 0xFF0D, "\t": 0xFF09, "\b": 0xFF08, "\x1b": 0xFF1B}
_XK_SHIFT_L = 0xFFE1
#: Which real modifier a modifier keysym sets (the XKB modifier map of every common layout).
_MODIFIER_OF: dict[int, str] = {
    0xFFE1: "Shift", 0xFFE2: "Shift",
    0xFFE3: "Control", 0xFFE4: "Control",
    0xFFE9: "Mod1", 0xFFEA: "Mod1", 0xFFE7: "Mod1", 0xFFE8: "Mod1",
    0xFFEB: "Mod4", 0xFFEC: "Mod4",
    0xFE03: "Mod5",
}


def _text_keysym(ch: str) -> int:
    control = _CONTROL_KEYSYMS.get(ch)
    if control is not None:
        return control
    cp = ord(ch)
    if cp < 0x20 or cp == 0x7F or 0x80 <= cp < 0xA0:
        raise InputError(f"cannot type control character {ch!r}", char=ch, code_point=cp)
    if 0xD800 <= cp <= 0xDFFF:
        raise InputError(f"cannot type a lone surrogate {ch!r}", char=ch, code_point=cp)
    return utf32_to_keysym(ch)


class WlrootsInput:
    """Input through wlroots' virtual pointer and keyboard. ``environ``: where to find the
    compositor (default ``os.environ``). ``watchdog``: start the process that releases the
    held mouse buttons if this one is killed (:mod:`deskpilot._wayland._watchdog`)."""

    name = "wlroots"
    _closed = True  # until __init__ has opened it: __del__ of a half-built object does nothing

    def __init__(self, environ: Mapping[str, str] | None = None, *, watchdog: bool = True) -> None:
        env = os.environ if environ is None else environ
        self._lock = threading.RLock()
        self._closed = False
        self._held: dict[int, int] = {}  # keycode -> keysym, keys down now
        self._modifiers = 0
        self._moved = False
        self._position = (0, 0)
        self._client = WlrootsClient(InputError, ("pointer", "keyboard"), environ)
        # Releases the buttons held should this process be killed (sway keeps them down).
        self._watchdog: WlrootsWatchdog | None = start_watchdog(environ) if watchdog else None
        try:
            self._pointer = self._client.create_pointer()
            self._keyboard = self._client.create_keyboard()
            self._keymap = XkbKeymap.build(env.get("XKB_DEFAULT_LAYOUT", "") or "us",
                                           env.get("XKB_DEFAULT_VARIANT", ""))
            #: keysym -> spare keycode of the keymap uploaded now.
            self._extras: dict[int, int] = {}
            self._upload({})
            self._client.conn.roundtrip()
        except BaseException:
            if self._watchdog is not None:
                self._watchdog.stop()
            self._client.close()
            raise
        # The compositor does not tell clients where its pointer is: put it where this
        # backend says it is. The last pixel of the first output: the cursor the compositor
        # draws into its frames is then all but off screen, and the capture backend's
        # digests, which keep it out, never lose sight of more than that corner.
        first = self._client.outputs[0]
        self.move(first.origin[0] + first.physical[0] - 1, first.origin[1] + first.physical[1] - 1)

    # -- helpers -------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise InputError("the wlroots input backend is closed")

    def _drain(self) -> None:
        """Read what the compositor sent (delete_id, output changes) so its queue to us never fills."""
        while self._client.conn.read_events(0):
            pass
        conn = self._client.conn
        if {o.global_name for o in self._client.outputs} != {g.name for g in conn.find_global("wl_output")}:
            self._client.refresh_outputs()  # an output came or went: bind it, forget it

    def _upload(self, extras: dict[int, int]) -> None:
        self._client.upload_keymap(self._keyboard, self._keymap.with_extras({kc: ks for ks, kc in extras.items()}))
        self._extras = dict(extras)
        # The compositor loses the first key after a keymap change (measured with wtype):
        # a Shift tap is that key.
        shift = self._keymap.index.get(_XK_SHIFT_L)
        if shift is not None:
            self._send_key(shift[0], True)
            self._send_key(shift[0], False)
            self._send_modifiers()

    def _send_key(self, keycode: int, down: bool) -> None:
        self._keyboard.request("key", now_ms(), keycode - 8, 1 if down else 0)

    def _send_modifiers(self) -> None:
        masks = self._keymap.masks
        depressed = 0
        for keysym in self._held.values():
            mod = _MODIFIER_OF.get(keysym)
            if mod is not None:
                depressed |= masks.get(mod, 0)
        self._modifiers = depressed
        self._keyboard.request("modifiers", depressed, 0, 0, 0)

    def _keycode(self, keysym: int) -> tuple[int, bool] | None:
        found = self._keymap.index.get(keysym)
        if found is not None:
            return found
        spare = self._extras.get(keysym)
        return (spare, False) if spare is not None else None

    def _output_at(self, x: int, y: int) -> WlrOutput:
        outputs = self._client.outputs
        for output in outputs:
            ox, oy = output.origin
            if ox <= x < ox + output.physical[0] and oy <= y < oy + output.physical[1]:
                return output
        # Outside every output: the nearest one (moves are clamped into the desktop).
        def distance(output: WlrOutput) -> int:
            ox, oy = output.origin
            dx = max(ox - x, 0, x - (ox + output.physical[0] - 1))
            dy = max(oy - y, 0, y - (oy + output.physical[1] - 1))
            return dx * dx + dy * dy
        return min(outputs, key=distance)

    def _motion(self, x: int, y: int) -> None:
        output = self._output_at(x, y)
        ox, oy = output.origin
        x = min(max(x, ox), ox + output.physical[0] - 1)
        y = min(max(y, oy), oy + output.physical[1] - 1)
        scale = output.scale
        # The centre of the physical pixel, in layout coordinates.
        lx = output.logical_position[0] + (x - ox + 0.5) / scale
        ly = output.logical_position[1] + (y - oy + 0.5) / scale
        bx, by, bw, bh = self._client.layout_box()
        self._pointer.request("motion_absolute", now_ms(), max(0, round((lx - bx) * _SUBPIXEL)),
                              max(0, round((ly - by) * _SUBPIXEL)), bw * _SUBPIXEL, bh * _SUBPIXEL)
        self._pointer.request("frame")

    # -- InputBackend --------------------------------------------------------------

    def desktop(self) -> Rect:
        with self._lock:
            self._check_open()
            outputs = self._client.outputs
            left = min(o.origin[0] for o in outputs)
            top = min(o.origin[1] for o in outputs)
            right = max(o.origin[0] + o.physical[0] for o in outputs)
            bottom = max(o.origin[1] + o.physical[1] for o in outputs)
            return Rect(left, top, right - left, bottom - top)

    def move(self, x: int, y: int) -> None:
        with self._lock:
            self._check_open()
            self._drain()
            self._motion(int(x), int(y))
            self._position = (int(x), int(y))
            self._moved = True
            # The capture backend keeps the cursor the compositor draws out of its digests.
            note_pointer(self._client.conn.path, self._position)

    def position(self) -> tuple[int, int]:
        """Where this backend last put the pointer (the compositor does not tell clients)."""
        with self._lock:
            return self._position

    def button(self, button: Button, down: bool) -> None:
        code = _BUTTONS.get(button)
        if code is None:
            raise ValueError(f"unknown mouse button {button!r} (left, right or middle)")
        with self._lock:
            self._check_open()
            self._drain()
            if down and self._moved:
                # Xwayland drops the first press after the pointer entered an X11 window
                # through one motion: one pixel aside and back first.
                x, y = self._position
                aside = x - 1 if x > self.desktop().left else x + 1
                self._motion(aside, y)
                self._motion(x, y)
                self._client.conn.roundtrip()
                self._moved = False
            if down and self._watchdog is not None:
                self._watchdog.pressing(code)  # before the press can go out
            self._pointer.request("button", now_ms(), code, 1 if down else 0)
            self._pointer.request("frame")
            if not down and self._watchdog is not None:
                self._client.conn.flush()
                self._watchdog.released(code)  # once the release went out

    def wheel(self, vertical: int, horizontal: int) -> None:
        with self._lock:
            self._check_open()
            self._drain()
            for axis, count in ((0, vertical), (1, horizontal)):
                step = 1 if count > 0 else -1
                for _ in range(abs(count)):
                    # One notch per frame: clients count discrete steps per frame.
                    self._pointer.request("axis_source", 0)  # wheel
                    self._pointer.request("axis_discrete", now_ms(), axis, WHEEL_STEP * step, step)
                    self._pointer.request("frame")

    def key(self, key: KeySpec, down: bool) -> None:
        if key.keysym is None:
            raise InputError(f"key {key.name!r} has no keysym", key=key.name)
        with self._lock:
            self._check_open()
            self._drain()
            keysym = key.keysym
            found = self._keycode(keysym)
            if found is None:
                if len(self._extras) >= len(self._keymap.spare):
                    raise InputError(f"no spare keycode for key {key.name!r}", key=key.name)
                extras = dict(self._extras)
                extras[keysym] = self._free_spare(set(extras.values()))
                self._upload(extras)
                found = self._keycode(keysym)
                assert found is not None
            keycode = found[0]
            if down:
                self._held[keycode] = keysym
            else:
                self._held.pop(keycode, None)
            self._send_key(keycode, down)
            if keysym in _MODIFIER_OF:
                self._send_modifiers()

    def _free_spare(self, taken: set[int]) -> int:
        return next(kc for kc in self._keymap.spare if kc not in taken)

    def _segment(self, keysyms: list[int], start: int) -> tuple[int, dict[int, int]]:
        """The end of the text segment from ``start`` whose extra characters fit the spare
        keycodes, and the extras binding to type it with (the current one when it suffices)."""
        limit = len(self._keymap.spare)
        wanted: list[int] = []
        end = start
        while end < len(keysyms):
            keysym = keysyms[end]
            if keysym not in self._keymap.index and keysym not in wanted:
                if len(wanted) == limit:
                    break
                wanted.append(keysym)
            end += 1
        if all(k in self._extras for k in wanted):
            return end, self._extras
        # Keep what is bound where it still fits (fewer changes for the next text).
        extras = {k: kc for k, kc in self._extras.items() if k in wanted}
        keep = [(k, kc) for k, kc in self._extras.items() if k not in wanted]
        for keysym in wanted:
            if keysym not in extras:
                extras[keysym] = self._free_spare(set(extras.values()))
        while keep and len(extras) < limit:
            k, kc = keep.pop(0)
            if kc not in extras.values():
                extras[k] = kc
        return end, extras

    def type_text(self, text: str) -> None:
        keysyms = [_text_keysym(ch) for ch in text.replace("\r\n", "\n")]
        with self._lock:
            self._check_open()
            self._drain()
            shift = self._keymap.index.get(_XK_SHIFT_L)
            start = 0
            while start < len(keysyms):
                end, extras = self._segment(keysyms, start)
                if extras is not self._extras:
                    self._upload(extras)
                for keysym in keysyms[start:end]:
                    found = self._keycode(keysym)
                    assert found is not None
                    keycode, shifted = found
                    if shifted:
                        if shift is None:
                            raise InputError("the keymap has no Shift_L key", keysym=hex(keysym))
                        self._held[shift[0]] = _XK_SHIFT_L
                        self._send_key(shift[0], True)
                        self._send_modifiers()
                    self._send_key(keycode, True)
                    self._send_key(keycode, False)
                    if shifted and shift is not None:
                        self._held.pop(shift[0], None)
                        self._send_key(shift[0], False)
                        self._send_modifiers()
                start = end
                # One round trip per segment: the compositor's queue never runs far ahead.
                self._client.conn.roundtrip()

    def sync(self) -> None:
        with self._lock:
            self._check_open()
            self._client.conn.roundtrip()

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            with contextlib.suppress(InputError):
                if self._client.conn.open:
                    for keycode in list(self._held):
                        self._send_key(keycode, False)
                    self._held.clear()
                    self._send_modifiers()
                    self._pointer.destroy()
                    self._keyboard.destroy()
                    self._client.conn.roundtrip()
            self._client.close()
            if self._watchdog is not None:
                self._watchdog.stop()

    def __del__(self) -> None:
        if not self._closed:
            with contextlib.suppress(Exception):
                self.close()
