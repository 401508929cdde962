"""GNOME (Mutter) input through ``org.gnome.Mutter.RemoteDesktop`` on the session bus.

Every event is one D-Bus call on the remote-desktop session that the capture backend of the
same process shares (:mod:`deskpilot._wayland._mutter`); each call returns once Mutter has
injected the event, so the calls themselves keep the order and :meth:`MutterInput.sync` is a
round trip. The pointer moves absolutely on the screencast stream of the monitor that
contains the point, in that stream's frame pixels (equal to physical pixels at every scale,
measured at 1.0, 1.25 and 2.0).

Measured quirks designed around:

- input sent in roughly the first 100 ms of a new session is dropped: the backend sends one
  pointer motion and a Shift tap and waits 150 ms before it is returned;
- ``NotifyKeyboardKeysym`` types only keysyms the current layout has (Mutter adds Shift
  itself): characters of the US layout (printable ASCII, newline, tab) go that way; anything
  else (``€``, ``日本語``, ``😀``) is pasted: Mutter's clipboard API offers the text as the
  selection, ctrl+v pastes it, and the clipboard the user had before is offered again after.
  Terminals paste with ctrl+shift+v, so non-US-layout text does not reach a terminal.
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
import time
from typing import Any

from deskpilot._errors import InputError, PlatformError
from deskpilot._wayland import (
    REMOTE_DESKTOP,
    DBusCallError,
    MutterSession,
    acquire_mutter,
    pointer_position,
    release_mutter,
    variant,
)
from deskpilot.geometry import Rect
from deskpilot.input._base import Button
from deskpilot.input._keys import KeySpec

__all__ = ["LAYOUT_KEYSYMS", "MutterInput", "layout_keysym"]

_BUTTON_CODES: dict[Button, int] = {"left": 0x110, "right": 0x111, "middle": 0x112}  # BTN_* (evdev)
_AXIS_VERTICAL, _AXIS_HORIZONTAL = 0, 1
_XK_SHIFT_L, _XK_CONTROL_L, _XK_V = 0xFFE1, 0xFFE3, 0x76
#: Keysyms of the characters a US layout types (Latin-1 keysyms equal their code point).
LAYOUT_KEYSYMS: dict[str, int] = {chr(c): c for c in range(0x20, 0x7F)} | {
    "\n": 0xFF0D, "\r": 0xFF0D, "\t": 0xFF09}
#: How long a new session drops input (measured ~100 ms), with margin.
_STARTUP_QUIET = 0.15
#: The UTF-8 text types (plain "text/plain" and "STRING" are Latin-1 in GTK and X11).
_TEXT_MIMES = ("text/plain;charset=utf-8", "UTF8_STRING")
#: Seconds the app has to ask for the pasted text, and to read the saved clipboard.
_PASTE_TIMEOUT = 3.0
_SESSION_IFACE = f"{REMOTE_DESKTOP}.Session"
#: Seconds the app gets to read a pasted text before the selection changes again.
_PASTE_SETTLE = 0.1


def _runs(text: str) -> list[tuple[bool, str]]:
    """``text`` cut into (paste?, chunk) runs: layout characters as keys, the rest pasted. A
    short stretch of layout characters (no newline or tab) between two pasted ones is pasted
    with them: one paste instead of three."""
    runs: list[tuple[bool, str]] = []
    for ch in text:
        paste = layout_keysym(ch) is None
        if runs and runs[-1][0] == paste:
            runs[-1] = (paste, runs[-1][1] + ch)
        else:
            runs.append((paste, ch))
    merged: list[tuple[bool, str]] = []
    for i, (paste, chunk) in enumerate(runs):
        between = (0 < i < len(runs) - 1 and not paste and len(chunk) <= 8
                   and "\n" not in chunk and "\t" not in chunk)
        if (paste or between) and merged and merged[-1][0]:
            merged[-1] = (True, merged[-1][1] + chunk)
        else:
            merged.append((paste or between, chunk))
    return merged


def layout_keysym(ch: str) -> int | None:
    """The keysym that types ``ch`` on the layout (US), or None: it is pasted instead."""
    return LAYOUT_KEYSYMS.get(ch)


def _strings(value: Any) -> list[str]:
    """The strings in a D-Bus value, flattened in order (Mutter's "mime-types" arrives as a
    list of lists)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, tuple)):
        return [s for item in value for s in _strings(item)]
    return []


