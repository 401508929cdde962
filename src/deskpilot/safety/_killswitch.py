"""The kill switch and the run budget: what always stops a run.

A :class:`KillSwitch` runs one watcher thread that trips on

- the **fail-safe corner**: the user moves the pointer into a corner of the desktop
  (within ``corner_margin`` pixels). Every position the pointer passes is seen as an
  event (X11: the RECORD extension; Windows: a low-level mouse hook), so a corner
  touched between two of the agent's own moves counts; where events are unavailable the
  pointer is sampled once per ``poll_interval`` (GNOME on Wayland: from the Mutter
  streams' cursor metadata, :class:`MutterWatchBackend`, which has no hotkey). Positions the agent itself moves to are
  announced with :meth:`KillSwitch.note_pointer` before it moves, and a position there
  never trips it (the agent may click in a corner); once the pointer has been seen
  there, any other position is the user's again. A pointer that is already in a corner
  when the watcher starts must leave it first;
- a **global hotkey** (default ``ctrl+alt+q``): X11 ``XGrabKey`` on the root window over
  the watcher's own connection, with the CapsLock/NumLock variants grabbed too;
  Windows ``RegisterHotKey`` serviced by the watcher thread's message queue;
- the **wall-clock budget** of a :class:`RunBudget` (so a run stuck waiting for the
  model still stops on time);
- a **programmatic** :meth:`KillSwitch.trip` (signal handlers, the panel, tests).

Tripping is sticky and happens once: it sets a thread-safe flag, wakes every
:meth:`KillSwitch.wait` coroutine (on whatever event loop awaits it) and calls the
``on_trip`` callbacks (from the tripping thread). The loop then stops within the
current turn, releases held keys and buttons and writes its record.

Without a desktop (no DISPLAY, a dry-run backend) the corner and hotkey sources are
reported as unavailable in :attr:`KillSwitch.status` and the rest keeps working.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import select
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from deskpilot import _win32 as win32
from deskpilot._errors import DeskpilotError, PlatformError, RunInterrupted, UnknownKeyError
from deskpilot.geometry import Rect
from deskpilot.input import KeySpec, parse_combo

if TYPE_CHECKING:
    from deskpilot._win32 import Library, MouseHook

__all__ = [
    "DEFAULT_HOTKEY",
    "BudgetExhausted",
    "KillSwitch",
    "MutterWatchBackend",
    "RunBudget",
    "Trip",
    "WatchBackend",
    "Win32WatchBackend",
    "X11WatchBackend",
    "hotkey_parts",
]

log = logging.getLogger("deskpilot.safety")

DEFAULT_HOTKEY = "ctrl+alt+q"

#: X's BadAccess: XGrabKey of a combination another client already grabbed.
_BAD_ACCESS = 10


# ------------------------------------------------------------------- the run budget


@dataclass(frozen=True, slots=True)
class BudgetExhausted:
    """Why a run's budget is spent: ``limit`` is ``"max_steps"`` or ``"max_seconds"``."""

    limit: str
    message: str


