"""The dry-run backend: records every primitive event, touches nothing.

This is the seeds' ``PHYSICAL_EXECUTION = False`` (the agent loop runs, nothing moves)
and the test double of :class:`~deskpilot.input.InputController`. Each record is a
dict with an ``action`` key and physical coordinates where the event has a place::

    {"action": "move", "x": 10, "y": 20}
    {"action": "button", "button": "left", "down": True, "x": 10, "y": 20}
    {"action": "wheel", "vertical": 3, "horizontal": 0, "x": 10, "y": 20}
    {"action": "key", "key": "ctrl", "down": True}
    {"action": "type", "text": "hello"}
"""

from __future__ import annotations

import threading
from typing import Any

from deskpilot.geometry import Rect
from deskpilot.input._base import Button
from deskpilot.input._keys import KeySpec

__all__ = ["DryBackend"]


class DryBackend:
    """Records events into :attr:`actions` over a pretend desktop (default 1920x1080)."""

    name = "dry"

    def __init__(self, desktop: Rect | None = None, position: tuple[int, int] | None = None) -> None:
        self._desktop = desktop or Rect(0, 0, 1920, 1080)
        d = self._desktop
        self._position = position or (d.left + d.width // 2, d.top + d.height // 2)
        self._lock = threading.Lock()
        self.actions: list[dict[str, Any]] = []
        self.closed = False

    def _record(self, action: dict[str, Any]) -> None:
        with self._lock:
            self.actions.append(action)

    def desktop(self) -> Rect:
        return self._desktop

    def move(self, x: int, y: int) -> None:
        self._position = (int(x), int(y))
        self._record({"action": "move", "x": int(x), "y": int(y)})

    def position(self) -> tuple[int, int]:
        return self._position

    def button(self, button: Button, down: bool) -> None:
        x, y = self._position
        self._record({"action": "button", "button": button, "down": down, "x": x, "y": y})

    def wheel(self, vertical: int, horizontal: int) -> None:
        x, y = self._position
        self._record({"action": "wheel", "vertical": vertical, "horizontal": horizontal, "x": x, "y": y})

    def key(self, key: KeySpec, down: bool) -> None:
        self._record({"action": "key", "key": key.name, "down": down})

    def type_text(self, text: str) -> None:
        self._record({"action": "type", "text": text})

    def sync(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True
