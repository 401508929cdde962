"""What the engine shows the panel, and what the panel hands back (seed 004's engine state ``S``).

One :class:`PanelState` per run. The engine publishes each turn (screenshot, parsed
reply, trail) and may wait for an injected reply (``POST /inject``) or for the browser's
annotated image (``POST /annotated``); the web handlers read snapshots and deliver those.

The engine and the web server usually share one event loop, but tests and ``deskpilot
panel`` may run the server on another thread, so every method is thread-safe and a
waiter is always resolved on the loop it waits in.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import struct
import threading
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

from deskpilot._errors import AnnotationRejected

__all__ = ["PHASES", "AnnotationRejected", "PanelState", "png_size"]

#: Engine phases, as ``GET /state`` reports them.
PHASES = (
    "starting",
    "waiting_inject",
    "executing",
    "capturing",
    "annotating",
    "waiting_annotated",
    "calling_model",
    "done",
    "error",
    "stopped",
)

_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def png_size(data: bytes) -> tuple[int, int] | None:
    """``(width, height)`` from a PNG's IHDR, or None when ``data`` is not a PNG."""
    if len(data) < 24 or not data.startswith(_PNG_SIGNATURE) or data[12:16] != b"IHDR":
        return None
    width, height = struct.unpack(">II", data[16:24])
    return (int(width), int(height))


def _resolve(future: asyncio.Future[Any], value: Any) -> None:
    def settle() -> None:
        if not future.done():
            future.set_result(value)

    # A closed loop raises RuntimeError: then nobody waits any more.
    with contextlib.suppress(RuntimeError):
        future.get_loop().call_soon_threadsafe(settle)


