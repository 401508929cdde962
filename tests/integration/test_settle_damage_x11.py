"""Settling on X DAMAGE on a real X server: the watcher sees a real app draw, and the agent's
settled image (made from the settled probe's pixels, no second grab) shows the app's
repaint after a click.

Issue 20, on a Tk app whose reactions take time (:mod:`deskpilot.testing._settle_app`), with
DAMAGE and with polling and default settings: the image sent after each click equals the
screen once the app is done (grabbed by the model server when the next request arrives, after
every reaction has ended), a click without visible effect ends at the first-reaction bound as
``no_reaction``, and a spinner that never stops ends at ``settle_max`` as still changing."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from deskpilot._x11._damage import DamageWatcher
from deskpilot.agent import iter_turns, load_config, load_summary, run_agent
from deskpilot.geometry import Rect
from deskpilot.input import InputController
from deskpilot.testing import ModelServer, Reply, ScriptedPolicy
from deskpilot.testing._demo import DemoApp
from deskpilot.testing._demo_app import TARGET_RGB
from deskpilot.testing._settle_app import ANIM_DONE_RGB, LATE_DONE_RGB, LATE_MS

pytestmark = pytest.mark.x11

CLICKED_RGB = (0, 200, 0)  # _demo_app.CLICKED_COLOR


@pytest.fixture(autouse=True)
def pointer_back(xvfb: str) -> Iterator[None]:
    """Put the pointer back where it was: the X server is shared by the whole session,
    and later tests look at pixels where these tests leave it."""
    with InputController("xtest") as hands:
        where = hands.position()
        yield
        hands.move(*where)


@pytest.fixture
def app(xvfb: str, tmp_path: Path) -> Iterator[DemoApp]:
    with DemoApp(tmp_path / "events.jsonl") as demo:
        yield demo


def _center(app: DemoApp) -> tuple[int, int]:
    x, y, w, h = app.widgets["target"]
    return x + w // 2, y + h // 2


def test_watcher_reports_a_real_repaint(app: DemoApp) -> None:
    with DamageWatcher() as watcher, InputController("xtest") as hands:
        watcher.drain()
        hands.click(*_center(app))  # the target turns green
        app.wait_for(lambda r: r.get("type") == "target_clicked")
        seen = 0
        deadline = time.monotonic() + 5.0
        while not seen and time.monotonic() < deadline:
            seen = watcher.drain()
            time.sleep(0.005)
        assert seen >= 1


def test_watcher_counts_only_drawing_on_its_area(app: DemoApp) -> None:
    x, y, w, h = app.widgets["target"]
    with (
        DamageWatcher(Rect(x, y, w, h)) as on_target,
        DamageWatcher(Rect(1910, 1070, 10, 10)) as corner,  # nothing there changes
        InputController("xtest") as hands,
    ):
        on_target.drain()
        corner.drain()
        hands.click(*_center(app))  # the target turns green
        app.wait_for(lambda r: r.get("type") == "target_clicked")
        seen = 0
        deadline = time.monotonic() + 5.0
        while not seen and time.monotonic() < deadline:
            seen = on_target.drain()
            time.sleep(0.005)
        time.sleep(0.1)  # whatever else the click redraws has been reported by now
        assert seen >= 1  # the boxes in the events are read right (root coordinates)
        assert corner.drain() == 0


def _run(tmp_path: Path, app: DemoApp, **flags: Any) -> Any:
    cx, cy = _center(app)
    box = [
        cx * 1000 // 1920 - 5,
        cy * 1000 // 1080 - 5,
        cx * 1000 // 1920 + 5,
        cy * 1000 // 1080 + 5,
    ]
    script = [Reply(tool_calls=[("click_element", {"label": "TARGET", "box": box})]), "Done."]
    with ModelServer(ScriptedPolicy(script), validate=False) as server:
        cfg = load_config(
            flags={
                "model.endpoint": server.endpoint,
                "run.runs_dir": str(tmp_path / "runs"),
                "screen.image_width": 960,
                "screen.image_height": 540,
                **flags,
            },
            env={},
            search_default=False,
        )
        return run_agent(cfg, "click the target", handle_signals=False)


def _pixel(run_dir: Path, name: str, xy: tuple[int, int]) -> tuple[int, int, int]:
    with Image.open(run_dir / name) as img:
        return tuple(img.convert("RGB").getpixel(xy))  # type: ignore[return-value]


@pytest.mark.parametrize("signal", ["damage", "poll"])
def test_the_settled_image_shows_the_repaint(app: DemoApp, tmp_path: Path, signal: str) -> None:
    result = _run(tmp_path, app, **{"agent.settle_signal": signal})
    assert result.outcome == "answered", result.error
    assert load_summary(result.run_dir)["settle_signal"] == signal
    turns = list(iter_turns(result.run_dir))
    click = turns[1]
    assert click["result"]["changed"] is True
    assert ("damage" in click["settle"]) is (signal == "damage")
    if signal == "damage":
        assert click["settle"]["stable"] is True
    x, y, w, h = app.widgets["target"]
    spot = ((x + w // 6) // 2, (y + h // 6) // 2)  # inside the target, clear of its label
    # The first image shows the magenta target; the image after the click (made from
    # the settled probe's pixels) the green one: taken after the app's repaint.
    assert _pixel(result.run_dir, turns[0]["observation"]["screenshot"], spot) == TARGET_RGB
    assert _pixel(result.run_dir, click["observation"]["screenshot"], spot) == CLICKED_RGB


# --- issue 20: a settle that is never early ------------------------------------------

IMAGE = (960, 540)
#: Every reaction of the settle app has ended this long after its click (the spinner never does).
DONE_S = 1.0


class FinalFrames(ScriptedPolicy):
    """The script; at each request, after waiting for the app to finish whatever the last
    action started, the screen as the agent's capture makes it (same size, cursor drawn):
    what the image sent with that request must equal."""

    def __init__(self, replies: list[Any]) -> None:
        super().__init__(replies)
        self.frames: dict[int, np.ndarray] = {}

    def respond(self, request: Any) -> Any:
        from deskpilot.capture import Capturer

        position = self.position
        time.sleep(DONE_S)
        with Capturer(cursor=True) as capturer:
            self.frames[position] = capturer.grab(size=IMAGE).rgb.copy()
        return super().respond(request)


def _box(rect: list[int]) -> list[int]:
    x, y, w, h = rect
    cx, cy = x + w // 3, y + h // 3  # clear of labels, inside the area
    return [cx * 1000 // 1920 - 3, cy * 1000 // 1080 - 3, cx * 1000 // 1920 + 3, cy * 1000 // 1080 + 3]


def _png(run_dir: Path, name: str) -> np.ndarray:
    with Image.open(run_dir / name) as img:
        return np.asarray(img.convert("RGB"))


def run_settle_script(tmp_path: Path, app: DemoApp, flags: dict[str, Any]) -> tuple[Any, FinalFrames]:
    widgets = app.widgets
    script: list[Any] = [
        Reply(tool_calls=[("click_element", {"label": area, "box": _box(widgets[area])})])
        for area in ("late", "anim", "dead", "spin")
    ]
    policy = FinalFrames([*script, "Done."])
    with ModelServer(policy, validate=False) as server:
        cfg = load_config(
            flags={
                "model.endpoint": server.endpoint,
                "run.runs_dir": str(tmp_path / "runs"),
                "screen.image_width": IMAGE[0],
                "screen.image_height": IMAGE[1],
                **flags,
            },
            env={},
            search_default=False,
        )
        return run_agent(cfg, "click the areas", handle_signals=False), policy


@pytest.fixture
def settle_app(xvfb: str, tmp_path: Path) -> Iterator[DemoApp]:
    with DemoApp(tmp_path / "settle-events.jsonl", module="deskpilot.testing._settle_app") as target:
        yield target


@pytest.mark.parametrize("signal", ["damage", "poll"])
def test_the_image_after_each_click_is_the_apps_final_frame(
    settle_app: DemoApp, tmp_path: Path, signal: str
) -> None:
    result, policy = run_settle_script(tmp_path, settle_app, {"agent.settle_signal": signal})
    assert result.outcome == "answered", result.error
    assert load_summary(result.run_dir)["settle_signal"] == signal
    turns = list(iter_turns(result.run_dir))
    late, anim, dead, spin = turns[1:5]
    seen = {t["tool_call"]["arguments"]["label"]: (t["settle"], t["timings"]) for t in turns[1:5]}
    events = settle_app.events()
    assert [e["widget"] for e in events if e["type"] == "press"] == ["late", "anim", "dead", "spin"]

    # The late reaction (nothing drawn for LATE_MS) was waited for: the new colour was sent.
    assert late["settle"]["ended"] == "quiet" and late["result"]["changed"] is True, seen
    assert late["settle"]["first_reaction_ms"] >= LATE_MS * 0.8, seen
    # The animation was waited out to its last frame.
    # (Its frames may all have been drawn during a slow click: the final frame is what counts.)
    assert anim["settle"]["ended"] == "quiet" and anim["settle"]["frames"] >= 1, seen
    assert any(e["type"] == "anim_done" for e in events)
    # Each of them: the image sent is the app's final frame, pixel for pixel.
    for number in (0, 1, 2, 3):
        sent = _png(result.run_dir, turns[number]["observation"]["screenshot"])
        assert np.array_equal(sent, policy.frames[number]), f"turn {number}: not the app's final frame; {seen}"
    x, y, w, h = settle_app.widgets["late"]
    assert tuple(policy.frames[1][(y + h // 2) * IMAGE[1] // 1080, (x + w - 4) * IMAGE[0] // 1920]) == LATE_DONE_RGB
    x, y, w, h = settle_app.widgets["anim"]
    assert tuple(policy.frames[2][(y + h // 2) * IMAGE[1] // 1080, (x + w - 4) * IMAGE[0] // 1920]) == ANIM_DONE_RGB

    # No visible effect: the first-reaction bound (0.3 s by default), reported honestly.
    assert dead["settle"]["ended"] == "no_reaction" and dead["settle"]["stable"] is True, seen
    assert dead["settle"]["waited_ms"] >= 300 and "first_reaction_ms" not in dead["settle"]
    assert dead["result"]["changed"] is False
    # A spinner never stops: settle_max (1.5 s), marked still changing.
    assert spin["settle"]["ended"] == "max" and spin["settle"]["stable"] is False, seen
    assert spin["settle"]["waited_ms"] >= 1500 and spin["result"]["changed"] is True
