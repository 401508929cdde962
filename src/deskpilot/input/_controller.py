"""The :class:`InputController` facade: one API over SendInput, XTest and the dry run.

Backends inject primitive events; everything composite lives here, once for every
OS: click counts, drags along a path, scroll at a point, key combos, held keys,
clamping to the desktop, and the guarantee that nothing stays pressed. Every key and
button pressed here is tracked *before* the event is sent, and released in a
``finally`` (combos, drags, clicks, holds) or, when anything raises — including
``KeyboardInterrupt`` — by releasing everything still tracked.
"""

from __future__ import annotations

import itertools
import math
import numbers
import operator
import sys
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, SupportsFloat, SupportsIndex, TypeAlias, cast

from deskpilot._errors import InputArgumentError, InputError
from deskpilot.actions import Action
from deskpilot.geometry import Rect
from deskpilot.input._base import Button, InputBackend, RecordingBackend
from deskpilot.input._keys import KeySpec, parse_combo
from deskpilot.input._perform import perform

__all__ = ["BACKENDS", "InputArgumentError", "InputController", "make_backend"]

#: Backend names accepted by :class:`InputController` ("auto" picks per OS).
BACKENDS: tuple[str, ...] = ("auto", "dry", "mutter", "sendinput", "wlroots", "xtest")

_BUTTONS: tuple[Button, ...] = ("left", "right", "middle")

#: A coordinate: any real number, numpy integers and floats included (rounded to a pixel).
PixelCoordinate: TypeAlias = float | SupportsFloat


def make_backend(name: str) -> InputBackend:
    """Instantiate a backend by name; the OS backends are imported only when chosen."""
    if name == "auto":
        if sys.platform == "win32":
            name = "sendinput"
        elif sys.platform.startswith("linux") or sys.platform.startswith("freebsd"):
            # XTest where DISPLAY is an X server that sees the screen; Mutter's RemoteDesktop
            # on a GNOME Wayland session (XTest would reach Xwayland's windows only).
            from deskpilot.capture import auto_backend

            name = auto_backend("input")
        else:
            raise InputError(f"no input backend for {sys.platform}: use backend='dry'", platform=sys.platform)
    if name == "dry":
        from deskpilot.input._dry import DryBackend

        return DryBackend()
    if name == "mutter":
        from deskpilot.input._mutter import MutterInput

        return MutterInput()
    if name == "xtest":
        from deskpilot.input._xtest import XTestBackend

        return XTestBackend()
    if name == "sendinput":
        from deskpilot.input._sendinput import SendInputBackend

        return SendInputBackend()
    if name == "wlroots":
        from deskpilot.input._wlroots import WlrootsInput

        return WlrootsInput()
    raise InputArgumentError(f"unknown input backend {name!r} (one of {', '.join(BACKENDS)})", backend=name)


def _coordinate(value: Any, what: str) -> int:
    # numbers.Real: numpy integers and floats (points computed with numpy) are numbers too.
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InputArgumentError(f"{what} must be a number, got {value!r}", **{what: repr(value)})
    if isinstance(value, numbers.Integral):
        return operator.index(value)
    number = float(value)
    if not math.isfinite(number):
        raise InputArgumentError(f"{what} must be finite, got {value!r}", **{what: repr(value)})
    return round(number)


def _count(value: Any, what: str, low: int, high: int) -> int:
    number: int | None = None
    if not isinstance(value, bool) and isinstance(value, numbers.Integral):
        number = operator.index(value)  # numpy integers included
    if number is None or not low <= number <= high:
        raise InputArgumentError(f"{what} must be an integer {low}..{high}, got {value!r}", **{what: repr(value)})
    return number


def _button(value: Any) -> Button:
    if value not in _BUTTONS:
        raise InputArgumentError(f"unknown mouse button {value!r} (left, right or middle)", button=repr(value))
    return cast(Button, value)


