"""Windows input backend: ``SendInput`` with correctly sized INPUT unions (40 bytes on Win64).

Mouse moves are absolute over the whole virtual desktop (``MOUSEEVENTF_MOVE |
MOUSEEVENTF_ABSOLUTE | MOUSEEVENTF_VIRTUALDESK``; ``MOUSEEVENTF_MOVE_NOCOALESCE`` so the
intermediate points of a drag reach the application). The physical pixel ``p`` on an
axis whose virtual desktop spans ``origin .. origin + size - 1`` (``SM_XVIRTUALSCREEN`` /
``SM_CXVIRTUALSCREEN``, and the Y pair) is sent as::

    n = min(65535, (p - origin) * 65536 // size + 1)

Windows maps ``n`` back to ``origin + floor(n * size / 65536)``. For ``size < 65536``,
``n * size / 65536`` lies in ``(p - origin, p - origin + size / 65536]``, strictly inside
pixel ``p``, so the pointer lands exactly on ``p`` -- and also when Windows rounds to
nearest instead of truncating, as long as ``size < 32768``. ``n`` is never 0 (Windows 10
1709 and later ignore an absolute move to 0; Chromium's SendMouseEvent notes the same).
The usual ``p * 65535 / size`` formula lands one pixel short on many pixels.

Buttons honour the "swap primary and secondary buttons" setting (``SM_SWAPBUTTON``):
injected LEFTDOWN is the *physical* left button, so with swapped buttons "left" is sent
as RIGHTDOWN to click with the primary button, as the user would.

Wheel: one event of ``WHEEL_DELTA`` (120) per notch, in one batch (applications that
assume one notch per message scroll correctly). Windows' vertical wheel is positive
away from the user (scroll up), so our ``vertical > 0`` (down) is sent as -120 per notch;
the horizontal wheel is positive to the right, like ours.

Keys: the KeySpec's virtual-key code, its scan code (``MapVirtualKeyW``, so applications
that read the scan code see a real one) and ``KEYEVENTF_EXTENDEDKEY`` when the key is
extended (right ctrl/alt, arrows, the navigation cluster, ...).

Text: ``KEYEVENTF_UNICODE`` events, a down and an up for every UTF-16 code unit, so an
astral character (emoji, U+1D11E) is its surrogate pair. A newline is sent as the Enter
key and a tab as the Tab key (edit controls ignore a bare ``\\n`` character message).
Each batch holds at most ``chunk_units`` code units and never splits a surrogate pair;
batches are ``chunk_pause`` seconds apart so a slow application's message queue (10,000
messages, three per character) cannot overflow on long texts.

Every ``SendInput`` call's return value is checked against the number of events: fewer
means the input was blocked (UIPI: the foreground window belongs to an elevated process;
or the secure desktop / a locked session), reported as
:class:`~deskpilot._errors.InputError`.
"""

from __future__ import annotations

import ctypes
import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from deskpilot._errors import ConfigError, InputError
from deskpilot._win32 import (
    INPUT,
    INPUT_KEYBOARD,
    INPUT_MOUSE,
    KEYEVENTF_EXTENDEDKEY,
    KEYEVENTF_KEYUP,
    KEYEVENTF_UNICODE,
    MAPVK_VK_TO_VSC,
    MOUSEEVENTF_ABSOLUTE,
    MOUSEEVENTF_HWHEEL,
    MOUSEEVENTF_LEFTDOWN,
    MOUSEEVENTF_LEFTUP,
    MOUSEEVENTF_MIDDLEDOWN,
    MOUSEEVENTF_MIDDLEUP,
    MOUSEEVENTF_MOVE,
    MOUSEEVENTF_MOVE_NOCOALESCE,
    MOUSEEVENTF_RIGHTDOWN,
    MOUSEEVENTF_RIGHTUP,
    MOUSEEVENTF_VIRTUALDESK,
    MOUSEEVENTF_WHEEL,
    POINT,
    SM_CXVIRTUALSCREEN,
    SM_CYVIRTUALSCREEN,
    SM_SWAPBUTTON,
    SM_XVIRTUALSCREEN,
    SM_YVIRTUALSCREEN,
    VK_RETURN,
    VK_TAB,
    WHEEL_DELTA,
    Library,
    system_library,
)
from deskpilot._win32.dpi import DpiAwareness, ensure_dpi_awareness
from deskpilot.geometry import Rect
from deskpilot.input._base import Button, InputBackend
from deskpilot.input._keys import KeySpec
from deskpilot.input._win_watchdog import HeldInput, WinWatchdog, hold_win_watchdog

