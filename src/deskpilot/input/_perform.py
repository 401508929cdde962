"""Performing a typed :data:`~deskpilot.actions.Action` with any hands.

:func:`perform` is a function over the :class:`Hands` primitives, not a method each hands
object implements: the safety layer's guarded hands, the simulated desktop and test fakes
wrap or imitate those primitives, and an action performed through them must pass their
gate (a method reached through a wrapper's attribute pass-through would not).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, ExitStack
from typing import Any, Protocol, assert_never

from deskpilot.actions import (
    Action,
    Click,
    Drag,
    Hold,
    KeyPress,
    MoveMouse,
    Scroll,
    TypeText,
    Wait,
    Zoom,
)

__all__ = ["Hands", "perform"]


class Hands(Protocol):
    """What performing an action needs: :class:`deskpilot.input.InputController`'s
    primitives, in physical pixels."""

    def move(self, x: float, y: float) -> Any: ...
    def position(self) -> tuple[int, int]: ...
    def click(self, x: float | None = None, y: float | None = None, button: Any = "left", count: int = 1) -> None: ...
    def mouse_down(self, button: Any = "left") -> None: ...
    def mouse_up(self, button: Any = "left") -> None: ...
    def drag(self, start: Sequence[float], end: Sequence[float] | None = None, *, duration: float = 0.3, steps: int = 20) -> None: ...
    def scroll(self, x: float | None = None, y: float | None = None, *, dy: int = 0, dx: int = 0) -> None: ...
    def type_text(self, text: str) -> None: ...
    def key(self, combo: str) -> None: ...
    def hold(self, *keys: str) -> AbstractContextManager[Any]: ...
    def release_all(self) -> None: ...
    def sync(self) -> None: ...
    def close(self) -> None: ...


def _no_pause(seconds: float) -> None:
    return None


#: The seeds' delay after each kind of action, once its events are delivered.
_AFTER = {"click": 0.12, "scroll": 0.12, "drag": 0.12, "type": 0.1, "key": 0.1, "move": 0.06}


def perform(
    hands: Hands,
    action: Action,
    *,
    pause: Callable[[float], None] | None = None,
    stop: threading.Event | None = None,
) -> None:
    """Send ``action``'s input events and wait until they are delivered (``sync``).

    ``pause`` is the seeds' delays (``ToolContext.pause``): between reaching a point and
    pressing there, and after the action (None: no delays, as the qwen and UI-TARS tool
    sets have for all but clicks). Keys a :class:`Click` holds stay down until its delay
    is over. A :class:`Hold` ends early when ``stop`` is set. :class:`Wait` and
    :class:`Zoom` send nothing.
    """
    wait = pause or _no_pause
    if isinstance(action, Hold):
        with hands.hold(action.combo):
            hands.sync()
            deadline = time.monotonic() + action.seconds
            while not (stop is not None and stop.is_set()) and time.monotonic() < deadline:
                time.sleep(min(0.02, max(0.0, deadline - time.monotonic())))
        return
    if isinstance(action, (Wait, Zoom)):
        return
    with ExitStack() as held:
        if isinstance(action, Click):
            if action.hold:
                held.enter_context(hands.hold(action.hold))
            if action.point is None:
                hands.click(None, None, action.button, action.count)
            else:
                x, y = action.point
                hands.move(x, y)
                wait(0.06)
                hands.click(x, y, action.button, action.count)
        elif isinstance(action, MoveMouse):
            hands.move(*action.point)
        elif isinstance(action, Scroll):
            if action.point is None:
                hands.scroll(None, None, dy=action.dy, dx=action.dx)
            else:
                x, y = action.point
                hands.move(x, y)
                wait(0.06)
                hands.scroll(x, y, dy=action.dy, dx=action.dx)
        elif isinstance(action, Drag):
            start = action.start if action.start is not None else hands.position()
            if action.steps is None and action.duration is None:
                hands.drag(start, action.end)
            else:
                hands.drag(
                    start,
                    action.end,
                    duration=0.3 if action.duration is None else action.duration,
                    steps=20 if action.steps is None else action.steps,
                )
        elif isinstance(action, TypeText):
            hands.type_text(action.text)
        elif isinstance(action, KeyPress):
            hands.key(action.combo)
        else:
            assert_never(action)
        hands.sync()
        wait(_AFTER[action.kind])
