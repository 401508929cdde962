"""The screen of a dry replay: the recorded screenshots, played back in the run's order.

:class:`RecordedScreen` is a :class:`deskpilot.agent.Screen`. It does not know about
turns: the replay server tells it, through :meth:`RecordedScreen.advance`, how many model
answers have been given, and it shows the first recorded frame captured at or after that
point (see :meth:`deskpilot.rundir._reader.Recording.capture_index`). Between two
answers the screen is still, so the loop's settle sees two equal probes at once.

Frames are the decoded PNGs the model was sent, so a replayed observation has the same
pixels, and therefore the same digest, as the recorded one. What cannot be reproduced
from them is documented in :mod:`deskpilot.replay._compare`.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from deskpilot import imaging
from deskpilot.agent import Probe, Shot
from deskpilot.geometry import Mapping, Rect
from deskpilot.rundir import Recording, decode_png

__all__ = ["RecordedScreen", "decode_png"]

U8 = npt.NDArray[np.uint8]


class RecordedScreen:
    """A :class:`~deskpilot.agent.Screen` over a recording's screenshots (see module doc)."""

    def __init__(
        self,
        recording: Recording,
        *,
        area: Rect,
        image_size: tuple[int, int],
        monitor: int = 1,
        pointer: Callable[[], tuple[int, int] | None] | None = None,
    ) -> None:
        self.monitor = monitor
        self.area = area
        self.image_size = image_size
        self._recording = recording
        self._pointer = pointer
        self._lock = threading.Lock()
        self._answers = 0
        self._cache: dict[str, U8] = {}
        full = [(i, n, t) for i, n, z, t in recording.frame_schedule() if not z and recording.resolve(n)]
        zooms = [(i, n, t) for i, n, z, t in recording.frame_schedule() if z and recording.resolve(n)]
        self._full_index = [i for i, _, _ in full]
        self._full = full
        self._zooms = {i: n for i, n, _ in zooms}
        #: Names of the frames served, in order (for tests and the replay report).
        self.served: list[str] = []
        self.missing_frames = not full

    # ------------------------------------------------------------------ driving
    def advance(self, answers: int) -> None:
        """``answers`` model answers have been given (called by the replay server)."""
        with self._lock:
            self._answers = answers

    def _frame_name(self) -> str | None:
        with self._lock:
            answers = self._answers
        if not self._full:
            return None
        # The first frame captured at or after this point; past the end, the last one.
        pos = bisect.bisect_left(self._full_index, answers)
        return self._full[min(pos, len(self._full) - 1)][1]

    def _load(self, name: str) -> U8:
        frame = self._cache.get(name)
        if frame is None:
            path = self._recording.resolve(name)
            assert path is not None  # only resolvable names are scheduled
            frame = decode_png(path)
            self._cache[name] = frame
        return frame

    def _current(self) -> tuple[str | None, U8]:
        name = self._frame_name()
        if name is None:
            w, h = self.image_size
            blank = np.zeros((h, w, 3), np.uint8)
            return None, blank
        return name, self._load(name)

    def _position(self) -> tuple[int, int] | None:
        return self._pointer() if self._pointer is not None else None

    # ------------------------------------------------------------------ Screen
    def probe(self) -> Probe:
        _, rgb = self._current()
        return imaging.frame_digest(rgb), self._position()

    def grab(self) -> Shot:
        name, rgb = self._current()
        if name is not None:
            self.served.append(name)
        h, w = rgb.shape[:2]
        return Shot(rgb, Mapping(self.area, w, h), imaging.frame_digest(rgb), self._position())

    #: The recorded frames have no cursor problem, and no probe pixels to reuse.
    cursor_problem: str | None = None
    keeps_probe_pixels = False

    def grab_probed(self, *, pixel_digest: bool = True) -> Shot:
        return self.grab()

    def grab_region(self, rect: Rect) -> Shot:
        inside = rect.intersect(self.area) or self.area
        with self._lock:
            answers = self._answers
        zoom = self._zooms.get(answers)
        if zoom is not None:
            # A zoom crop: what the recorded run showed for the rectangle it computed;
            # a different rectangle now shows up as a different observation mapping.
            rgb = self._load(zoom)
            self.served.append(zoom)
        else:
            name, rgb = self._current()
            if name is not None:
                self.served.append(name)
        h, w = rgb.shape[:2]
        return Shot(rgb, Mapping(inside, w, h), imaging.frame_digest(rgb), self._position(), zoomed=True)

    def close(self) -> None:
        self._cache.clear()
