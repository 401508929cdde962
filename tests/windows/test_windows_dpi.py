"""DPI awareness on real Windows: set (or found set) per-monitor, reported, and in effect."""

from __future__ import annotations

import sys
from typing import Any

import pytest

pytestmark = [
    pytest.mark.windows,
    pytest.mark.skipif(sys.platform != "win32", reason="needs real Windows"),
]


def test_per_monitor_awareness_is_reported(dpi_awareness: Any) -> None:
    print(dpi_awareness.describe())  # shown with -rA / on failure: which step did it and why
    assert dpi_awareness.ok, dpi_awareness.describe()
    assert dpi_awareness.per_monitor, dpi_awareness.describe()
    assert dpi_awareness.attempts and dpi_awareness.attempts[-1].outcome in ("set", "already_set")
    assert dpi_awareness.attempts[-1].function == dpi_awareness.method
    # The level is the OS's answer after the chain, not the level a step asked for.
    assert dpi_awareness.reported_by is not None, dpi_awareness.describe()


def test_the_display_runs_at_the_scaling_the_tier_configured() -> None:
    """The Windows tier runs at LogPixels 120 (125 %), the users' setting: every click and
    capture test of this tier then checks physical pixels at 125 %, not at 100 %."""
    import ctypes
    import os

    expected = os.environ.get("DESKPILOT_EXPECT_LOGPIXELS")
    if not expected:
        pytest.skip("not run by the Windows tier (DESKPILOT_EXPECT_LOGPIXELS unset)")
    user32 = ctypes.WinDLL("user32")
    gdi32 = ctypes.WinDLL("gdi32")
    user32.GetDC.restype = ctypes.c_void_p
    user32.ReleaseDC.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    gdi32.GetDeviceCaps.argtypes = [ctypes.c_void_p, ctypes.c_int]
    dc = user32.GetDC(None)
    try:
        logpixels = gdi32.GetDeviceCaps(dc, 88)  # LOGPIXELSX
    finally:
        user32.ReleaseDC(None, dc)
    assert logpixels == int(expected)


def test_awareness_is_in_effect_for_this_thread(dpi_awareness: Any) -> None:
    from deskpilot._win32 import system_library

    user32 = system_library("user32")
    if not user32.has("GetThreadDpiAwarenessContext"):
        pytest.skip("Windows older than 10 1607")
    context = user32.GetThreadDpiAwarenessContext()
    assert (
        user32.GetAwarenessFromDpiAwarenessContext(context) == 2
    )  # DPI_AWARENESS_PER_MONITOR_AWARE


def test_second_call_is_cached_and_identical(dpi_awareness: Any) -> None:
    from deskpilot._win32 import ensure_dpi_awareness

    assert ensure_dpi_awareness() is dpi_awareness


def test_setting_again_is_recognised_as_already_set(dpi_awareness: Any) -> None:
    from deskpilot._win32 import set_dpi_awareness, system_library

    again = set_dpi_awareness(system_library("user32"), system_library("shcore"))
    assert again.ok and again.per_monitor, again.describe()
    assert again.attempts[-1].outcome == "already_set", again.describe()
