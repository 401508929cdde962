"""The settle on sway is never early: headless sway draws its cursor into every screencopy
frame (a software cursor, whatever ``overlay_cursor`` asks), so the pointer moving to the
click point changes the captured pixels. That must not count as the app's first reaction:
the settled screenshot after a click the app answers 120 ms later is the app's answer, and a
click without effect ends at the first-reaction bound as "no_reaction".

The app is the X11 settle tests' Tk app (tests/integration/apps/settle_tk_app.py) through
sway's Xwayland, full screen; the runs are full agent runs with ``--capture wlroots --input
wlroots`` and the scripted model (:mod:`_settle_check`), settling on screencopy's damage and on
polling. Pixels and record fields only.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from _settle_check import SIGNALS, mismatch, run_steps
from _sway import session_env, start_sway
from test_settle_toolkits_x11 import APPS, ToolkitApp

from deskpilot.testing._sway import SwaySession

pytestmark = [pytest.mark.sway, pytest.mark.wayland]

BACKENDS = {"screen.capture_backend": "wlroots", "screen.input_backend": "wlroots"}


@pytest.fixture(scope="module")
def sway() -> Iterator[SwaySession]:
    with start_sway(size=(1920, 1080), timeout=60.0) as session:
        yield session


@pytest.fixture(params=SIGNALS)
def signal(request: pytest.FixtureRequest) -> str:
    """Both settle drivers: screencopy's damage (copy_with_damage) and probe polling."""
    return str(request.param)


@pytest.fixture(scope="module")
def app(sway: SwaySession) -> Iterator[ToolkitApp]:
    with pytest.MonkeyPatch.context() as monkeypatch, session_env(monkeypatch, sway):
        monkeypatch.setenv("DISPLAY", sway.xwayland())
        started = ToolkitApp([sys.executable, str(APPS / "settle_tk_app.py")])
        try:
            yield started
        finally:
            started.close()


@pytest.fixture
def env(sway: SwaySession, app: ToolkitApp, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    with session_env(monkeypatch, sway) as found:
        yield found


def test_a_late_answer_is_waited_for_although_the_pointer_moved(app: ToolkitApp, env: dict[str, str],
                                                                tmp_path: Path, signal: str) -> None:
    """The first click moves the pointer across the screen (drawn into the frame at once);
    the app draws 120 ms after the click."""
    checks = run_steps(tmp_path, signal=signal, steps=[app.click("late"), app.click("late")], **BACKENDS)
    problems = [m for m in map(mismatch, checks) if m]
    assert not problems, "\n".join(problems)
    assert all(c.record["result"]["changed"] is True for c in checks)
    if signal == "damage":  # the app's drawing came as screencopy damage
        assert all(c.settle.get("damage", 0) >= 1 for c in checks), [c.settle for c in checks]
    print("\n[settle on sway]", signal, [c.settle for c in checks])


def test_a_click_without_effect_is_no_reaction(app: ToolkitApp, env: dict[str, str], tmp_path: Path,
                                              signal: str) -> None:
    [check] = run_steps(tmp_path, signal=signal, steps=[app.click("blank", changes=False)], **BACKENDS)
    assert check.settle.get("ended") == "no_reaction", str(check.settle)
    assert "first_reaction_ms" not in check.settle, str(check.settle)
    result = check.record["result"]
    assert result["changed"] is False or result.get("pointer_moved_only") is True, str(result)
    assert mismatch(check) is None


def test_the_probe_sees_the_app_not_the_pointer(app: ToolkitApp, env: dict[str, str]) -> None:
    """The digest the settle compares: equal after the pointer crossed an unchanged screen
    (its cursor drawn into every frame), different once the app drew."""
    from deskpilot.capture import Capturer
    from deskpilot.input import InputController

    with InputController("wlroots") as hands, Capturer("wlroots") as cap:
        before = cap.probe()[0]
        blank_x, blank_y, w, h = app.widgets["blank"]
        for x, y in [(blank_x + 10, blank_y + 10), (blank_x + w - 10, blank_y + h - 10), (300, 900)]:
            hands.move(x, y)
            hands.sync()
            assert cap.probe()[0] == before, (x, y)
        hands.click(*(v + d // 2 for v, d in zip(app.widgets["button"][:2], app.widgets["button"][2:], strict=True)))
        hands.sync()
        changed = False
        for _ in range(100):  # the label changes within a few frames
            if cap.probe()[0] != before:
                changed = True
                break
        assert changed


def test_screencopy_damage_notifies_drawing_and_only_drawing(app: ToolkitApp, env: dict[str, str]) -> None:
    import select
    import time

    from deskpilot.capture import Capturer
    from deskpilot.input import InputController

    with InputController("wlroots") as hands, Capturer("wlroots") as cap:
        hands.move(1910, 1070)
        hands.sync()
        # sway redraws its software cursor on a later output frame than the one the move
        # lands in (later still on a loaded machine): let that drawing pass, it is not the app's.
        time.sleep(0.5)
        damage = cap.backend.damage_source(1)  # type: ignore[attr-defined]
        try:
            time.sleep(0.3)
            assert damage.drain() == 0  # an idle app draws nothing
            x, y, w, h = app.widgets["button"]
            hands.click(x + w // 2, y + h // 2)
            drawn = 0
            deadline = time.monotonic() + 5
            while not drawn and time.monotonic() < deadline:
                select.select([damage], [], [], 0.5)
                drawn += damage.drain()
            assert drawn >= 1
        finally:
            damage.close()