__all__ = ["SendInputBackend", "normalize_absolute"]

_MOVE_FLAGS = (
    MOUSEEVENTF_MOVE | MOUSEEVENTF_ABSOLUTE | MOUSEEVENTF_VIRTUALDESK | MOUSEEVENTF_MOVE_NOCOALESCE
)
_BUTTON_FLAGS: dict[Button, tuple[int, int]] = {  # (down, up)
    "left": (MOUSEEVENTF_LEFTDOWN, MOUSEEVENTF_LEFTUP),
    "right": (MOUSEEVENTF_RIGHTDOWN, MOUSEEVENTF_RIGHTUP),
    "middle": (MOUSEEVENTF_MIDDLEDOWN, MOUSEEVENTF_MIDDLEUP),
}
_SWAPPED: dict[Button, Button] = {"left": "right", "right": "left", "middle": "middle"}
# Characters typed as keys rather than KEYEVENTF_UNICODE characters.
_CHARACTER_KEYS = {"\n": VK_RETURN, "\r": VK_RETURN, "\t": VK_TAB}


def normalize_absolute(pixel: int, origin: int, size: int) -> int:
    """The 0..65535 absolute coordinate that Windows maps back onto ``pixel`` exactly.

    See the module docstring for the formula and why it lands inside the pixel.
    """
    if size <= 0:
        raise InputError(f"virtual desktop size must be positive, got {size}", size=size)
    offset = min(max(pixel - origin, 0), size - 1)
    return min(65535, offset * 65536 // size + 1)


def _mouse_event(flags: int, dx: int = 0, dy: int = 0, data: int = 0) -> INPUT:
    event = INPUT()
    event.type = INPUT_MOUSE
    event.mi.dx, event.mi.dy = dx, dy
    event.mi.mouseData = data & 0xFFFFFFFF  # a signed delta stored in a DWORD
    event.mi.dwFlags = flags
    return event


def _key_event(vk: int, scan: int, flags: int) -> INPUT:
    event = INPUT()
    event.type = INPUT_KEYBOARD
    event.ki.wVk, event.ki.wScan, event.ki.dwFlags = vk, scan, flags
    return event


class SendInputBackend:
    """Input backend over ``SendInput``; see the module docstring for every rule.

    ``user32``/``shcore`` are injectable (recorded fakes in tests); by default the system
    DLLs are used. Unless ``dpi_awareness=False`` the process is made per-monitor-v2 DPI
    aware first (outcome in :attr:`dpi`), so coordinates are physical pixels.
    ``watchdog``: count held keys and buttons for this process's input watchdog
    (:mod:`deskpilot.input._win_watchdog`), which releases them if the process is killed;
    by default only with the system's user32 (a fake's presses are not the desktop's).
    """

    name = "sendinput"

    def __init__(
        self,
        *,
        chunk_units: int = 128,
        chunk_pause: float = 0.005,
        sync_timeout: float = 0.25,
        dpi_awareness: bool = True,
        user32: Library | None = None,
        shcore: Library | None = None,
        watchdog: bool | None = None,
    ) -> None:
        if chunk_units < 2:
            raise ConfigError(
                f"chunk_units must be at least 2 (one surrogate pair), not {chunk_units}"
            )
        if chunk_pause < 0 or sync_timeout < 0:
            raise ConfigError("chunk_pause and sync_timeout must not be negative")
        self._chunk_units = chunk_units
        self._chunk_pause = chunk_pause
        self._sync_timeout = sync_timeout
        self._user32 = user32 if user32 is not None else system_library("user32")
        self.dpi: DpiAwareness | None = None
        if dpi_awareness:
            self.dpi = ensure_dpi_awareness(user32=user32, shcore=shcore)
        self._target: tuple[int, int] | None = None
        self._closed = False
        self._watchdog: WinWatchdog | None = None
        if watchdog if watchdog is not None else user32 is None:
            self._watchdog = hold_win_watchdog()
        self._held: HeldInput | None = self._watchdog.held if self._watchdog is not None else None

    # -- queries --------------------------------------------------------------------------
    def desktop(self) -> Rect:
        """The virtual desktop (all monitors' bounding box) in physical pixels."""
        metric = self._user32.GetSystemMetrics
        left, top = int(metric(SM_XVIRTUALSCREEN)), int(metric(SM_YVIRTUALSCREEN))
        width, height = int(metric(SM_CXVIRTUALSCREEN)), int(metric(SM_CYVIRTUALSCREEN))
        if width <= 0 or height <= 0:
            raise InputError(
                f"GetSystemMetrics reports an empty virtual desktop ({width}x{height})",
                function="GetSystemMetrics",
                desktop=(left, top, width, height),
            )
        return Rect(left, top, width, height)

    def position(self) -> tuple[int, int]:
        """The pointer position (physical pixels, GetCursorPos)."""
        self._check_open()
        point = POINT()
        self._user32.GetCursorPos(point)
        return int(point.x), int(point.y)

    # -- mouse ----------------------------------------------------------------------------
    def move(self, x: int, y: int) -> None:
        """Move to (x, y), clamped into the virtual desktop."""
        self._check_open()
        desk = self.desktop()
        x = min(max(int(x), desk.left), desk.right - 1)
        y = min(max(int(y), desk.top), desk.bottom - 1)
        dx = normalize_absolute(x, desk.left, desk.width)
        dy = normalize_absolute(y, desk.top, desk.height)
        self._send([_mouse_event(_MOVE_FLAGS, dx, dy)])
        self._target = (x, y)

    def button(self, button: Button, down: bool) -> None:
        """Press or release ``button`` (primary/secondary as the user configured them)."""
        self._check_open()
        if button not in _BUTTON_FLAGS:
            raise InputError(
                f"unknown mouse button {button!r} (left, right or middle)", button=button
            )
        logical = button
        if self._user32.GetSystemMetrics(SM_SWAPBUTTON):
            button = _SWAPPED[button]
        down_flag, up_flag = _BUTTON_FLAGS[button]
        held = self._held
        if down and held is not None:
            held.button(logical, True)  # counted before the press: a kill in between is released
        self._send([_mouse_event(down_flag if down else up_flag)])
        if not down and held is not None:
            held.button(logical, False)

    def wheel(self, vertical: int, horizontal: int) -> None:
        """Scroll by notches: ``vertical`` > 0 down, ``horizontal`` > 0 right."""
        self._check_open()
        events = [
            _mouse_event(MOUSEEVENTF_WHEEL, data=-WHEEL_DELTA if vertical > 0 else WHEEL_DELTA)
            for _ in range(abs(int(vertical)))
        ]
        events += [
            _mouse_event(MOUSEEVENTF_HWHEEL, data=WHEEL_DELTA if horizontal > 0 else -WHEEL_DELTA)
            for _ in range(abs(int(horizontal)))
        ]
        if events:
            self._send(events)

    # -- keyboard -------------------------------------------------------------------------
    def key(self, key: KeySpec, down: bool) -> None:
        """Press or release one key by its virtual-key code."""
        self._check_open()
        if key.vk is None:
            raise InputError(
                f"key {key.name!r} does not exist on Windows (no virtual-key code)", key=key.name
            )
        flags = (KEYEVENTF_EXTENDEDKEY if key.extended else 0) | (0 if down else KEYEVENTF_KEYUP)
        held = self._held
        if down and held is not None:
            held.key(key.vk, key.extended, True)  # counted before the press
        self._send([_key_event(key.vk, self._scan_code(key.vk), flags)])
        if not down and held is not None:
            held.key(key.vk, key.extended, False)

    def type_text(self, text: str) -> None:
        """Type ``text`` exactly: KEYEVENTF_UNICODE per UTF-16 unit, Enter/Tab as keys."""
        self._check_open()
        first = True
        for batch in self._batches(text):
            if not first and self._chunk_pause:
                time.sleep(self._chunk_pause)
            self._send(batch)
            first = False

    def _strokes(self, text: str) -> Iterator[tuple[int, list[INPUT]]]:
        """(UTF-16 units, events) per character; a pair's two units stay together."""
        index = 0
        while index < len(text):
            char = text[index]
            index += 1
            vk = _CHARACTER_KEYS.get(char)
            if vk is not None:
                if char == "\r" and text[index : index + 1] == "\n":
                    index += 1  # CRLF is one Enter
                scan = self._scan_code(vk)
                yield 1, [_key_event(vk, scan, 0), _key_event(vk, scan, KEYEVENTF_KEYUP)]
                continue
            encoded = char.encode("utf-16-le", "surrogatepass")
            units = [
                int.from_bytes(encoded[i : i + 2], "little") for i in range(0, len(encoded), 2)
            ]
            events: list[INPUT] = []
            for unit in units:
                events.append(_key_event(0, unit, KEYEVENTF_UNICODE))
                events.append(_key_event(0, unit, KEYEVENTF_UNICODE | KEYEVENTF_KEYUP))
            yield len(units), events

    def _batches(self, text: str) -> Iterator[list[INPUT]]:
        batch: list[INPUT] = []
        units = 0
        for count, events in self._strokes(text):
            if units + count > self._chunk_units and batch:
                yield batch
                batch, units = [], 0
            batch += events
            units += count
        if batch:
            yield batch

    def _scan_code(self, vk: int) -> int:
        # Layout dependent (AZERTY's A is QWERTY's Q), so asked every time; it is cheap.
        return int(self._user32.MapVirtualKeyW(vk, MAPVK_VK_TO_VSC)) & 0xFFFF

    # -- delivery -------------------------------------------------------------------------
    def _send(self, events: Sequence[INPUT]) -> None:
        array = (INPUT * len(events))(*events)
        # The errcheck raises InputError (UIPI) when fewer events were inserted.
        self._user32.SendInput(len(events), array, ctypes.sizeof(INPUT))

    def sync(self) -> None:
        """Wait (up to ``sync_timeout``) until the pointer reached the last move's target.

        SendInput queues events for the system's input thread; this makes a following
        capture see the pointer where it was sent. Keyboard events have no observable
        arrival point, so only the pointer is awaited. A pointer held elsewhere (a
        ClipCursor region, the user moving the mouse) ends the wait at the timeout.
        """
        self._check_open()
        if self._target is None:
            return
        deadline = time.monotonic() + self._sync_timeout
        while self.position() != self._target and time.monotonic() < deadline:
            time.sleep(0.001)

    def _check_open(self) -> None:
        if self._closed:
            raise InputError("the SendInput backend is closed")

    def close(self) -> None:
        """Stop counting for the watchdog (the facade has released what it held; the last
        backend of the process stops the watchdog); later calls raise. Idempotent."""
        self._closed = True
        watchdog, self._watchdog = self._watchdog, None
        self._held = None
        if watchdog is not None:
            watchdog.release()


if TYPE_CHECKING:  # SendInputBackend satisfies the protocol the InputController expects

    def _is_input_backend(backend: SendInputBackend) -> InputBackend:
        return backend