@dataclass
class RunBudget:
    """Steps and wall-clock seconds a run may use; both always bound a run.

    ``max_seconds <= 0`` means "no wall limit of its own" and falls back to
    ``hard_cap_seconds`` (one hour unless told otherwise), so no run is ever unbounded.
    """

    max_steps: int
    max_seconds: float = 0.0
    hard_cap_seconds: float = 3600.0
    clock: Callable[[], float] = time.monotonic
    steps: int = 0
    started: float | None = None

    def __post_init__(self) -> None:
        if isinstance(self.max_steps, bool) or not isinstance(self.max_steps, int) or self.max_steps < 1:
            raise ValueError(f"max_steps must be a positive integer, got {self.max_steps!r}")
        if not self.limit_seconds > 0:
            raise ValueError(f"the wall-clock limit must be positive, got {self.limit_seconds!r}")

    @property
    def limit_seconds(self) -> float:
        return float(self.max_seconds) if self.max_seconds > 0 else float(self.hard_cap_seconds)

    def start(self) -> RunBudget:
        """Start the clock (idempotent; the first step starts it too)."""
        if self.started is None:
            self.started = self.clock()
        return self

    @property
    def elapsed(self) -> float:
        return 0.0 if self.started is None else self.clock() - self.started

    @property
    def deadline(self) -> float:
        """The clock value at which the wall limit is reached."""
        self.start()
        assert self.started is not None
        return self.started + self.limit_seconds

    def remaining_seconds(self) -> float:
        """Seconds left (0 when spent): the timeout to put on a model wait."""
        return max(0.0, self.deadline - self.clock())

    def step(self) -> int:
        """Count one step (call when a step starts); returns its 1-based number."""
        self.start()
        self.steps += 1
        return self.steps

    def exhausted(self) -> BudgetExhausted | None:
        """Whether another step may start."""
        if self.steps >= self.max_steps:
            return BudgetExhausted("max_steps", f"reached the step limit ({self.max_steps} steps)")
        if self.started is not None and self.clock() >= self.deadline:
            return BudgetExhausted("max_seconds", f"reached the time limit ({self.limit_seconds:g} s)")
        return None

    def as_dict(self) -> dict[str, Any]:
        return {
            "max_steps": self.max_steps,
            "max_seconds": self.limit_seconds,
            "steps": self.steps,
            "elapsed_s": round(self.elapsed, 3),
        }


# ------------------------------------------------------------------- watch backends


