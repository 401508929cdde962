"""The wlroots capture backend (sway, Hyprland, river...): ``wlr-screencopy-unstable-v1``
over the compositor's Wayland socket (:mod:`deskpilot._wayland._wlr`).

Each grab asks the compositor for the next frame of the output(s) ``rect`` covers and
lets it copy the pixels into a wl_shm buffer kept per output (a memfd mapped once): the
frame handed on is a numpy view of that mapping, no copy, valid until the next grab. A
rectangle spanning several outputs is assembled into one array (a copy, the only one).
Pixels are XRGB8888, BGRx in memory: the BGRA layout deskpilot's imaging reads.

The cursor: screencopy draws the compositor's own pointer into the frame when asked
(``overlay_cursor``), so ``cursor=True`` frames show the real cursor where it really is and
:meth:`WlrootsBackend.cursor` returns None (there is nothing left to composite).
``cursor=False`` asks for frames without it, which a compositor can honour only where the
cursor is on a hardware plane: with a software cursor (headless sway, measured) the cursor
is part of the output's pixels in every frame.

Output coordinates: physical pixels, each output at its layout position times its scale
(outputs of one scale tile exactly; see :class:`~deskpilot._wayland._wlr.WlrOutput`).
Rotated outputs (``transform``) are not handled.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Mapping

import numpy as np
import numpy.typing as npt

from deskpilot._errors import CaptureError
from deskpilot._wayland import WlrootsClient, WlrOutput
from deskpilot.capture._base import CursorImage, Monitor
from deskpilot.geometry import Rect

__all__ = ["WlrootsBackend"]

Pixels = npt.NDArray[np.uint8]


def _output_rect(output: WlrOutput) -> Rect:
    x, y = output.origin
    return Rect(x, y, output.physical[0], output.physical[1])


class WlrootsBackend:
    """Capture through wlr-screencopy. ``environ``: where to find the compositor (default
    ``os.environ``: ``WAYLAND_DISPLAY`` and ``XDG_RUNTIME_DIR``)."""

    name = "wlroots"
    _closed = True  # until __init__ has opened it: __del__ of a half-built object does nothing

    def __init__(self, *, cursor: bool = True, environ: Mapping[str, str] | None = None) -> None:
        self._client = WlrootsClient(CaptureError, ("screencopy",), environ)
        self._overlay_cursor = cursor
        self._lock = threading.Lock()
        self._closed = False

    def _check_open(self) -> None:
        if self._closed:
            raise CaptureError("the wlroots capture backend is closed")

    def monitors(self) -> list[Monitor]:
        self._check_open()
        with self._lock:
            outputs = self._client.refresh_outputs()
            # wlroots has no "primary output": the one at the layout's origin counts as primary
            # (the first announced where none is there).
            at_origin = [o for o in outputs if o.logical_position == (0, 0)]
            primary = at_origin[0] if at_origin else outputs[0]
            return [Monitor(index=i, rect=_output_rect(o), primary=o is primary, name=o.name)
                    for i, o in enumerate(outputs, start=1)]

    def _grab_output(self, output: WlrOutput) -> Pixels:
        buffer, y_inverted = self._client.capture(output, overlay_cursor=self._overlay_cursor)
        rows = np.frombuffer(buffer.memory, dtype=np.uint8).reshape(buffer.height, buffer.stride)
        pixels = rows[:, : buffer.width * 4].reshape(buffer.height, buffer.width, 4)
        if y_inverted:
            # The compositor says the rows are upside down (none measured here does).
            pixels = np.ascontiguousarray(pixels[::-1])
        return pixels

    def grab_bgra(self, rect: Rect) -> Pixels:
        """``rect`` as HxWx4 BGRA: a view on the output's shm buffer (valid until the next grab)."""
        self._check_open()
        with self._lock:
            outputs = [(o, _output_rect(o)) for o in self._client.outputs]
            for output, box in outputs:
                if box.contains(rect.left, rect.top) and rect.right <= box.right and rect.bottom <= box.bottom:
                    pixels = self._grab_output(output)
                    top, left = rect.top - box.top, rect.left - box.left
                    return pixels[top: top + rect.height, left: left + rect.width]
            out = np.zeros((rect.height, rect.width, 4), dtype=np.uint8)
            covered = False
            for output, box in outputs:
                left, top = max(rect.left, box.left), max(rect.top, box.top)
                right, bottom = min(rect.right, box.right), min(rect.bottom, box.bottom)
                if right <= left or bottom <= top:
                    continue
                pixels = self._grab_output(output)
                out[top - rect.top: bottom - rect.top, left - rect.left: right - rect.left] = \
                    pixels[top - box.top: bottom - box.top, left - box.left: right - box.left]
                covered = True
            if not covered:
                raise CaptureError(f"{rect.as_tuple()} is on no output", rect=list(rect.as_tuple()))
            return out

    def cursor(self) -> CursorImage | None:
        """None: the compositor draws the cursor into ``cursor=True`` frames itself."""
        self._check_open()
        return None

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with self._lock:
            self._client.close()

    def __del__(self) -> None:
        if not self._closed:
            with contextlib.suppress(Exception):
                self.close()