class InputController:
    """Mouse and keyboard in physical virtual-desktop pixels.

    ``backend`` is ``"auto"`` (SendInput on Windows, XTest on X11, Mutter's RemoteDesktop on a
    GNOME Wayland session), ``"sendinput"``, ``"xtest"``, ``"mutter"``, ``"dry"`` (record only, see :attr:`actions`) or a backend object.
    Coordinates outside the desktop are clamped onto its edge.
    """

    def __init__(self, backend: str | InputBackend = "auto") -> None:
        self._backend: InputBackend = make_backend(backend) if isinstance(backend, str) else backend
        self._lock = threading.RLock()
        self._keys: list[KeySpec] = []  # pressed, in press order
        self._buttons: list[Button] = []
        self._closed = False

    # -- state ----------------------------------------------------------------------

    @property
    def backend(self) -> InputBackend:
        return self._backend

    @property
    def actions(self) -> list[dict[str, Any]]:
        """What the dry backend recorded (empty for backends that record nothing)."""
        backend = self._backend
        return backend.actions if isinstance(backend, RecordingBackend) and isinstance(backend.actions, list) else []

    @property
    def desktop(self) -> Rect:
        return self._backend.desktop()

    @property
    def pressed(self) -> tuple[list[str], list[str]]:
        """(keys, buttons) currently held down by this controller."""
        return [k.name for k in self._keys], list(self._buttons)

    def position(self) -> tuple[int, int]:
        return self._backend.position()

    def clamp(self, x: PixelCoordinate, y: PixelCoordinate) -> tuple[int, int]:
        """Validate and clamp a point onto the desktop."""
        px, py = _coordinate(x, "x"), _coordinate(y, "y")
        d = self._backend.desktop()
        return (min(max(px, d.left), d.right - 1), min(max(py, d.top), d.bottom - 1))

    # -- release guarantee ----------------------------------------------------------

    @contextmanager
    def _atomic(self) -> Iterator[None]:
        """Run an action; if anything escapes it, release everything still pressed."""
        with self._lock:
            if self._closed:
                raise InputError("input controller is closed")
            try:
                yield
            except BaseException:
                self._release(self._keys[::-1], list(self._buttons), reraise=False)
                raise

    def _release(
        self, keys: Iterable[KeySpec], buttons: Iterable[Button], *, reraise: bool = True, force: bool = False
    ) -> None:
        """Release the tracked ones of ``keys`` and ``buttons`` (all of them with
        ``force``); every release is attempted even if some fail."""
        first: BaseException | None = None
        for spec in list(keys):
            if spec in self._keys:
                self._keys.remove(spec)
            elif not force:
                continue
            try:
                self._backend.key(spec, False)
            except BaseException as exc:
                first = first or exc
        for button in list(buttons):
            if button in self._buttons:
                self._buttons.remove(button)
            elif not force:
                continue
            try:
                self._backend.button(button, False)
            except BaseException as exc:
                first = first or exc
        if first is not None and reraise:
            raise first

    def _press_key(self, spec: KeySpec) -> None:
        self._keys.append(spec)  # tracked first: an interrupt inside the call still releases it
        self._backend.key(spec, True)

    def _press_button(self, button: Button) -> None:
        self._buttons.append(button)
        self._backend.button(button, True)

    def release_all(self) -> None:
        """Release every key and button this controller holds."""
        with self._lock:
            self._release(self._keys[::-1], list(self._buttons))

    # -- mouse ----------------------------------------------------------------------

    def move(self, x: PixelCoordinate, y: PixelCoordinate) -> tuple[int, int]:
        """Move the pointer; returns the (clamped) physical point."""
        point = self.clamp(x, y)
        with self._atomic():
            self._backend.move(*point)
        return point

    def _maybe_move(self, x: PixelCoordinate | None, y: PixelCoordinate | None) -> None:
        if (x is None) != (y is None):
            raise InputArgumentError("give both x and y, or neither", x=repr(x), y=repr(y))
        if x is not None and y is not None:
            self._backend.move(*self.clamp(x, y))

    def mouse_down(self, button: Button = "left") -> None:
        b = _button(button)
        with self._atomic():
            if b not in self._buttons:
                self._press_button(b)

    def mouse_up(self, button: Button = "left") -> None:
        b = _button(button)
        with self._atomic():
            # Released even if not pressed here: a way out of a button stuck elsewhere.
            self._release((), [b], force=True)

    def click(
        self, x: PixelCoordinate | None = None, y: PixelCoordinate | None = None, button: Button = "left", count: SupportsIndex = 1
    ) -> None:
        """Click ``count`` (1-3) times at ``(x, y)`` (or where the pointer is)."""
        b = _button(button)
        n = _count(count, "count", 1, 3)
        with self._atomic():
            self._maybe_move(x, y)
            if b in self._buttons:  # held by mouse_down: a click starts by letting go
                self._release((), [b])
            for _ in range(n):
                self._press_button(b)
                self._release((), [b])

    def drag(
        self,
        start: Sequence[PixelCoordinate],
        end: Sequence[PixelCoordinate] | None = None,
        *,
        path: Sequence[Sequence[PixelCoordinate]] | None = None,
        duration: float = 0.3,
        steps: SupportsIndex = 20,
        button: Button = "left",
    ) -> None:
        """Press at ``start``, move through ``path`` (if any) to ``end``, release.

        The route is walked in about ``steps`` moves spread over ``duration`` seconds
        (each path segment gets moves in proportion to its length). The button is
        released even if the drag is interrupted.
        """
        b = _button(button)
        n = _count(steps, "steps", 1, 10_000)
        if isinstance(duration, bool) or not isinstance(duration, (int, float)) or not 0 <= duration <= 60:
            raise InputArgumentError(f"duration must be 0..60 seconds, got {duration!r}")
        waypoints = [self._pair(start, "start"), *(self._pair(p, "path point") for p in (path or ()))]
        if end is not None:
            waypoints.append(self._pair(end, "end"))
        if len(waypoints) < 2:
            raise InputArgumentError("drag needs an end point or a path")
        route = self._route(waypoints, n)
        pause = duration / len(route)
        with self._atomic():
            self._backend.move(*waypoints[0])
            if b in self._buttons:
                self._release((), [b])
            self._press_button(b)
            try:
                for point in route:
                    if pause:
                        time.sleep(pause)
                    self._backend.move(*point)
            finally:
                self._release((), [b])

    def _pair(self, point: Sequence[PixelCoordinate], what: str) -> tuple[int, int]:
        # A numpy array of two numbers is a pair too (it is no collections.abc.Sequence).
        if isinstance(point, (str, bytes)) or not hasattr(point, "__getitem__") or not hasattr(point, "__len__"):
            raise InputArgumentError(f"{what} must be an (x, y) pair, got {point!r}")
        if len(point) != 2:
            raise InputArgumentError(f"{what} must be an (x, y) pair, got {point!r}")
        return self.clamp(point[0], point[1])

    @staticmethod
    def _route(waypoints: list[tuple[int, int]], steps: int) -> list[tuple[int, int]]:
        lengths = [math.dist(a, b) for a, b in itertools.pairwise(waypoints)]
        total = sum(lengths) or 1.0
        route: list[tuple[int, int]] = []
        for (ax, ay), (bx, by), length in zip(waypoints, waypoints[1:], lengths, strict=False):
            sub = max(1, round(steps * length / total))
            for i in range(1, sub + 1):
                t = i / sub
                route.append((round(ax + (bx - ax) * t), round(ay + (by - ay) * t)))
        return route

    def scroll(
        self, x: PixelCoordinate | None = None, y: PixelCoordinate | None = None, *, dy: SupportsIndex = 0, dx: SupportsIndex = 0
    ) -> None:
        """Scroll by notches at ``(x, y)``: ``dy`` > 0 down, ``dx`` > 0 right."""
        vertical = _count(dy, "dy", -1000, 1000)
        horizontal = _count(dx, "dx", -1000, 1000)
        with self._atomic():
            self._maybe_move(x, y)
            if vertical or horizontal:
                self._backend.wheel(vertical, horizontal)

    # -- keyboard -------------------------------------------------------------------

    def key(self, combo: str, *, repeat: int = 1) -> None:
        """Press a combo like ``"ctrl+shift+t"`` ``repeat`` times (keys in order, released
        in reverse). Keys already held by :meth:`hold` are left held."""
        specs = parse_combo(combo)
        times = _count(repeat, "repeat", 1, 1000)
        with self._atomic():
            for _ in range(times):
                mine: list[KeySpec] = []
                try:
                    for spec in specs:
                        if spec in self._keys:
                            continue
                        mine.append(spec)
                        self._press_key(spec)
                finally:
                    self._release(mine[::-1], ())

    @contextmanager
    def hold(self, *keys: str) -> Iterator[InputController]:
        """Hold keys (names or combos) down for the ``with`` block."""
        specs: list[KeySpec] = []
        for name in keys:
            specs.extend(s for s in parse_combo(name) if s not in specs)
        mine: list[KeySpec] = []
        with self._atomic():  # a failed press releases everything held
            for spec in specs:
                if spec not in self._keys:
                    mine.append(spec)
                    self._press_key(spec)
        try:
            yield self
        finally:
            with self._lock:
                self._release(mine[::-1], ())

    def type_text(self, text: str) -> None:
        """Type any Unicode text exactly (astral characters included)."""
        if not isinstance(text, str):
            raise InputArgumentError(f"text must be a string, got {type(text).__name__}")
        if not text:
            return
        with self._atomic():
            self._backend.type_text(text)

    # -- actions --------------------------------------------------------------------

    def perform(self, action: Action) -> None:
        """Perform a typed action and wait until its events are delivered.

        The same as :func:`deskpilot.input.perform` with these hands; code handed some
        ``Hands`` (perhaps guarded or simulated) calls that function instead.
        """
        perform(self, action)

    # -- lifecycle ------------------------------------------------------------------

    def sync(self) -> None:
        """Block until every event sent so far has been delivered."""
        with self._lock:
            self._backend.sync()

    def close(self) -> None:
        """Release everything held and the backend's OS resources. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                self._release(self._keys[::-1], list(self._buttons))
            finally:
                self._backend.close()

    def __enter__(self) -> InputController:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
