"""Comparing a new screenshot with the recorded one, with a tolerance (``--input real``).

Two frames are *the same screen* when at most ``max_fraction`` of their pixels differ by
more than ``pixel_tolerance`` in some channel. The exact test runs first through the
imaging core (:func:`deskpilot.imaging.changed_region`), so identical frames cost one
pass; only frames that differ are measured with numpy. The report names the bounding
box of the pixels over the tolerance (image pixels), so a reader sees where.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from deskpilot import imaging

__all__ = ["FrameTolerance", "ScreenCheck", "compare_frames"]

U8 = npt.NDArray[np.uint8]


@dataclass(frozen=True, slots=True)
class FrameTolerance:
    """``pixel_tolerance``: per-channel difference (0..255) that still counts as equal;
    ``max_fraction``: share of pixels (0..1) allowed to exceed it."""

    pixel_tolerance: int = 32
    max_fraction: float = 0.01

    def __post_init__(self) -> None:
        if not 0 <= self.pixel_tolerance <= 255:
            raise ValueError(f"pixel tolerance must be 0..255, got {self.pixel_tolerance}")
        if not 0.0 <= self.max_fraction <= 1.0:
            raise ValueError(f"the share of differing pixels must be 0..1, got {self.max_fraction}")


@dataclass(frozen=True, slots=True)
class ScreenCheck:
    """One recorded screenshot compared with the one the replay produced."""

    request: int  # the model request that carried the new screenshot
    turn: int | None  # the turn that recorded the screenshot
    screenshot: str  # recorded file name
    differing: float  # share of pixels over the per-pixel tolerance
    region: tuple[int, int, int, int] | None  # (x, y, w, h) in image pixels, None = identical
    ok: bool
    detail: str = ""

    def describe(self) -> str:
        where = f" in x={self.region[0]} y={self.region[1]} {self.region[2]}x{self.region[3]}" if self.region else ""
        verdict = "same screen" if self.ok else "DIFFERENT SCREEN"
        extra = f" ({self.detail})" if self.detail else ""
        turn = f"turn {self.turn}, " if self.turn is not None else ""
        return f"request {self.request} ({turn}{self.screenshot}): {verdict}, {self.differing:.2%} of pixels differ{where}{extra}"

    def as_dict(self) -> dict[str, object]:
        return {
            "request": self.request,
            "turn": self.turn,
            "screenshot": self.screenshot,
            "differing": round(self.differing, 6),
            "region": list(self.region) if self.region else None,
            "ok": self.ok,
            "detail": self.detail,
        }


def compare_frames(recorded: U8, replayed: U8, tolerance: FrameTolerance) -> tuple[float, tuple[int, int, int, int] | None, str]:
    """``(share of differing pixels, their bounding box or None, detail)``."""
    if recorded.shape != replayed.shape:
        h, w = recorded.shape[:2]
        return 1.0, (0, 0, w, h), f"size {replayed.shape[1]}x{replayed.shape[0]} instead of {w}x{h}"
    exact = imaging.changed_region(recorded, replayed)
    if exact is None:
        return 0.0, None, ""
    x, y, w, h = exact
    a = recorded[y : y + h, x : x + w].astype(np.int16)
    b = replayed[y : y + h, x : x + w].astype(np.int16)
    over = np.abs(a - b).max(axis=2) > tolerance.pixel_tolerance
    count = int(over.sum())
    if count == 0:
        return 0.0, None, f"differences within the tolerance in x={x} y={y} {w}x{h}"
    rows = np.flatnonzero(over.any(axis=1))
    cols = np.flatnonzero(over.any(axis=0))
    box = (x + int(cols[0]), y + int(rows[0]), int(cols[-1] - cols[0] + 1), int(rows[-1] - rows[0] + 1))
    total = recorded.shape[0] * recorded.shape[1]
    return count / total, box, ""
