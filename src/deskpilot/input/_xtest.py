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

So: every spare keycode of the server forms a pool. The text is cut into chunks that
need at most as many unmapped characters as there are spares to be had; each chunk's
characters are bound in one batch (one request per run of adjacent keycodes, one
XSync), then the client gets ``settle`` seconds to take the new mapping in before the
first key event of the chunk (skipped when only empty keycodes were bound and we sent
no key event or remap for ``remap_guard`` seconds: measured into Tk and Chromium, such
a batch is never garbled, and it is the common case, one short text per agent turn);
a keycode is only remapped once its last key event is ``remap_guard`` seconds old
(least recently used first); characters already on a spare keycode are reused
without a remap.

Sharing the display, and surviving a kill. Every controller records on the display
itself (:mod:`deskpilot._x11._record`, a root-window property) which spare keycodes it
borrowed and which keys and buttons it holds. Keycodes are claimed in that record
under a server grab, so two controllers never remap each other's keycodes (and a
keycode borrowed by another controller is never taken for a key of the layout).
Borrowed keycodes are given back ``remap_guard`` seconds after the last typing, not
only on :meth:`XTestBackend.close`. When a controller finds an owner in the record
whose process is gone (SIGKILL), it releases that owner's keys and buttons and
restores its keycodes before going on.

