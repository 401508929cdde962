"""``--input real`` on a real X server: a run recorded against the Tk demo app is executed
again (real capture, real XTest input, the replay server instead of the model), each new
screenshot compared with the recorded one, stopping at the first that differs."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from deskpilot.agent import load_config, run_agent
from deskpilot.replay import (
    FrameTolerance,
    ReplayOptions,
    format_result,
    load_recording,
    replay_run,
)
from deskpilot.testing import ModelServer, PixelPolicy
from deskpilot.testing._demo import DemoApp
from deskpilot.testing._demo_app import TARGET_RGB

pytestmark = pytest.mark.x11

TEXT = "replayed ✓"


def record(tmp_path: Path) -> Path:
    with DemoApp(tmp_path / "recorded_events.jsonl") as app:
        policy = PixelPolicy(TARGET_RGB, label="TARGET", text=TEXT, key="enter", steps=("click", "type", "key", "done"))
        with ModelServer(policy) as server:
            config = load_config(
                flags={
                    "model.endpoint": server.endpoint,
                    "run.runs_dir": str(tmp_path / "runs"),
                    "run.quiet": True,
                    "screen.image_width": 480,
                    "screen.image_height": 270,
                    # The replay must see what the recording saw. With the default settle_min
                    # of 0, a Tk app that repaints later than the 10 ms quiet interval (a
                    # loaded CI machine) leaves the typed text out of one recorded frame, and
                    # the replay, on time, diverges: give late repaints 100 ms in both runs
                    # (the replay takes the recorded config).
                    "agent.settle_min": 0.1,
                },
                env={},
                search_default=False,
            )
            result = run_agent(config, "Click the TARGET, type the text, press Enter.", handle_signals=False)
        app.wait_for(lambda r: r.get("type") == "submitted", timeout=5)
    assert result.outcome == "answered", result.error
    return result.run_dir


@pytest.fixture(scope="module")
def recorded(xvfb: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return record(tmp_path_factory.mktemp("recorded"))


def test_real_replay_re_executes_the_run_and_sees_the_same_screens(recorded: Path, tmp_path: Path) -> None:
    with DemoApp(tmp_path / "events.jsonl") as app:
        result = replay_run(recorded, ReplayOptions(input="real"))
        app.wait_for(lambda r: r.get("type") == "submitted", timeout=5)
        events = app.events()
    assert result.ok, format_result(result)
    assert result.answers_replayed == result.answers_recorded == 4
    # Requests 1..4 each carried a new screenshot; all matched the recorded ones.
    assert [c.request for c in result.screen_checks] == [1, 2, 3, 4]
    assert all(c.ok for c in result.screen_checks), [c.describe() for c in result.screen_checks]
    assert [c.turn for c in result.screen_checks] == [0, 1, 2, 3]
    # The input really reached the app again: the click inside the target, the text, Enter.
    x, y, w, h = app.widgets["target"]
    clicks = [e for e in events if e.get("type") == "press" and e.get("button") == 1]
    assert any(x <= c["x"] < x + w and y <= c["y"] < y + h for c in clicks)
    assert [e["text"] for e in events if e.get("type") == "submitted"] == [TEXT]
    assert "screens:" in format_result(result) and "same screen" in format_result(result)


def test_real_replay_stops_at_the_first_screen_that_differs(recorded: Path) -> None:
    # No app on the display: the first screenshot is already another screen.
    result = replay_run(recorded, ReplayOptions(input="real"))
    assert not result.ok and result.stopped is not None
    (check,) = result.screen_checks
    assert (check.request, check.turn, check.ok) == (1, 0, False)
    assert check.differing > 0.01 and check.region is not None
    assert result.answers_replayed == 0  # nothing was executed on the wrong screen
    assert "DIFFERENT SCREEN" in format_result(result) and "stopped:" in format_result(result)


def test_real_replay_stops_mid_run_when_the_app_goes_away(recorded: Path, tmp_path: Path) -> None:
    app = DemoApp(tmp_path / "events.jsonl")

    def close_after_the_click() -> None:
        try:
            app.wait_for(lambda r: r.get("type") == "press", timeout=30)
        finally:
            app.close()

    closer = threading.Thread(target=close_after_the_click)
    closer.start()
    try:
        result = replay_run(recorded, ReplayOptions(input="real", tolerance=FrameTolerance(32, 0.01)))
    finally:
        closer.join(40)
        app.close()
    assert not result.ok and result.stopped is not None, format_result(result)
    failing = result.screen_checks[-1]
    assert not failing.ok and failing.request in (2, 3), format_result(result)
    assert all(c.ok for c in result.screen_checks[:-1])
    # What ran before the stop was compared with the recording and matched.
    assert not [d for d in result.divergences if d.turn < failing.request - 1], format_result(result)
    assert load_recording(recorded).complete


def test_dry_replay_of_a_run_recorded_on_x(recorded: Path) -> None:
    # Real capture (cursor drawn in, XFixes pointer), replayed on the recorded frames: the
    # screen-derived results (changed, changed_region) come out the same.
    result = replay_run(recorded)
    assert result.ok, format_result(result)
    assert not [n for n in result.notes if "not compared" in n], result.notes
