"""A simulated desktop for loop tests without a display: a :class:`Screen` and :class:`Hands`.

The picture is a grey desktop with a coloured target button and a text field. It
reacts like the Tk demo app: clicking the target turns it green, clicking the field
focuses it, typed text is drawn as a bar whose length grows with the text, Enter marks
the text as submitted. Every input event is recorded in :attr:`SimulatedDesktop.events`.
It exists so mode tests (single, team, stateless) can run the real loop, the real
HTTP client and the real test server on any OS, in milliseconds; the integration
tests do the same on Xvfb with the real capture and XTest input.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import numpy.typing as npt

from deskpilot import imaging
from deskpilot.agent import Shot
from deskpilot.geometry import Mapping, Rect

__all__ = ["SimulatedDesktop"]

U8 = npt.NDArray[np.uint8]

TARGET_RGB = (255, 0, 255)
CLICKED_RGB = (0, 200, 0)
FIELD_RGB = (255, 255, 255)
FOCUS_RGB = (0, 120, 255)


class SimulatedDesktop:
    """``desktop.screen`` is the :class:`Screen`, ``desktop.hands`` the :class:`Hands`."""

    def __init__(
        self,
        size: tuple[int, int] = (1920, 1080),
        image_size: tuple[int, int] = (768, 432),
        *,
        target: Rect | None = None,
        field: Rect | None = None,
        origin: tuple[int, int] = (0, 0),
    ) -> None:
        self.area = Rect(origin[0], origin[1], size[0], size[1])
        self.image_size = image_size
        self.target = target or Rect(origin[0] + 880, origin[1] + 400, 160, 90)
        self.field = field or Rect(origin[0] + 660, origin[1] + 600, 600, 60)
        self.events: list[dict[str, Any]] = []
        self.target_clicks: list[tuple[int, int]] = []
        self.text = ""
        self.submitted: list[str] = []
        self.focused = False
        self.pointer = (origin[0] + size[0] // 2, origin[1] + size[1] // 2)
        self.held: list[str] = []
        self.buttons: list[str] = []
        self.grabs = 0
        self._lock = threading.Lock()
        self.monitor = 1
        self.screen = self  # the Screen protocol
        self.hands = self  # the Hands protocol

    # ------------------------------------------------------------------ picture
    def _local(self, rect: Rect) -> tuple[int, int, int, int]:
        return rect.left - self.area.left, rect.top - self.area.top, rect.width, rect.height

    def render(self) -> U8:
        """The full-resolution RGB picture of the desktop now."""
        with self._lock:
            img = np.full((self.area.height, self.area.width, 3), 60, np.uint8)
            x, y, w, h = self._local(self.target)
            img[y : y + h, x : x + w] = CLICKED_RGB if self.target_clicks else TARGET_RGB
            x, y, w, h = self._local(self.field)
            img[y : y + h, x : x + w] = FIELD_RGB
            if self.focused:
                img[y : y + 3, x : x + w] = FOCUS_RGB
            if self.text:
                bar = min(w - 8, 8 * len(self.text))
                shade = 40 + (sum(map(ord, self.text)) % 150)
                img[y + 20 : y + 40, x + 4 : x + 4 + bar] = shade
            if self.submitted:
                img[y + h - 8 : y + h, x : x + w] = (0, 160, 0)
        return img

    def probe(self) -> tuple[int, tuple[int, int] | None]:
        return imaging.frame_digest(self.render()), self.pointer

    def grab(self) -> Shot:
        self.grabs += 1
        rgb = imaging.downscale(self.render(), self.image_size)
        mapping = Mapping(self.area, self.image_size[0], self.image_size[1])
        return Shot(rgb, mapping, imaging.frame_digest(rgb), self.pointer)

    #: The picture is drawn whole: no cursor problem, no probe pixels to reuse.
    cursor_problem: str | None = None
    keeps_probe_pixels = False

    def grab_probed(self, *, pixel_digest: bool = True) -> Shot:
        return self.grab()

    def grab_region(self, rect: Rect) -> Shot:
        self.grabs += 1
        inside = rect.intersect(self.area) or self.area
        x, y, w, h = self._local(inside)
        rgb = np.ascontiguousarray(self.render()[y : y + h, x : x + w])
        return Shot(rgb, Mapping(inside, w, h), imaging.frame_digest(rgb), self.pointer, zoomed=True)

    def close(self) -> None:
        pass

    # ------------------------------------------------------------------ input
    def _event(self, **event: Any) -> None:
        with self._lock:
            self.events.append(event)

    def move(self, x: float, y: float) -> tuple[int, int]:
        self.pointer = (int(x), int(y))
        self._event(action="move", x=int(x), y=int(y))
        return self.pointer

    def position(self) -> tuple[int, int]:
        return self.pointer

    def click(self, x: float | None = None, y: float | None = None, button: Any = "left", count: int = 1) -> None:
        if x is not None and y is not None:
            self.pointer = (int(x), int(y))
        px, py = self.pointer
        self._event(action="click", x=px, y=py, button=button, count=count, held=list(self.held))
        if button != "left":
            return
        with self._lock:
            if self.target.contains(px, py):
                # Like the Tk demo app: the target hands the focus to the text field.
                self.target_clicks.append((px, py))
                self.focused = True
            else:
                self.focused = self.field.contains(px, py)

    def mouse_down(self, button: Any = "left") -> None:
        self.buttons.append(button)
        self._event(action="button", button=button, down=True)

    def mouse_up(self, button: Any = "left") -> None:
        if button in self.buttons:
            self.buttons.remove(button)
        self._event(action="button", button=button, down=False)

    def drag(self, start: Sequence[float], end: Sequence[float] | None = None, *, duration: float = 0.3, steps: int = 20) -> None:
        self._event(action="drag", start=[int(v) for v in start], end=[int(v) for v in end] if end else None)
        if end is not None:
            self.pointer = (int(end[0]), int(end[1]))

    def scroll(self, x: float | None = None, y: float | None = None, *, dy: int = 0, dx: int = 0) -> None:
        if x is not None and y is not None:
            self.pointer = (int(x), int(y))
        self._event(action="scroll", x=self.pointer[0], y=self.pointer[1], dy=dy, dx=dx)

    def type_text(self, text: str) -> None:
        self._event(action="type", text=text)
        if not self.focused:
            return
        # A newline is the Enter key, as every input backend types it (XTest: Return,
        # SendInput: VK_RETURN): it submits the field's text, like a key("enter").
        for index, line in enumerate(text.replace("\r\n", "\n").replace("\r", "\n").split("\n")):
            with self._lock:
                if index:
                    self.submitted.append(self.text)
                self.text += line

    def key(self, combo: str) -> None:
        self._event(action="key", key=combo)
        if combo.lower() in ("enter", "return") and self.focused:
            with self._lock:
                self.submitted.append(self.text)

    @contextmanager
    def hold(self, *keys: str) -> Iterator[SimulatedDesktop]:
        self.held.extend(keys)
        self._event(action="hold", keys=list(keys), down=True)
        try:
            yield self
        finally:
            for k in keys:
                self.held.remove(k)
            self._event(action="hold", keys=list(keys), down=False)

    def release_all(self) -> None:
        self._event(action="release_all", held=list(self.held), buttons=list(self.buttons))
        self.held.clear()
        self.buttons.clear()

    def sync(self) -> None:
        pass
