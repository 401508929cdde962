"""Mutter with two monitors and display scales 1.0, 2.0 and 1.25: a click sent at a physical
pixel lands on that pixel of the monitor's native GTK window (the app reports logical
coordinates: physical / scale), the capture of each monitor is its physical 1920x1080
picture, and the backends follow Mutter when a scale change closes their session.

One compositor for the module (two virtual monitors, fractional scaling on)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import numpy as np
import pytest
from _mutter_tier import GtkApp, block_colors, started_desktop

from deskpilot.capture._mutter import MutterBackend
from deskpilot.geometry import Rect
from deskpilot.input import InputController
from deskpilot.testing._mutter import MutterDesktop, set_monitor_scale

pytestmark = [pytest.mark.mutter]

POINTS = [(700, 500), (0, 0), (1919, 1079), (1234, 777)]


@pytest.fixture(scope="module")
def desktop() -> Iterator[MutterDesktop]:
    with started_desktop(((1920, 1080), (1920, 1080)), fractional_scaling=True) as session:
        yield session


@pytest.fixture(scope="module")
def hands(desktop: MutterDesktop) -> Iterator[InputController]:
    with InputController("mutter") as controller:
        yield controller


def _clicks_land(desktop: MutterDesktop, hands: InputController, scale: float) -> None:
    for monitor in (0, 1):
        app = GtkApp(desktop, monitor)
        try:
            origin = (1920 * monitor, 0)
            app.wait_in_place(hands, origin, scale)
            assert app.ready["width"] == round(1920 / scale)
            for x, y in POINTS:
                app.drain()
                hands.click(origin[0] + x, origin[1] + y)
                event = app.wait("click")
                assert (event["x"], event["y"]) == pytest.approx((x / scale, y / scale), abs=0.5 / scale), (
                    scale, monitor, (x, y))
        finally:
            app.close()


def test_two_monitors_side_by_side(desktop: MutterDesktop, hands: InputController) -> None:
    assert hands.desktop.as_tuple() == (0, 0, 3840, 1080)
    capture = MutterBackend(cursor=False)
    try:
        monitors = capture.monitors()
        assert [(m.rect.as_tuple(), m.primary, m.name) for m in monitors] == [
            ((0, 0, 1920, 1080), True, "Meta-0"), ((1920, 0, 1920, 1080), False, "Meta-1")]
        app = GtkApp(desktop, 1)
        try:
            app.wait_in_place(hands, (1920, 0))
            expected = block_colors(1920, 1080)
            mask = np.ones((1080, 1920), bool)
            mask[:120, :700] = False  # the entry
            deadline = time.monotonic() + 5
            while True:
                bgra = capture.grab_bgra(monitors[1].rect)
                same = np.array_equal(bgra[..., 2::-1][mask], expected[mask])
                if same or time.monotonic() > deadline:
                    break
                time.sleep(0.05)
            assert same
        finally:
            app.close()
    finally:
        capture.close()
    _clicks_land(desktop, hands, 1.0)


@pytest.mark.parametrize("scale", [2.0, 1.25])
def test_clicks_land_on_the_pixel_sent_at_scale(desktop: MutterDesktop, hands: InputController,
                                                scale: float) -> None:
    set_monitor_scale(desktop, scale)
    # Mutter closed the sessions: the backends open new ones on their next call.
    _clicks_land(desktop, hands, scale)
    capture = MutterBackend(cursor=False)
    try:
        # The streams stay physical: 1920x1080 each, side by side.
        assert [m.rect.as_tuple() for m in capture.monitors()] == [(0, 0, 1920, 1080), (1920, 0, 1920, 1080)]
        assert capture.grab_bgra(Rect(1920, 0, 1920, 1080)).shape == (1080, 1920, 4)
    finally:
        capture.close()