The keyboard as it is. Locked modifiers (CapsLock, NumLock, a Shift lock) and a
locked layout group would change what the keys type, so :meth:`XTestBackend.type_text`
unlocks them for the duration and locks them again afterwards. A layout change
(setxkbmap, a desktop's layout switcher) arrives as an XKB map notification on our
connection; the keymap is read again before the next key goes out.

Clicks. Chromium (and so Electron apps) ignores a click whose X timestamp equals the
previous one's, and events sent back to back share a millisecond: a button press
follows the previous button release by at least ``click_gap`` seconds, so double and
triple clicks register there as they do in Tk and GTK.
"""

from __future__ import annotations

import contextlib
import ctypes
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Iterator

from deskpilot._errors import InputError
from deskpilot._x11 import (
    InputRecord,
    Owner,
    OwnerEntry,
    Watchdog,
    XDisplay,
    XEvent,
    XkbMapNotifyEvent,
    XkbStateRec,
    hold_watchdog,
    library,
    reclaim_dead_owners,
)
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

_XKB_USE_CORE_KBD = 0x100
_XKB_NEW_KEYBOARD_NOTIFY, _XKB_MAP_NOTIFY = 0, 1
_XKB_EVENTS = (1 << _XKB_NEW_KEYBOARD_NOTIFY) | (1 << _XKB_MAP_NOTIFY)
#: How often a controller looks again for a spare keycode while others hold them all.
_SPARE_POLL = 0.02


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


def _runs(keycodes: list[int]) -> list[list[int]]:
    """Sorted keycodes cut into runs of adjacent ones (one remap request per run)."""
    runs: list[list[int]] = []
    for kc in sorted(keycodes):
        if runs and runs[-1][-1] == kc - 1:
            runs[-1].append(kc)
        else:
            runs.append([kc])
    return runs


class XTestBackend:
    """Primitive input events through XTEST on the display named by ``display``
    (default: ``$DISPLAY``).

    ``remap_guard``: seconds a spare keycode's last key event must be old before it
    is remapped or given back. ``settle``: seconds clients get to take a new mapping
    in. ``click_gap``: least seconds between a button release and the next press.
    ``spare_wait``: seconds to wait for another controller to give back spare
    keycodes when it holds them all. ``watchdog``: start this process's input watchdog
    for the display (:mod:`deskpilot.input._watchdog`: keys and buttons held when the
    process is killed are released within moments, not when deskpilot next runs).
    """

    name = "xtest"

    #: Whether ``__init__`` got as far as opening the display (a failed constructor has
    #: nothing for ``__del__`` to close).
    _opened = False

    def __init__(
        self,
        display: str | None = None,
        *,
        remap_guard: float = 0.15,
        settle: float = 0.05,
        click_gap: float = 0.03,
        spare_wait: float = 5.0,
        watchdog: bool = True,
    ) -> None:
        if min(remap_guard, settle, click_gap, spare_wait) < 0:
            raise ValueError(
                "remap_guard, settle, click_gap and spare_wait must be >= 0, got "
                f"{remap_guard!r}, {settle!r}, {click_gap!r}, {spare_wait!r}"
            )
        self.remap_guard = remap_guard
        self.settle = settle
        self.click_gap = click_gap
        self.spare_wait = spare_wait
        self._lock = threading.RLock()
        self._xtst = library("Xtst")
        self._display = XDisplay(InputError, display)
        self._opened = True
        self._timer: threading.Timer | None = None
        self._watchdog: Watchdog | None = None
        try:
            d = self._display.ptr
            ev, err, major, minor = (ctypes.c_int() for _ in range(4))
            if not self._xtst.XTestQueryExtension(
                d, ctypes.byref(ev), ctypes.byref(err), ctypes.byref(major), ctypes.byref(minor)
            ):
                raise InputError("the X server has no XTEST extension", call="XTestQueryExtension")
            lo, hi = ctypes.c_int(), ctypes.c_int()
            self._display.x11.XDisplayKeycodes(d, ctypes.byref(lo), ctypes.byref(hi))
            # Keycode 8 is reserved by XKB in practice; never hand it out.
            self._min_keycode, self._max_keycode = max(lo.value, 9), hi.value
            self._xkb_event = self._select_xkb_events()
            self._owner = Owner.current()
            self._record = InputRecord(self._display, self._owner)
            self._index: dict[int, tuple[int, int]] = {}
            self._shifted: dict[int, int] = {}
            self._shift_keycodes: set[int] = set()
            #: keycodes that are spare or borrowed by some controller: never layout keys.
            self._candidates: set[int] = set()
            #: keycodes this controller borrowed -> keysym each carries; least recently used first.
            self._mine: OrderedDict[int, int] = OrderedDict()
            self._by_keysym: dict[int, int] = {}
            self._last_used: dict[int, float] = {}
            self._held: dict[int, int] = {}  # keycode -> presses not yet released (key())
            self._typing: set[int] = set()  # keycodes type_text may have down right now
            self._buttons: set[int] = set()  # buttons down (button(), wheel())
            self._last_release = 0.0
            self._last_event = 0.0  # monotonic time of our last key event or remap
            self._others_borrow = False  # other controllers held spare keycodes at the last look
            self._reload()
            if not self._candidates:
                raise InputError("the keymap has no spare keycode to type unmapped characters")
            self._watchdog = hold_watchdog(display) if watchdog else None
        except BaseException:
            self._display.close()
            raise

    # -- the shared record ----------------------------------------------------------

    def _entry(self) -> OwnerEntry:
        o = self._owner
        return OwnerEntry(
            o.host,
            o.pid,
            o.start,
            set(self._held) | self._typing,
            set(self._buttons),
            dict(self._mine),
        )

    def _store(self, owners: dict[str, OwnerEntry]) -> None:
        """Put this controller's current state into ``owners`` (inside a transaction)."""
        owners[self._owner.key] = self._entry()

    def _publish(self) -> None:
        """Record what this controller holds now, before a press / after a release
        (one asynchronous request, sent ahead of the event; nothing when unchanged)."""
        self._record.publish(self._entry())

    def _reclaim(self, owners: dict[str, OwnerEntry]) -> None:
        """Release what dead owners held and restore the keycodes they borrowed
        (inside a transaction: nobody else changes the keymap meanwhile)."""
        reclaim_dead_owners(
            self._display,
            owners,
            me=self._owner.key,
            keys=set(self._held) | self._typing,
            buttons=self._buttons,
            borrowed=set(self._mine),
            keycodes=(self._min_keycode, self._max_keycode),
        )

    # -- keymap ---------------------------------------------------------------------

    def _select_xkb_events(self) -> int | None:
        """Ask for XKB keymap notifications on our connection; their event type, or
        None on a server without XKB (the keymap is then read once)."""
        d = self._display
        opcode, event, error, major, minor = (ctypes.c_int() for _ in range(5))
        major.value, minor.value = 1, 0
        try:
            ok = d.x11.XkbQueryExtension(
                d.ptr,
                ctypes.byref(opcode),
                ctypes.byref(event),
                ctypes.byref(error),
                ctypes.byref(major),
                ctypes.byref(minor),
            )
        except AttributeError:
            return None
        if not ok:
            return None
        d.x11.XkbSelectEvents(d.ptr, _XKB_USE_CORE_KBD, _XKB_EVENTS, _XKB_EVENTS)
        return event.value

    def _read_keymap(self, keycodes: Iterable[int] = ()) -> dict[int, list[int]]:
        """The keysyms of every keycode (or of the range spanning ``keycodes``)."""
        d = self._display
        wanted = sorted(keycodes)
        first = max(self._min_keycode, wanted[0]) if wanted else self._min_keycode
        last = min(self._max_keycode, wanted[-1]) if wanted else self._max_keycode
        if last < first:
            return {}
        count = last - first + 1
        per = ctypes.c_int()
        syms = d.x11.XGetKeyboardMapping(d.handle(), first, count, ctypes.byref(per))
        if not syms:
            raise InputError("XGetKeyboardMapping returned nothing", call="XGetKeyboardMapping")
        try:
            n = per.value
            return {first + i: [int(syms[i * n + j]) for j in range(n)] for i in range(count)}
        finally:
            d.x11.XFree(syms)

    def _change(self, keycode: int, keysym: int) -> None:
        pair = (ctypes.c_ulong * 2)(keysym, keysym)
        self._display.x11.XChangeKeyboardMapping(self._display.handle(), keycode, 2, pair, 1)

    def _change_runs(self, mapping: dict[int, int]) -> None:
        """Remap keycodes -> keysyms with one request per run of adjacent keycodes."""
        d = self._display
        for run in _runs(list(mapping)):
            syms = (ctypes.c_ulong * (2 * len(run)))(
                *(s for kc in run for s in (mapping[kc], mapping[kc]))
            )
            d.x11.XChangeKeyboardMapping(d.handle(), run[0], 2, syms, len(run))

    def _reload(self) -> None:
        """Read the record (reclaiming dead owners) and the keymap, and rebuild the index."""
        with self._record.transaction() as owners:
            self._reclaim(owners)
            keymap = self._read_keymap()
            # Our own keycodes still carry what we put there, or they were lost (a new layout).
            for kc, keysym in list(self._mine.items()):
                if keymap.get(kc, [0])[0] != keysym:
                    self._forget(kc)
            others: set[int] = set()
            for key, entry in owners.items():
                if key != self._owner.key:
                    others |= {
                        kc
                        for kc, sym in entry.borrowed.items()
                        if keymap.get(kc, [0])[0] in (sym, 0)
                    }
            spare = {kc for kc, syms in keymap.items() if not any(syms)}
            self._candidates = spare | others | set(self._mine)
            self._index_keymap(keymap)
            self._store(owners)

    def _forget(self, keycode: int) -> None:
        keysym = self._mine.pop(keycode, None)
        if keysym is not None and self._by_keysym.get(keysym) == keycode:
            del self._by_keysym[keysym]

    def _index_keymap(self, keymap: dict[int, list[int]]) -> None:
        """keysym -> (keycode, level) for the plain and shifted levels; plain wins,
        then the lowest keycode. Spare and borrowed keycodes are left out. ``_shifted``
        keeps the shifted-level keycode of keysyms that also sit on a plain level."""
        index: dict[int, tuple[int, int]] = {}
        shifted: dict[int, int] = {}
        for level in (0, 1):
            for kc, syms in keymap.items():
                if kc in self._candidates or level >= len(syms):
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
        """Re-read the server's keymap (done by itself on XKB map notifications)."""
        with self._lock:
            self._reload()

    def _poll_events(self) -> None:
        """Drain our connection's events; re-read the keymap when the layout changed.
        Notifications that only touch spare keycodes (our own remaps and other
        controllers') change nothing we index; those touching keycodes we borrowed are
        checked, so a client outside the record remapping one under us is noticed."""
        if self._xkb_event is None:
            return
        d = self._display
        event = XEvent()
        changed = False
        touched: set[int] = set()
        while d.x11.XPending(d.handle()) > 0:
            d.x11.XNextEvent(d.handle(), ctypes.byref(event))
            if event.type != self._xkb_event:
                continue
            notify = ctypes.cast(ctypes.byref(event), ctypes.POINTER(XkbMapNotifyEvent)).contents
            if notify.xkb_type == _XKB_NEW_KEYBOARD_NOTIFY:
                changed = True
            elif notify.xkb_type == _XKB_MAP_NOTIFY:
                keys = set(range(notify.first_key_sym, notify.first_key_sym + notify.num_key_syms))
                if notify.num_types or not keys <= self._candidates:
                    changed = True
                touched |= keys & self._mine.keys()
        if changed:
            self._reload()
        elif touched:
            current = self._read_keymap(touched)
            for kc in touched:
                if kc in self._mine and current.get(kc, [0])[0] != self._mine[kc]:
                    self._forget(kc)

    # -- spare keycodes ---------------------------------------------------------------

    def _bind(self, keysyms: list[int], keep: set[int]) -> int:
        """Bind a prefix of ``keysyms`` to spare keycodes in one batch; how many were
        bound. Free keycodes (claimed in the record) come first, then our own least
        recently used ones (never one in ``keep`` or held, and only once its guard
        has passed; the wait happens outside the server grab)."""
        d = self._display
        while True:
            now = time.monotonic()
            own = [kc for kc in self._mine if kc not in keep and kc not in self._held]
            ready = [kc for kc in own if self._last_used.get(kc, 0.0) + self.remap_guard <= now]
            bound: dict[int, int] = {}
            evicted = False
            with self._record.transaction() as owners:
                self._reclaim(owners)
                taken = {kc for k, e in owners.items() if k != self._owner.key for kc in e.borrowed}
                self._others_borrow = bool(taken)
                pool = sorted(self._candidates - taken - set(self._mine))
                if pool:  # re-verify: a client outside the record may have mapped one
                    current = self._read_keymap(pool)
                    pool = [kc for kc in pool if not any(current.get(kc, [1]))]
                victims = (pool + ready)[: len(keysyms)]
                evicted = any(kc in self._mine for kc in victims)
                if victims:
                    for kc, keysym in zip(victims, keysyms, strict=False):
                        self._forget(kc)
                        bound[kc] = keysym
                        self._mine[kc] = keysym
                        self._by_keysym[keysym] = kc
                    self._candidates |= set(bound)
                    self._change_runs(bound)
                    self._store(owners)
            if bound:
                d.sync("XChangeKeyboardMapping")
                # The settle is for clients that may still hold an older mapping of
                # these keycodes: when a keycode that carried another character is
                # remapped (the next chunk of a long text), or our last key event or
                # remap is recent. Binding empty keycodes while we have been quiet for
                # remap_guard needs none. Measured into Tk: 15 mixed characters, one
                # batch of empty keycodes per call, 0 of 40 calls garbled without the
                # settle; 80-character texts remapping used keycodes without it: garbled.
                if self.settle and (
                    evicted or time.monotonic() - self._last_event < self.remap_guard
                ):
                    time.sleep(self.settle)
                return len(bound)
            waiting = [self._last_used.get(kc, 0.0) + self.remap_guard - now for kc in own]
            if not waiting:
                return 0
            d.x11.XFlush(d.handle())
            time.sleep(max(0.0, min(waiting)))

    def _spare_for(self, keysym: int) -> int:
        """A spare keycode carrying ``keysym`` (bound now if needed)."""
        deadline = time.monotonic() + self.spare_wait
        while keysym not in self._by_keysym:
            if not self._bind([keysym], set()):
                self._wait_for_spares(deadline, keysym)
        kc = self._by_keysym[keysym]
        self._mine.move_to_end(kc)
        return kc

    def _wait_for_spares(self, deadline: float, keysym: int) -> None:
        """Another controller holds every spare: wait for it to give some back."""
        if not self._others_borrow:  # only our own held keys block them: waiting cannot help
            raise InputError(
                f"cannot type {chr(keysym & 0xFFFFFF)!r}: all {len(self._candidates)} spare keycodes "
                "are held down; release the held keys first",
                keysym=hex(keysym),
                held=len(self._held),
            )
        if time.monotonic() >= deadline:
            raise InputError(
                f"cannot type {chr(keysym & 0xFFFFFF)!r}: no spare keycode came free within "
                f"{self.spare_wait:g} s (other input controllers on this display hold them all)",
                keysym=hex(keysym),
                held=len(self._held),
            )
        time.sleep(_SPARE_POLL)
        self._poll_events()

    def _keycode(self, keysym: int) -> tuple[int, bool]:
        """(keycode, needs shift) for a keysym."""
        found = self._index.get(keysym)
        if found is not None:
            return found[0], found[1] == 1
        return self._spare_for(keysym), False

    def _give_back(self, *, wait: bool) -> None:
        """Restore borrowed keycodes to NoSymbol and drop them from the record; those
        used within ``remap_guard`` wait for it (``wait``) or for a later call."""
        if self._display.closed or not self._mine:
            return
        d = self._display
        free = [kc for kc in self._mine if kc not in self._held]
        if not free:
            return
        last = max(self._last_used.get(kc, 0.0) for kc in free)
        left = last + self.remap_guard - time.monotonic()
        if left > 0:
            if not wait:
                self._schedule_give_back(left)
                return
            d.x11.XFlush(d.handle())
            time.sleep(left)
        with self._record.transaction() as owners:
            self._reclaim(owners)
            current = self._read_keymap(free)
            for kc in free:
                if current.get(kc, [0])[0] == self._mine[kc]:
                    self._change(kc, 0)
                self._forget(kc)
            self._store(owners)
        d.sync("XChangeKeyboardMapping")
        self._last_event = time.monotonic()

    def _schedule_give_back(self, delay: float) -> None:
        self._cancel_give_back()
        timer = threading.Timer(max(delay, 0.0), self._give_back_later)
        timer.daemon = True  # never keeps the interpreter alive; the record covers an exit
        self._timer = timer
        timer.start()

    def _cancel_give_back(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _give_back_later(self) -> None:
        with self._lock, contextlib.suppress(InputError):
            if self._timer is not None and self._timer is threading.current_thread():
                self._timer = None
            self._give_back(wait=False)

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
                d.handle(),
                d.root,
                ctypes.byref(root),
                ctypes.byref(child),
                ctypes.byref(rx),
                ctypes.byref(ry),
                ctypes.byref(wx),
                ctypes.byref(wy),
                ctypes.byref(mask),
            )
            return (rx.value, ry.value)

    def button(self, button: Button, down: bool) -> None:
        number = _BUTTONS.get(button)
        if number is None:
            raise ValueError(f"unknown mouse button {button!r} (left, right or middle)")
        with self._lock:
            d = self._display.handle()
            if down:
                gap = self._last_release + self.click_gap - time.monotonic()
                if gap > 0:  # distinct X timestamps: Chromium drops a click in the same ms
                    time.sleep(gap)
                self._buttons.add(number)
                self._publish()  # recorded before the press: a kill in between is reclaimed
                self._xtst.XTestFakeButtonEvent(d, number, 1, 0)
                self._display.x11.XFlush(d)
            else:
                self._xtst.XTestFakeButtonEvent(d, number, 0, 0)
                self._display.x11.XFlush(d)
                self._last_release = time.monotonic()
                self._buttons.discard(number)
                self._publish()

    def wheel(self, vertical: int, horizontal: int) -> None:
        with self._lock:
            d = self._display.handle()
            numbers = {
                n
                for count, neg, pos in (
                    (vertical, _WHEEL_UP, _WHEEL_DOWN),
                    (horizontal, _WHEEL_LEFT, _WHEEL_RIGHT),
                )
                if count
                for n in ((pos,) if count > 0 else (neg,))
            }
            self._buttons |= numbers
            self._publish()
            try:
                for count, negative, positive in (
                    (vertical, _WHEEL_UP, _WHEEL_DOWN),
                    (horizontal, _WHEEL_LEFT, _WHEEL_RIGHT),
                ):
                    number = positive if count > 0 else negative
                    for _ in range(abs(count)):
                        self._xtst.XTestFakeButtonEvent(d, number, 1, 0)
                        self._xtst.XTestFakeButtonEvent(d, number, 0, 0)
                self._display.x11.XFlush(d)
            finally:
                self._buttons -= numbers
                self._publish()

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
            self._poll_events()
            keycode = self._key_keycode(key.keysym)
            if down:
                self._held[keycode] = self._held.get(keycode, 0) + 1
                self._publish()
            self._key_event(keycode, down)
            if not down and keycode in self._held:
                self._held[keycode] -= 1
                if self._held[keycode] <= 0:
                    del self._held[keycode]
            if keycode in self._mine:
                self._last_used[keycode] = time.monotonic()
            self._display.x11.XFlush(self._display.handle())
            self._last_event = time.monotonic()
            if not down:
                self._publish()
                if keycode in self._mine:
                    self._schedule_give_back(self.remap_guard)

    @contextlib.contextmanager
    def _locks_cleared(self) -> Iterator[None]:
        """Unlock CapsLock, NumLock, a Shift lock and the layout group for the block,
        then lock them again: typed text must not depend on them."""
        d = self._display
        state = XkbStateRec()
        if (
            self._xkb_event is None
            or d.x11.XkbGetState(d.handle(), _XKB_USE_CORE_KBD, ctypes.byref(state)) != 0
        ):
            yield
            return
        locked, group = state.locked_mods, state.locked_group
        if locked:
            d.x11.XkbLockModifiers(d.handle(), _XKB_USE_CORE_KBD, locked, 0)
        if group:
            d.x11.XkbLockGroup(d.handle(), _XKB_USE_CORE_KBD, 0)
        try:
            yield
        finally:
            if not d.closed:
                if locked:
                    d.x11.XkbLockModifiers(d.handle(), _XKB_USE_CORE_KBD, locked, locked)
                if group:
                    d.x11.XkbLockGroup(d.handle(), _XKB_USE_CORE_KBD, group)
                d.x11.XFlush(d.handle())

    def _chunk(self, keysyms: list[int], start: int) -> int:
        """Bind what the text needs from ``start`` on; the end of the chunk that can be
        typed with the keycodes bound now (> start, or InputError after spare_wait)."""
        deadline = time.monotonic() + self.spare_wait
        while True:
            limit = max(1, len(self._candidates))
            wanted: list[int] = []
            for keysym in keysyms[start:]:
                if keysym in self._index or keysym in wanted:
                    continue
                if len(wanted) == limit:
                    break
                wanted.append(keysym)
            missing = [k for k in wanted if k not in self._by_keysym]
            if missing:
                keep = {self._by_keysym[k] for k in wanted if k in self._by_keysym}
                self._bind(missing, keep)
            end = start
            while end < len(keysyms) and (
                keysyms[end] in self._index or keysyms[end] in self._by_keysym
            ):
                end += 1
            if end > start:
                return end
            self._wait_for_spares(deadline, keysyms[start])

    def type_text(self, text: str) -> None:
        text = text.replace("\r\n", "\n")
        keysyms = [char_keysym(ch) for ch in text]
        with self._lock:
            self._cancel_give_back()
            self._poll_events()
            d = self._display
            shift = self._index.get(_XK_SHIFT_L, (0, 0))[0]
            with self._locks_cleared():
                # Shift goes up and down while typing: recorded as held for the call.
                self._typing = {shift} if shift else set()
                self._publish()
                try:
                    start = 0
                    while start < len(keysyms):
                        end = self._chunk(keysyms, start)
                        for keysym in keysyms[start:end]:
                            keycode, shifted = self._keycode(keysym)
                            if shifted and not shift:
                                raise InputError(
                                    "the keymap has no Shift_L key", keysym=hex(keysym)
                                )
                            if shifted:
                                self._key_event(shift, True)
                            try:
                                self._key_event(keycode, True)
                            finally:
                                self._key_event(keycode, False)
                                if shifted:
                                    self._key_event(shift, False)
                            if keycode in self._mine:
                                self._last_used[keycode] = time.monotonic()
                        d.x11.XFlush(d.handle())
                        self._last_event = time.monotonic()
                        start = end
                        self._poll_events()
                    d.sync("XTestFakeKeyEvent")
                finally:
                    self._typing = set()
                    if not d.closed:
                        self._publish()
            if self._mine:
                self._schedule_give_back(self.remap_guard)

    def sync(self) -> None:
        with self._lock:
            self._display.sync("XSync")

    def close(self) -> None:
        with self._lock:
            if self._display.closed:
                return
            self._cancel_give_back()
            try:
                for keycode in list(self._held):
                    self._key_event(keycode, False)
                self._held.clear()
                for number in sorted(self._buttons):
                    self._xtst.XTestFakeButtonEvent(self._display.handle(), number, 0, 0)
                self._buttons.clear()
                self._give_back(wait=True)
                with self._record.transaction() as owners:
                    self._reclaim(owners)
                    owners.pop(self._owner.key, None)
                self._display.sync("close")
            finally:
                self._display.close()
                watchdog, self._watchdog = self._watchdog, None
                if watchdog is not None:
                    watchdog.release()  # the last controller of the process stops it

    def __del__(self) -> None:
        if self._opened and not self._display.closed:
            with contextlib.suppress(Exception):
                self.close()