class _Clipboard:
    """Mutter's clipboard API on the session: what we offer, served on request from a thread."""

    def __init__(self, session: MutterSession) -> None:
        self._session = session
        bus, path = session.bus, str(session.rd_session)
        self._transfers = bus.subscribe(interface=_SESSION_IFACE, member="SelectionTransfer", path=path)
        self._owners = bus.subscribe(interface=_SESSION_IFACE, member="SelectionOwnerChanged", path=path)
        self._offer: dict[str, bytes] = {}
        self._armed = False
        self._lock = threading.Lock()
        self.served = threading.Event()
        self.foreign_mimes: list[str] = []  # the mime types of another owner's selection
        session.notify("EnableClipboard", "a{sv}", ({},))
        self._stop = False
        self._thread = threading.Thread(target=self._serve, name="deskpilot-mutter-clipboard", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop:
            try:
                mime, serial = self._transfers.get(timeout=0.2)
            except queue.Empty:
                continue
            with self._lock:
                data = self._offer.get(mime)
                wanted = self._armed  # asked for after ctrl+v: the paste, not a prefetch
            try:
                (fd,) = self._session.bus.call(REMOTE_DESKTOP, str(self._session.rd_session), _SESSION_IFACE,
                                               "SelectionWrite", "u", (serial,))
                raw = fd.to_raw_fd()
                try:
                    os.set_blocking(raw, True)  # a pipe Mutter reads while we write
                    view = memoryview(data or b"")
                    while view:
                        view = view[os.write(raw, view):]
                finally:
                    os.close(raw)
                self._session.notify("SelectionWriteDone", "ub", (serial, data is not None))
            except (PlatformError, OSError):
                pass  # the requester went away: nothing to hand over
            if wanted:
                self.served.set()

    def _track_owner(self) -> None:
        while True:
            try:
                (options,) = self._owners.get_nowait()
            except queue.Empty:
                return
            ours = options.get("session-is-owner", ("b", False))[1]
            self.foreign_mimes = [] if ours else _strings(options.get("mime-types", ("as", []))[1])

    def save(self) -> dict[str, bytes]:
        """The user's current selection as text (empty when there is none or it is ours)."""
        self._track_owner()
        with self._lock:
            if self._offer and not self.foreign_mimes:
                return dict(self._offer)  # still ours: what we offered last (the restored one)
        # Mutter announces the owner only on a change, so an owner from before this session
        # is unknown: ask for text and take "no" (an error) for an empty clipboard.
        fd = None
        wanted = [m for m in _TEXT_MIMES if m in self.foreign_mimes] if self.foreign_mimes else _TEXT_MIMES[:1]
        for mime in wanted:
            try:
                (fd,) = self._session.bus.call(REMOTE_DESKTOP, str(self._session.rd_session), _SESSION_IFACE,
                                               "SelectionRead", "s", (mime,))
                break
            except DBusCallError:
                continue
        if fd is None:
            return {}
        raw = fd.to_raw_fd()
        chunks: list[bytes] = []
        deadline = time.monotonic() + _PASTE_TIMEOUT
        try:
            os.set_blocking(raw, False)
            while time.monotonic() < deadline:
                try:
                    chunk = os.read(raw, 65536)
                except BlockingIOError:
                    time.sleep(0.005)
                    continue
                if not chunk:
                    break
                chunks.append(chunk)
        finally:
            os.close(raw)
        data = b"".join(chunks)
        return {m: data for m in _TEXT_MIMES} if data else {}

    def offer(self, content: dict[str, bytes]) -> None:
        """Become the selection owner with ``content`` (mime type -> bytes)."""
        with self._lock:
            self._offer = dict(content)
            self._armed = False
        self.served.clear()
        self._session.notify("SetSelection", "a{sv}", ({"mime-types": variant("as", list(content))},))

    def arm(self) -> None:
        """From now on a transfer is the paste being waited for."""
        with self._lock:
            self._armed = True

    def close(self) -> None:
        self._stop = True
        self._thread.join(timeout=2)


class MutterInput:
    """Pointer and keyboard of a GNOME Wayland session (Mutter's RemoteDesktop).

    Raises :class:`~deskpilot.PlatformError` when the session bus has no Mutter
    RemoteDesktop, :class:`ImportError` (jeepney) without the ``wayland`` extra.
    """

    name = "mutter"

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._clipboard: _Clipboard | None = None
        self._closed = False
        self._session = self._open()

    def _open(self) -> MutterSession:
        session = acquire_mutter(remote_desktop=True)
        try:
            primary = session.streams[0]
            start = session.pointer or (primary.x + primary.width // 2, primary.y + primary.height // 2)
            # A new session drops its first input: wake it with a motion and a Shift tap.
            stream = session.stream_at(*start)
            session.notify("NotifyPointerMotionAbsolute", "sdd",
                           (stream.path, float(start[0] - stream.x), float(start[1] - stream.y)))
            session.notify("NotifyKeyboardKeysym", "ub", (_XK_SHIFT_L, True))
            session.notify("NotifyKeyboardKeysym", "ub", (_XK_SHIFT_L, False))
            time.sleep(_STARTUP_QUIET)
        except BaseException:
            release_mutter(session)
            raise
        return session

    @property
    def session(self) -> MutterSession:
        return self._session

    def _check_open(self) -> None:
        if self._closed:
            raise InputError("the mutter input backend is closed")
        if self._session.ended:
            # Mutter closed it (the monitors changed): a new session, new streams, new geometry.
            with self._lock:
                if self._session.ended:
                    old, self._session = self._session, self._open()
                    if self._clipboard is not None:
                        self._clipboard.close()
                        self._clipboard = None
                    release_mutter(old)

    def _notify(self, method: str, signature: str, body: tuple[Any, ...]) -> None:
        try:
            self._session.notify(method, signature, body)
        except PlatformError as exc:
            raise InputError(f"Mutter refused {method}: {exc}", call=method) from exc

    def _pointer_motion(self, x: int, y: int) -> None:
        """Move on the stream of the monitor containing (x, y); once more on a new session
        when Mutter closed this one (the monitors changed, and the stream path with them)."""
        for attempt in (1, 2):
            stream = self._session.stream_at(x, y)
            local_x = min(max(x - stream.x, 0), stream.width - 1)
            local_y = min(max(y - stream.y, 0), stream.height - 1)
            try:
                self._notify("NotifyPointerMotionAbsolute", "sdd", (stream.path, float(local_x), float(local_y)))
            except InputError:
                if attempt == 2 or not self._session.ended:
                    raise
                self._check_open()  # opens the new session
                continue
            self._session.pointer = (stream.x + local_x, stream.y + local_y)
            return

    def _keysym(self, keysym: int, down: bool) -> None:
        self._notify("NotifyKeyboardKeysym", "ub", (keysym, down))

    def desktop(self) -> Rect:
        streams = self._session.streams
        left, top = min(s.x for s in streams), min(s.y for s in streams)
        right, bottom = max(s.x + s.width for s in streams), max(s.y + s.height for s in streams)
        return Rect(left, top, right - left, bottom - top)

    def move(self, x: int, y: int) -> None:
        self._check_open()
        with self._lock:
            self._pointer_motion(x, y)

    def position(self) -> tuple[int, int]:
        # The stream's cursor metadata where a capture of this process connected one (the
        # user's moves included), else where this backend last put the pointer.
        return pointer_position(self._session) or (0, 0)

    def button(self, button: Button, down: bool) -> None:
        self._check_open()
        self._notify("NotifyPointerButton", "ib", (_BUTTON_CODES[button], down))

    def wheel(self, vertical: int, horizontal: int) -> None:
        self._check_open()
        # One discrete step per call, as a wheel sends them.
        for axis, steps in ((_AXIS_VERTICAL, vertical), (_AXIS_HORIZONTAL, horizontal)):
            for _ in range(abs(steps)):
                self._notify("NotifyPointerAxisDiscrete", "ui", (axis, 1 if steps > 0 else -1))

    def key(self, key: KeySpec, down: bool) -> None:
        self._check_open()
        if key.keysym is None:
            raise InputError(f"the key {key.name!r} has no keysym on Linux", key=key.name)
        self._keysym(key.keysym, down)

    def type_text(self, text: str) -> None:
        self._check_open()
        text = text.replace("\r\n", "\n")
        with self._lock:
            runs = _runs(text)
            if not any(paste for paste, _ in runs):
                self._keys(text)
                return
            if self._clipboard is None:
                self._clipboard = _Clipboard(self._session)
            saved = self._clipboard.save()
            try:
                for paste, chunk in runs:
                    if paste:
                        self._paste(self._clipboard, chunk)
                    else:
                        self._keys(chunk)
            finally:
                if saved:
                    self._clipboard.offer(saved)

    def _keys(self, text: str) -> None:
        for ch in text:
            keysym = LAYOUT_KEYSYMS[ch]
            self._keysym(keysym, True)
            self._keysym(keysym, False)

    def _paste(self, clipboard: _Clipboard, text: str) -> None:
        """Type ``text`` through the clipboard: offer it, ctrl+v, wait until it was taken."""
        data = text.encode("utf-8")
        clipboard.offer({mime: data for mime in _TEXT_MIMES})
        clipboard.arm()
        self._keysym(_XK_CONTROL_L, True)
        try:
            self._keysym(_XK_V, True)
            self._keysym(_XK_V, False)
        finally:
            self._keysym(_XK_CONTROL_L, False)
        if not clipboard.served.wait(_PASTE_TIMEOUT):
            raise InputError(f"the focused window did not take the pasted text {text!r} (is it a text "
                             "field that pastes with ctrl+v?)", text=text)
        # The app reads the text after Mutter relays it: a new selection now would cancel
        # that read (GTK: "error reading selection buffer: Operation was cancelled").
        time.sleep(_PASTE_SETTLE)

    def sync(self) -> None:
        self._check_open()
        self._session.round_trip()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._clipboard is not None:
            with contextlib.suppress(Exception):
                self._clipboard.close()
        release_mutter(self._session)