class WatchBackend(Protocol):
    """What the watcher thread polls. Created *in* the watcher thread (X connections and
    Windows hotkeys belong to the thread that made them)."""

    def bounds(self) -> Rect:
        """The desktop's bounding rectangle."""
        ...

    def pointer(self) -> tuple[int, int]:
        """The pointer position in desktop pixels."""
        ...

    def motions(self) -> list[tuple[int, int]] | None:
        """The pointer positions of every motion since the last call, in order; None
        when this backend cannot see motion as events (the watcher then samples
        :meth:`pointer` once per poll instead)."""
        ...

    def arm_hotkey(self, combo: str) -> None:
        """Grab/register ``combo`` globally; raises PlatformError when it cannot."""
        ...

    def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` s; True when an armed hotkey was pressed meanwhile."""
        ...

    def close(self) -> None: ...


def hotkey_parts(combo: str) -> tuple[list[KeySpec], KeySpec]:
    """``(modifiers, key)`` of a hotkey: any modifiers plus exactly one other key."""
    specs = parse_combo(combo)
    mods = [s for s in specs if s.modifier]
    keys = [s for s in specs if not s.modifier]
    if len(keys) != 1:
        raise UnknownKeyError(f"{combo} (a hotkey needs exactly one non-modifier key)")
    return mods, keys[0]


_GENERIC_MOD = {
    "ctrl": "ctrl", "lctrl": "ctrl", "rctrl": "ctrl",
    "alt": "alt", "lalt": "alt", "ralt": "alt",
    "shift": "shift", "lshift": "shift", "rshift": "shift",
    "win": "win", "lwin": "win", "rwin": "win",
}


class X11WatchBackend:
    """Pointer motion as events (the RECORD extension, see :mod:`deskpilot._x11._motion`;
    sampling where the server has none) and passive key grabs over private X connections."""

    # Keysyms whose modifier bit is looked up in the server's modifier map.
    _MOD_KEYSYMS: ClassVar[dict[str, tuple[int, int]]] = {
        "ctrl": (0xFFE3, 0xFFE4),  # Control_L/R
        "alt": (0xFFE9, 0xFFEA),  # Alt_L/R
        "win": (0xFFEB, 0xFFEC),  # Super_L/R
    }
    _FALLBACK: ClassVar[dict[str, int]] = {"ctrl": 4, "alt": 8, "win": 64, "shift": 1}
    _NUM_LOCK = 0xFF7F

    def __init__(self, display: str | None = None) -> None:
        from deskpilot._x11 import MotionRecorder, XDisplay

        self.conn = XDisplay(PlatformError, display)
        self.grabs: list[tuple[int, int]] = []
        #: (keycode, modifier mask, bits ignored when matching a press) per armed hotkey.
        self._hotkeys: set[tuple[int, int, int]] = set()
        self.recorder: MotionRecorder | None = None
        #: Why the pointer is sampled instead of recorded (None: it is recorded).
        self.sampled: str | None = None
        try:
            self.recorder = MotionRecorder(display, control=self.conn)
        except PlatformError as exc:
            self.sampled = str(exc)
            log.warning("kill switch: %s; the corner is sampled instead", exc)

    def motions(self) -> list[tuple[int, int]] | None:
        return self.recorder.drain() if self.recorder is not None else None

    def bounds(self) -> Rect:
        return Rect(0, 0, self.conn.width, self.conn.height)

    def pointer(self) -> tuple[int, int]:
        x, y = self.conn.pointer()
        return int(x), int(y)

    def _mask_of(self, generic: str, masks: dict[int, int]) -> int:
        if generic == "shift":
            return 1
        for keysym in self._MOD_KEYSYMS[generic]:
            code = self.conn.keycode(keysym)
            if code and code in masks:
                return masks[code]
        return self._FALLBACK[generic]

    def arm_hotkey(self, combo: str) -> None:
        mods, key = hotkey_parts(combo)
        if key.keysym is None:
            raise PlatformError(f"hotkey {combo!r}: X has no key {key.name!r}", combo=combo)
        keycode = self.conn.keycode(key.keysym)
        if not keycode:
            raise PlatformError(f"hotkey {combo!r}: the keyboard map has no {key.name!r} key", combo=combo)
        masks = self.conn.modifier_masks()
        modifiers = 0
        for spec in mods:
            modifiers |= self._mask_of(_GENERIC_MOD[spec.name], masks)
        numlock_code = self.conn.keycode(self._NUM_LOCK)
        numlock = masks.get(numlock_code, 16) if numlock_code else 16
        locks = sorted({0, 2, numlock, 2 | numlock})
        variants = sorted({modifiers | lock for lock in locks})
        with self.conn.trap() as errors:
            for variant in variants:
                self.conn.grab_key(keycode, variant)
        if errors:
            with self.conn.trap():  # ungrabbing what was not ours fails too: expected
                for variant in variants:
                    self.conn.ungrab_key(keycode, variant)
            code = errors[0].code
            why = "another application already grabbed it" if code == _BAD_ACCESS else self.conn.error_text(code)
            raise PlatformError(f"cannot grab hotkey {combo!r}: {why}", combo=combo, error_code=code)
        self.grabs += [(keycode, v) for v in variants]
        # The agent itself may be holding modifiers when the user reaches for the hotkey
        # (hold_key("shift+ctrl") during a drag): a passive grab matches the exact
        # modifier state only, so the combo is grabbed with every set of the other
        # modifiers (shift, ctrl, alt, win) added as well. A variant another client
        # already grabbed is skipped: the plain combo is what must be ours.
        extras = sorted({1, *(self._mask_of(g, masks) for g in ("ctrl", "alt", "win"))})
        extras = [bit for bit in extras if bit and not bit & (modifiers | 2 | numlock)]
        ignored = 2 | numlock
        for extra in range(1, 1 << len(extras)):
            bits = 0
            for i, bit in enumerate(extras):
                if extra >> i & 1:
                    bits |= bit
            for lock in locks:
                with self.conn.trap() as refused:
                    self.conn.grab_key(keycode, modifiers | bits | lock)
                if refused:
                    with self.conn.trap():  # not ours: its ungrab fails as well
                        self.conn.ungrab_key(keycode, modifiers | bits | lock)
                else:
                    self.grabs.append((keycode, modifiers | bits | lock))
        for bit in extras:
            ignored |= bit
        self._hotkeys.add((keycode, modifiers, ignored))

    def wait(self, timeout: float) -> bool:
        hit = self._drain()
        if hit or timeout <= 0:
            return hit
        sockets = [self.conn.fileno()]
        if self.recorder is not None:
            sockets.append(self.recorder.fileno())  # motion wakes the watcher at once
        with contextlib.suppress(OSError, ValueError):
            select.select(sockets, [], [], timeout)
        return self._drain()

    def _drain(self) -> bool:
        hit = False
        for keycode, state in self.conn.pending_key_presses():
            for code, modifiers, ignored in self._hotkeys:
                if keycode == code and state & ~ignored & 0xFF == modifiers:
                    hit = True
        return hit

    def close(self) -> None:
        if self.recorder is not None:
            recorder, self.recorder = self.recorder, None
            with contextlib.suppress(Exception):
                recorder.close()
        if self.conn.ptr:
            for keycode, variant in self.grabs:
                self.conn.ungrab_key(keycode, variant)
            self.grabs.clear()
            with contextlib.suppress(Exception):
                self.conn.take_errors()  # the ungrabs' errors (if any) are of no use now
            self.conn.close()


class Win32WatchBackend:
    """Pointer motion from a low-level mouse hook (WH_MOUSE_LL), and RegisterHotKey, on
    the watcher thread's message queue.

    The hook sees every move the system processes (the user's and SendInput's alike),
    with the position it moved to, so a corner touched between two of the agent's moves
    is seen; Windows calls it while the watcher thread waits for messages
    (MsgWaitForMultipleObjects wakes for it, PeekMessageW runs it). Where the hook cannot
    be installed, the pointer is sampled with GetCursorPos once per poll instead.

    ``user32``/``kernel32`` default to the shared system libraries; tests pass
    :class:`~deskpilot._win32.Library` objects over recorded fakes.
    """

    _MOD_BITS: ClassVar[dict[str, int]] = {
        "ctrl": win32.MOD_CONTROL, "alt": win32.MOD_ALT, "shift": win32.MOD_SHIFT, "win": win32.MOD_WIN,
    }

    def __init__(
        self, user32: Library | None = None, kernel32: Library | None = None, *, mouse_hook: bool = True
    ) -> None:
        # The Win32 calls are imported here, not at the top: Linux runs never build this.
        from deskpilot._win32 import cursor_position, drain_messages, system_library, virtual_screen

        self._cursor_position, self._drain_messages, self._virtual_screen = (
            cursor_position,
            drain_messages,
            virtual_screen,
        )
        self.user32 = user32 if user32 is not None else system_library("user32")
        self.kernel32 = kernel32 if kernel32 is not None else system_library("kernel32")
        self.thread_id = int(self.kernel32.GetCurrentThreadId())
        self.ids: list[int] = []
        self._moves: list[tuple[int, int]] = []
        self.hook: MouseHook | None = None
        #: Why the pointer is sampled instead of hooked (None: it is hooked).
        self.sampled: str | None = None
        if mouse_hook:
            self._install_hook()
        else:
            self.sampled = "the mouse hook is off"

    def bounds(self) -> Rect:
        left, top, width, height = self._virtual_screen(self.user32)
        return Rect(left, top, max(1, width), max(1, height))

    def _install_hook(self) -> None:
        from deskpilot._win32 import MouseHook

        try:
            self.hook = MouseHook(self.user32, self.kernel32, lambda x, y: self._moves.append((x, y)))
        except PlatformError as exc:
            self.sampled = f"no low-level mouse hook: {exc}"
            log.warning("kill switch: %s; the corner is sampled instead", self.sampled)

    def motions(self) -> list[tuple[int, int]] | None:
        if self.hook is None:
            return None
        moves, self._moves = self._moves, []
        return moves

    def pointer(self) -> tuple[int, int]:
        # Raises without an interactive desktop (a locked workstation, a service): the
        # watcher then skips this poll.
        return self._cursor_position(self.user32)

    def arm_hotkey(self, combo: str) -> None:
        mods, key = hotkey_parts(combo)
        if key.vk is None:
            raise PlatformError(f"hotkey {combo!r}: Windows has no key {key.name!r}", combo=combo)
        bits = win32.MOD_NOREPEAT
        for spec in mods:
            bits |= self._MOD_BITS[_GENERIC_MOD[spec.name]]
        hotkey_id = 0xB000 + len(self.ids)  # application ids live in 0x0000..0xBFFF
        try:
            self.user32.RegisterHotKey(None, hotkey_id, bits, key.vk)
        except PlatformError as exc:
            error = exc.details.get("last_error", 0)
            why = ("another application already registered it"
                   if error == win32.ERROR_HOTKEY_ALREADY_REGISTERED else str(exc))
            raise PlatformError(f"cannot register hotkey {combo!r}: {why}", combo=combo, error=error) from exc
        self.ids.append(hotkey_id)

    def _drain(self) -> bool:
        hit = False
        for message, wparam in self._drain_messages(self.user32):
            if message == win32.WM_HOTKEY and wparam in self.ids:
                hit = True
        return hit

    def wait(self, timeout: float) -> bool:
        hit = self._drain()
        if hit or timeout <= 0:
            return hit
        self.user32.MsgWaitForMultipleObjects(0, None, 0, max(0, int(timeout * 1000)), win32.QS_ALLINPUT)
        return self._drain()

    def close(self) -> None:
        hook, self.hook = self.hook, None
        if hook is not None:
            try:
                hook.close()
            except PlatformError as exc:  # removed by Windows already (a hook that timed out)
                log.warning("kill switch: %s", exc)
        ids, self.ids = self.ids, []
        for hotkey_id in ids:
            try:
                self.user32.UnregisterHotKey(None, hotkey_id)
            except PlatformError as exc:
                # This thread registered every id, so a failure means the registration
                # is already gone: nothing to release. The other ids are still released.
                log.warning("kill switch: %s", exc)


class MutterWatchBackend:
    """GNOME on Wayland: the pointer from the Mutter screencast streams' cursor metadata
    (the user's moves included), sampled once per poll (no motion events: a corner touched
    and left between two polls is missed). No hotkey: a Wayland session shows global keys to
    no client, and Xwayland sees keys only while one of its X11 windows has the focus."""

    def __init__(self) -> None:
        from deskpilot.capture import DamageBackend, PointerBackend, make_backend

        capture = make_backend("mutter", cursor=False)
        try:
            if not isinstance(capture, PointerBackend) or not isinstance(capture, DamageBackend):
                raise PlatformError("the mutter capture backend reads no pointer", call="watch")
            # The pointer comes with the frames: connect the streams (the run's capture
            # shares them).
            for monitor in capture.monitors():
                capture.damage_source(monitor.index)
        except BaseException:
            capture.close()
            raise
        self._capture: PointerBackend = capture

    def bounds(self) -> Rect:
        monitors = self._capture.monitors()
        left, top = min(m.rect.left for m in monitors), min(m.rect.top for m in monitors)
        right, bottom = max(m.rect.right for m in monitors), max(m.rect.bottom for m in monitors)
        return Rect(left, top, right - left, bottom - top)

    def pointer(self) -> tuple[int, int]:
        position = self._capture.pointer()
        if position is None:  # not known yet: a point no corner is near
            b = self.bounds()
            return (b.left + b.width // 2, b.top + b.height // 2)
        return position

    def motions(self) -> list[tuple[int, int]] | None:
        return None

    def arm_hotkey(self, combo: str) -> None:
        raise PlatformError(f"hotkey {combo!r}: a Wayland session does not show global keys to deskpilot "
                            "(use the corner, Ctrl+C or the panel's stop)", combo=combo)

    def wait(self, timeout: float) -> bool:
        time.sleep(max(timeout, 0.0))
        return False

    def close(self) -> None:
        self._capture.close()


def default_watch_backend() -> WatchBackend:
    """The backend for this desktop; raises PlatformError when there is none."""
    import os
    import sys

    if sys.platform == "win32":
        return Win32WatchBackend()
    from deskpilot.capture import auto_backend

    if auto_backend("capture") == "mutter":
        return MutterWatchBackend()
    if not os.environ.get("DISPLAY"):
        if os.environ.get("WAYLAND_DISPLAY"):
            raise PlatformError("the fail-safe corner and the hotkey are not watched on Wayland (no watcher "
                                "there yet; a wlroots compositor gives a client neither the pointer's position "
                                "nor a global key); Ctrl+C, SIGTERM and the budgets stop the run", call="watch")
        raise PlatformError("no desktop to watch (DISPLAY is not set)", call="watch")
    return X11WatchBackend()


# ------------------------------------------------------------------- the kill switch


@dataclass(frozen=True, slots=True)
class Trip:
    """Why and when the kill switch tripped. ``source``: corner, hotkey, max_seconds,
    programmatic (or whatever :meth:`KillSwitch.trip` was given, e.g. ``"signal"``)."""

    source: str
    reason: str
    at: float  # time.monotonic()
    detail: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"source": self.source, "reason": self.reason, **self.detail}

    def error(self) -> RunInterrupted:
        return RunInterrupted(self.reason, reason=self.source, **self.detail)


def _corners(areas: Sequence[Rect]) -> list[tuple[str, int, int]]:
    """The outer corners of the desktop that the pointer can actually reach.

    With several monitors the bounding box's corners can lie off every screen; those
    are dropped. Inner corners (where monitors meet) are never used: the pointer
    crosses them on its way between screens."""
    left = min(a.left for a in areas)
    top = min(a.top for a in areas)
    right = max(a.right for a in areas) - 1
    bottom = max(a.bottom for a in areas) - 1
    out = []
    for name, x, y in (("top-left", left, top), ("top-right", right, top),
                       ("bottom-left", left, bottom), ("bottom-right", right, bottom)):
        if any(a.contains(x, y) for a in areas):
            out.append((name, x, y))
    if not out:  # no reachable outer corner: the first monitor's own corners
        a = areas[0]
        out = [("top-left", a.left, a.top), ("top-right", a.right - 1, a.top),
               ("bottom-left", a.left, a.bottom - 1), ("bottom-right", a.right - 1, a.bottom - 1)]
    return out


class KillSwitch:
    """Stops a run on the fail-safe corner, a global hotkey, the wall-clock budget or a
    programmatic trip (see the module doc). Use as a context manager or start()/stop().

    ``monitors`` (physical rectangles) refine which corners count; default: the
    backend's desktop bounds. ``backend`` builds the watch backend inside the watcher
    thread (tests pass a fake).
    """

    def __init__(
        self,
        *,
        corner: bool = True,
        corner_margin: int = 2,
        hotkeys: Sequence[str] = (DEFAULT_HOTKEY,),
        poll_interval: float = 0.05,
        budget: RunBudget | None = None,
        monitors: Sequence[Rect] = (),
        backend: Callable[[], WatchBackend] | None = None,
        on_trip: Callable[[Trip], None] | None = None,
        agent_tolerance: int = 1,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if corner_margin < 0:
            raise ValueError(f"corner_margin must be >= 0, got {corner_margin}")
        if not poll_interval > 0:
            raise ValueError(f"poll_interval must be > 0, got {poll_interval}")
        for combo in hotkeys:
            hotkey_parts(combo)  # a bad hotkey is a configuration error, raised here
        self.corner = corner
        self.corner_margin = corner_margin
        self.hotkeys = tuple(hotkeys)
        self.poll_interval = poll_interval
        self.budget = budget
        self.monitors = tuple(monitors)
        self.agent_tolerance = agent_tolerance
        self._backend_factory = backend or default_watch_backend
        self._callbacks: list[Callable[[Trip], None]] = [on_trip] if on_trip else []
        self._clock = clock
        self._lock = threading.Lock()
        self._flag = threading.Event()
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread: threading.Thread | None = None
        self._trip: Trip | None = None
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[Trip]]] = []
        self._agent_pointer: tuple[int, int] | None = None
        self._agent_via: tuple[tuple[int, int], ...] = ()
        self._agent_seen = False
        self.status: dict[str, str] = {}
        self.polls = 0

    # -- state ---------------------------------------------------------------------------

    @property
    def tripped(self) -> bool:
        return self._flag.is_set()

    @property
    def trip_info(self) -> Trip | None:
        return self._trip

    def add_callback(self, callback: Callable[[Trip], None]) -> None:
        """Call ``callback(trip)`` when tripping (at once if already tripped)."""
        with self._lock:
            if self._trip is None:
                self._callbacks.append(callback)
                return
            trip = self._trip
        callback(trip)

    def check(self) -> None:
        """Raise :class:`RunInterrupted` if tripped (call between phases of a turn)."""
        trip = self._trip
        if trip is not None:
            raise trip.error()

    def trip(self, reason: str = "stopped by the program", source: str = "programmatic", **detail: Any) -> bool:
        """Trip now; returns False when it had already tripped (the first reason stays)."""
        trip = Trip(source, reason, self._clock(), dict(detail))
        with self._lock:
            if self._trip is not None:
                return False
            self._trip = trip
            waiters = list(self._waiters)
            callbacks = list(self._callbacks)
        self._flag.set()
        log.warning("kill switch: %s", reason)
        for loop, future in waiters:
            with contextlib.suppress(RuntimeError):  # that loop is closed: nobody waits
                loop.call_soon_threadsafe(_resolve, future, trip)
        for callback in callbacks:
            try:
                callback(trip)
            except Exception:  # a failing callback must not keep the others from running
                log.exception("kill-switch callback failed")
        return True

    async def wait(self) -> Trip:
        """Return when the switch trips (at once if it has)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Trip] = loop.create_future()
        with self._lock:
            if self._trip is not None:
                return self._trip
            self._waiters.append((loop, future))
        try:
            return await future
        finally:
            with self._lock, contextlib.suppress(ValueError):
                self._waiters.remove((loop, future))

    def wait_blocking(self, timeout: float | None = None) -> Trip | None:
        """Block the calling thread until tripped or ``timeout``."""
        self._flag.wait(timeout)
        return self._trip

    def note_pointer(self, x: int, y: int, *, via: Sequence[tuple[int, int]] = ()) -> None:
        """The agent is about to put the pointer at ``(x, y)``: do not take that for the
        user's fail-safe gesture. Call before moving, with the clamped target. ``via``:
        points the pointer passes on its way (a drag's start), which may be corners too."""
        with self._lock:
            self._agent_pointer = (int(x), int(y))
            self._agent_via = tuple((int(px), int(py)) for px, py in via)
            self._agent_seen = False

    # -- the watcher thread --------------------------------------------------------------

    def start(self, timeout: float = 5.0) -> KillSwitch:
        """Start watching; returns once the sources are armed (or found unavailable)."""
        if self._thread is not None:
            return self
        if self.budget is not None:
            self.budget.start()
        self._stop.clear()
        self._ready.clear()
        self._thread = threading.Thread(target=self._run, name="deskpilot-killswitch", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout):
            self.status.setdefault("watcher", f"did not start within {timeout:g} s")
        return self

    def stop(self, timeout: float = 2.0) -> None:
        """Stop watching and release the grabs (the trip state stays). Idempotent."""
        thread, self._thread = self._thread, None
        if thread is None:
            return
        self._stop.set()
        thread.join(timeout)

    def __enter__(self) -> KillSwitch:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _run(self) -> None:
        backend: WatchBackend | None = None
        try:
            backend = self._backend_factory()
        except DeskpilotError as exc:
            self.status.update(corner=f"unavailable: {exc}", hotkey=f"unavailable: {exc}")
        except Exception as exc:  # a broken desktop must not take the run down with it
            self.status.update(corner=f"unavailable: {exc!r}", hotkey=f"unavailable: {exc!r}")
        try:
            corners = self._arm(backend)
            self._ready.set()
            self._loop(backend, corners)
        except Exception as exc:
            log.exception("kill-switch watcher failed")
            self.status["watcher"] = f"failed: {exc!r}"
        finally:
            self._ready.set()
            if backend is not None:
                with contextlib.suppress(Exception):
                    backend.close()

    def _arm(self, backend: WatchBackend | None) -> list[tuple[str, int, int]]:
        self.status["budget"] = (
            f"armed: {self.budget.limit_seconds:g} s, {self.budget.max_steps} steps" if self.budget else "off"
        )
        if backend is None:
            return []
        armed: list[str] = []
        errors: list[str] = []
        for combo in self.hotkeys:
            try:
                backend.arm_hotkey(combo)
                armed.append(combo)
            except DeskpilotError as exc:
                errors.append(str(exc))
                log.warning("kill switch: %s", exc)
        if not self.hotkeys:
            self.status["hotkey"] = "off"
        else:
            self.status["hotkey"] = "; ".join(
                ([f"armed: {', '.join(armed)}"] if armed else []) + [f"unavailable: {e}" for e in errors]
            )
        if not self.corner:
            self.status["corner"] = "off"
            return []
        corners = _corners(self.monitors or (backend.bounds(),))
        # Events see every position the pointer passed; a sample sees where it is now,
        # and misses a corner left again within the poll interval.
        seen = "every motion" if backend.motions() is not None else f"sampled every {self.poll_interval:g} s"
        self.status["corner"] = (
            f"armed: {', '.join(f'{n} ({x},{y})' for n, x, y in corners)}, margin {self.corner_margin} px, {seen}"
        )
        return corners

    def _corner_at(self, corners: Sequence[tuple[str, int, int]], x: int, y: int) -> str | None:
        m = self.corner_margin
        for name, cx, cy in corners:
            if abs(x - cx) <= m and abs(y - cy) <= m:
                return name
        return None

    def _loop(self, backend: WatchBackend | None, corners: list[tuple[str, int, int]]) -> None:
        # A pointer that starts in a corner arms the corner only after it has left it.
        corner_armed = True
        if backend is not None and corners:
            x, y = backend.pointer()
            if self._corner_at(corners, x, y) is not None:
                corner_armed = False
                self.status["corner"] += " (the pointer starts in a corner: armed once it leaves)"
        while not self._stop.is_set() and not self._flag.is_set():
            self.polls += 1
            if backend is None:
                self._stop.wait(self.poll_interval)
            elif backend.wait(self.poll_interval):
                self.trip(f"kill-switch hotkey pressed ({', '.join(self.hotkeys)})", "hotkey")
                return
            if self.budget is not None and self._clock() >= self.budget.deadline:
                self.trip(f"reached the time limit ({self.budget.limit_seconds:g} s)", "max_seconds")
                return
            if backend is None:
                continue
            positions = backend.motions()  # drained even with the corner off: it wakes wait()
            if not corners:
                continue
            if positions is None:
                try:
                    positions = [backend.pointer()]
                except DeskpilotError:
                    continue
            for x, y in positions:
                name, corner_armed = self._see(corners, x, y, corner_armed)
                if name is not None:
                    self.trip(f"fail-safe: the pointer was moved into the {name} corner", "corner", x=x, y=y)
                    return

    def _see(self, corners: Sequence[tuple[str, int, int]], x: int, y: int, armed: bool) -> tuple[str | None, bool]:
        """One pointer position, in the order the pointer took them: ``(the corner that
        trips, or None; whether the corner is armed from now on)``.

        The agent's own moves are told apart by position: :meth:`note_pointer` announced
        the target (and a drag's start) before the move, and a position there is the
        agent's. Once the pointer has been seen there, any other position is the user's
        and the note is dropped."""
        name = self._corner_at(corners, x, y)
        with self._lock:
            agent = self._agent_pointer
            tol = self.agent_tolerance
            at_agent = agent is not None and abs(agent[0] - x) <= tol and abs(agent[1] - y) <= tol
            on_the_way = not at_agent and any(abs(px - x) <= tol and abs(py - y) <= tol
                                              for px, py in self._agent_via)
            if at_agent:
                self._agent_seen = True
            elif agent is not None and self._agent_seen:
                # The pointer left the spot the agent put it on: whoever moves it now
                # is the user. (Before it was seen there, the agent's move may still
                # be on its way, so the note stays.)
                self._agent_pointer = None
                self._agent_via = ()
                self._agent_seen = False
        if name is None:
            return None, True
        if not armed or at_agent or on_the_way:
            return None, armed
        return name, armed


def _resolve(future: asyncio.Future[Trip], trip: Trip) -> None:
    if not future.done():
        future.set_result(trip)
