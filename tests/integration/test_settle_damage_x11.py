"""Settling on X DAMAGE on a real X server: the watcher sees a real app draw, and the agent's
settled image (made from the settled probe's pixels, no second grab) shows the app's
repaint after a click."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from deskpilot._x11._damage import DamageWatcher
from deskpilot.agent import iter_turns, load_config, load_summary, run_agent
from deskpilot.geometry import Rect
from deskpilot.input import InputController
from deskpilot.testing import ModelServer, Reply, ScriptedPolicy
from deskpilot.testing._demo import DemoApp
from deskpilot.testing._demo_app import TARGET_RGB

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
