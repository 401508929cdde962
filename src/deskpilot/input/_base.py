"""What an input backend provides to the :class:`~deskpilot.input.InputController` facade.

Backends inject primitive events only. Click counts, drags, holds, combos and the
guarantee that every pressed key and button is released live in the facade, once,
for every OS.
"""

from __future__ import annotations

from typing import Any, Literal, Protocol, runtime_checkable

from deskpilot.geometry import Rect
from deskpilot.input._keys import KeySpec

__all__ = ["Button", "InputBackend", "RecordingBackend"]

Button = Literal["left", "right", "middle"]


class InputBackend(Protocol):
    """Primitive event injection in physical virtual-desktop pixels."""

    name: str

    def desktop(self) -> Rect:
        """The virtual desktop's bounding rectangle (moves are clamped into it)."""
        ...

    def move(self, x: int, y: int) -> None:
        """Move the pointer to an absolute physical position."""
        ...

    def position(self) -> tuple[int, int]:
        """Where the pointer is now."""
        ...

    def button(self, button: Button, down: bool) -> None:
        """Press or release a mouse button at the current position."""
        ...

    def wheel(self, vertical: int, horizontal: int) -> None:
        """Scroll by notches: ``vertical`` > 0 scrolls down, ``horizontal`` > 0 scrolls right."""
        ...

    def key(self, key: KeySpec, down: bool) -> None:
        """Press or release one key of the vocabulary."""
        ...

    def type_text(self, text: str) -> None:
        """Type arbitrary Unicode text exactly (astral characters included)."""
        ...

    def sync(self) -> None:
        """Block until every event sent so far has been delivered/processed."""
        ...

    def close(self) -> None:
        """Release OS resources. Idempotent."""
        ...


@runtime_checkable
class RecordingBackend(Protocol):
    """A backend that records the events it is sent instead of (or besides) sending them
    (``dry``): :attr:`deskpilot.input.InputController.actions` reads them."""

    actions: list[dict[str, Any]]