class PanelState:
    """The engine state behind ``/state``, ``/inject`` and ``/annotated``."""

    def __init__(
        self, *, config: Mapping[str, Any] | None = None, annotate: str = "native"
    ) -> None:
        self._lock = threading.Lock()
        self.annotate = annotate
        self.config_payload: dict[str, Any] = dict(config or {})
        self.phase = "starting"
        self.error: str | None = None
        self.turn = 0
        self.msg_id = 0
        self.pending_seq = 0
        self.annotated_seq = 0
        self.raw_png: bytes | None = None
        self.annotated_png: bytes | None = None
        self.image_size: tuple[int, int] | None = None
        self.observation = ""
        self.bboxes: list[dict[str, Any]] = []
        self.actions: list[dict[str, Any]] = []
        self.trail: list[list[dict[str, Any]]] = []
        self.rejected: list[dict[str, Any]] = []
        self.vlm_json = ""
        self._raw_b64: str | None = None
        self._injections: deque[str] = deque()
        self._inject_waiter: asyncio.Future[None] | None = None
        self._annotation_waiter: tuple[int, asyncio.Future[bytes]] | None = None

    # ------------------------------------------------------------------ engine side
    def set_phase(self, phase: str, error: str | None = None) -> None:
        if phase not in PHASES:
            raise ValueError(f"unknown phase {phase!r}; known: {', '.join(PHASES)}")
        with self._lock:
            self.phase = phase
            if error is not None or phase != "error":
                self.error = error

    def publish(
        self,
        *,
        turn: int,
        raw_png: bytes,
        image_size: tuple[int, int],
        observation: str,
        bboxes: Sequence[Mapping[str, Any]],
        actions: Sequence[Mapping[str, Any]],
        vlm_json: str,
        trail: Sequence[Sequence[Mapping[str, Any]]] = (),
        rejected: Sequence[Mapping[str, Any]] = (),
    ) -> None:
        """A new turn's screenshot (after its actions) and the reply that drove them."""
        with self._lock:
            self.turn = turn
            self.msg_id += 1
            self.pending_seq = turn
            self.raw_png = raw_png
            self._raw_b64 = None
            self.annotated_png = None
            self.image_size = image_size
            self.observation = observation
            self.bboxes = [dict(b) for b in bboxes]
            self.actions = [dict(a) for a in actions]
            self.trail = [[dict(a) for a in t] for t in trail]
            self.rejected = [dict(r) for r in rejected]
            self.vlm_json = vlm_json

    def set_annotated(self, seq: int, png: bytes) -> None:
        """The annotated image of turn ``seq`` (drawn by the engine, or received)."""
        with self._lock:
            self.annotated_png = png
            self.annotated_seq = seq

    async def wait_annotation(self, seq: int, timeout: float | None) -> bytes:
        """Wait until the panel posts the annotated PNG of turn ``seq``; TimeoutError after
        ``timeout`` s (None: no limit; cancelling the caller ends the wait)."""
        future: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        with self._lock:
            self._annotation_waiter = (seq, future)
            self.pending_seq = seq
            self.phase = "waiting_annotated"
        try:
            return await asyncio.wait_for(future, timeout)
        finally:
            with self._lock:
                if self._annotation_waiter is not None and self._annotation_waiter[1] is future:
                    self._annotation_waiter = None

    async def next_injection(self, timeout: float | None = None) -> str:
        """The next ``POST /inject`` text (queued ones first); TimeoutError after ``timeout`` s."""
        while True:
            with self._lock:
                if self._injections:
                    return self._injections.popleft()
                future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
                self._inject_waiter = future
            try:
                await asyncio.wait_for(future, timeout)
            finally:
                with self._lock:
                    if self._inject_waiter is future:
                        self._inject_waiter = None

    def take_injection(self) -> str | None:
        """A queued injection, if any (the engine checks between turns)."""
        with self._lock:
            return self._injections.popleft() if self._injections else None

    # ------------------------------------------------------------------ web side
    def inject(self, text: str) -> int:
        """Queue a model output; returns the queue length."""
        with self._lock:
            self._injections.append(text)
            waiter = self._inject_waiter
            queued = len(self._injections)
        if waiter is not None:
            _resolve(waiter, None)
        return queued

    def _check_seq_locked(self, seq: int) -> tuple[int, asyncio.Future[bytes]]:
        waiter = self._annotation_waiter
        if waiter is None or waiter[0] != seq or seq != self.pending_seq:
            state = (
                "not waiting for an annotated image"
                if waiter is None
                else f"waiting for seq {waiter[0]}"
            )
            raise AnnotationRejected(
                f"seq {seq} does not match pending_seq {self.pending_seq} ({state})",
                status=409,
                seq=seq,
                pending_seq=self.pending_seq,
            )
        return waiter

    def check_annotation_seq(self, seq: int) -> None:
        """Raise :class:`AnnotationRejected` (409) unless the engine waits for turn ``seq``
        (checked before the costlier image validation; :meth:`submit_annotation` checks again)."""
        with self._lock:
            self._check_seq_locked(seq)

    def submit_annotation(self, seq: int, png: bytes) -> None:
        """Deliver the browser's annotated image; raises :class:`AnnotationRejected`."""
        with self._lock:
            waiter = self._check_seq_locked(seq)
            size = png_size(png)
            if size is None:
                raise AnnotationRejected("image_b64 is not a PNG", status=422)
            if self.image_size is not None and size != self.image_size:
                raise AnnotationRejected(
                    f"annotated image is {size[0]}x{size[1]}, the screenshot is "
                    f"{self.image_size[0]}x{self.image_size[1]}",
                    status=422,
                )
            self._annotation_waiter = None
            self.annotated_png = png
            self.annotated_seq = seq
            future = waiter[1]
        _resolve(future, png)

    def snapshot(self, *, images: bool = True) -> dict[str, Any]:
        """The ``GET /state`` body (``raw_b64`` only with ``images``; base64 is computed once per turn)."""
        with self._lock:
            raw_b64 = None
            if images and self.raw_png is not None:
                if self._raw_b64 is None:
                    self._raw_b64 = base64.b64encode(self.raw_png).decode("ascii")
                raw_b64 = self._raw_b64
            return {
                "phase": self.phase,
                "error": self.error,
                "turn": self.turn,
                "msg_id": self.msg_id,
                "pending_seq": self.pending_seq,
                "annotated_seq": self.annotated_seq,
                "annotate": self.annotate,
                "waiting_annotation": self._annotation_waiter is not None,
                "image_size": list(self.image_size) if self.image_size else None,
                "raw_b64": raw_b64,
                "bboxes": self.bboxes,
                "actions": self.actions,
                "trail": self.trail,
                "rejected": self.rejected,
                "observation": self.observation,
                "vlm_json": self.vlm_json,
                "queued_injections": len(self._injections),
            }

    def image(self, which: str) -> bytes | None:
        with self._lock:
            return self.raw_png if which == "raw" else self.annotated_png
