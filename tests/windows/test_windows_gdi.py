"""GDI capture on real Windows: a Tk window with a known pattern, monitors, cursor, resources."""

from __future__ import annotations

import sys
import time
from typing import Any

import numpy as np
import pytest

from deskpilot.geometry import Rect

pytestmark = [
    pytest.mark.windows,
    pytest.mark.skipif(sys.platform != "win32", reason="needs real Windows (GDI)"),
]


def _expected_bgr(target: Any) -> np.ndarray:
    return np.ascontiguousarray(target.pattern[..., ::-1])  # RGB -> BGR


def _grab_until_equal(
    gdi: Any, target: Any, rect: Rect, expected: np.ndarray, timeout: float = 5.0
) -> np.ndarray:
    """Grab until the window has finished appearing (DWM animations) or the timeout."""
    deadline = time.monotonic() + timeout
    while True:
        target.pump(0.05)
        pixels = gdi.grab_bgra(rect)[..., :3].copy()
        if np.array_equal(pixels, expected) or time.monotonic() > deadline:
            return pixels


def test_capture_of_a_known_pattern_is_exact(target: Any, gdi: Any, sendinput: Any) -> None:
    sendinput.move(
        0, 0
    )  # keep the pointer off the pattern (GDI does not draw it, but hover effects might)
    x, y, width, height = target.rect(target.pattern_label)
    assert (width, height) == target.pattern.shape[1::-1]
    expected = _expected_bgr(target)
    pixels = _grab_until_equal(gdi, target, Rect(x, y, width, height), expected)
    mismatched = int(np.count_nonzero((pixels != expected).any(axis=-1)))
    assert mismatched == 0, f"{mismatched} of {width * height} pixels differ at {(x, y)}"


def test_capture_of_a_sub_rectangle_and_buffer_reuse(target: Any, gdi: Any) -> None:
    x, y, _, _ = target.rect(target.pattern_label)
    expected = _expected_bgr(target)[10:50, 20:100]
    first = _grab_until_equal(gdi, target, Rect(x + 20, y + 10, 80, 40), expected)
    np.testing.assert_array_equal(first, expected)
    a = gdi.grab_bgra(Rect(x + 20, y + 10, 80, 40))
    b = gdi.grab_bgra(Rect(x + 20, y + 10, 80, 40))
    assert a.__array_interface__["data"][0] == b.__array_interface__["data"][0]  # same DIB memory


def test_gdi_halftone_downscale_is_a_real_downscale(target: Any, dpi_awareness: Any) -> None:
    from deskpilot.capture._gdi import GdiBackend

    x, y, width, height = target.rect(target.pattern_label)
    expected = _expected_bgr(target).astype(np.float64)
    box = expected.reshape(height // 2, 2, width // 2, 2, 3).mean(axis=(1, 3))
    with GdiBackend(scale_mode="gdi") as backend:
        _grab_until_equal(backend, target, Rect(x, y, width, height), _expected_bgr(target))
        scaled = backend.grab_scaled(Rect(x, y, width, height), (width // 2, height // 2))[
            ..., :3
        ].astype(np.float64)
    assert scaled.shape == box.shape
    # HALFTONE is an area filter: close to the 2x2 box mean, far from a shifted or point-sampled image.
    assert np.abs(scaled - box).mean() < 12
    assert np.abs(scaled - expected[::2, ::2]).mean() > 20


def test_monitors_cover_the_virtual_desktop(gdi: Any, sendinput: Any) -> None:
    monitors = gdi.monitors()
    assert monitors and [m.index for m in monitors] == list(range(1, len(monitors) + 1))
    primaries = [m for m in monitors if m.primary]
    assert len(primaries) == 1 and (primaries[0].rect.left, primaries[0].rect.top) == (0, 0)
    left = min(m.rect.left for m in monitors)
    top = min(m.rect.top for m in monitors)
    right = max(m.rect.right for m in monitors)
    bottom = max(m.rect.bottom for m in monitors)
    assert sendinput.desktop().as_tuple() == (left, top, right - left, bottom - top)
    assert all(m.name.startswith("\\\\.\\") for m in monitors)


def test_cursor_matches_the_pointer(target: Any, gdi: Any, sendinput: Any) -> None:
    point = target.center(target.pad)
    sendinput.move(*point)
    sendinput.sync()
    target.pump(0.1)
    image = gdi.cursor()
    if image is None:
        pytest.skip("the cursor is hidden here (no pointing device on this machine)")
    assert image.position == sendinput.position() == point
    height, width = image.pixels.shape[:2]
    assert 0 <= image.hotspot[0] < width and 0 <= image.hotspot[1] < height
    assert image.pixels.shape[2] == (2 if image.kind == "mono" else 4)
    assert image.kind in ("straight", "masked", "mono")
    if image.kind == "straight":
        assert image.pixels[..., 3].any()
    again = gdi.cursor()
    assert again is not None and again.pixels is image.pixels  # cached per handle


def test_thousands_of_grabs_do_not_leak_gdi_objects(target: Any, dpi_awareness: Any) -> None:
    from deskpilot._win32 import system_library
    from deskpilot._win32._constants import GR_GDIOBJECTS
    from deskpilot.capture._gdi import GdiBackend

    user32, kernel32 = system_library("user32"), system_library("kernel32")
    process = kernel32.GetCurrentProcess()

    def gdi_objects() -> int:
        return int(user32.GetGuiResources(process, GR_GDIOBJECTS))

    x, y, _, _ = target.rect(target.pattern_label)
    with GdiBackend(cursor_cache_size=1) as backend:
        backend.grab_bgra(Rect(x, y, 64, 64))
        backend.cursor()
        before = gdi_objects()
        for index in range(2000):
            backend.grab_bgra(Rect(x, y, 64 + index % 2, 64))  # a new DIB every time
            if index % 10 == 0:
                backend.cursor()
        during = gdi_objects()
    after = gdi_objects()
    assert before > 0
    assert during - before <= 2, (before, during)
    assert after <= before, (before, after)
