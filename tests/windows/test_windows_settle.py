"""Issue 20 on the Windows backends: the polling settle over GDI probes, SendInput clicks, the
settle target app (:mod:`deskpilot.testing._settle_app`) run by the same Windows interpreter,
default settings.

The image sent after each click must be the app's final frame (grabbed by the model server
when the next request arrives, once every reaction has ended): after a reaction drawn
:data:`LATE_MS` ms late, and after a ~400 ms animation. A click without visible effect ends
at the first-reaction bound as ``no_reaction``; a spinner that never stops at ``settle_max``,
marked still changing. (tests/integration/test_settle_damage_x11.py checks the same on X11,
with DAMAGE and with polling.)
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = [
    pytest.mark.windows,
    pytest.mark.skipif(sys.platform != "win32", reason="needs the Win32 backends"),
]

IMAGE = (960, 540)
#: Every reaction of the settle app has ended this long after its click (the spinner never does).
DONE_S = 1.0


@pytest.fixture
def settle_app(dpi_awareness: Any, tmp_path: Path) -> Iterator[Any]:
    from deskpilot.testing._demo import DemoApp

    with DemoApp(tmp_path / "events.jsonl", module="deskpilot.testing._settle_app") as app:
        yield app


def _box(rect: list[int], screen: list[int]) -> list[int]:
    x, y, w, h = rect
    cx, cy = x + w // 3, y + h // 3  # clear of labels, inside the area
    sw, sh = screen
    return [cx * 1000 // sw - 3, cy * 1000 // sh - 3, cx * 1000 // sw + 3, cy * 1000 // sh + 3]


def test_the_image_after_each_click_is_the_apps_final_frame(settle_app: Any, tmp_path: Path) -> None:
    import numpy as np
    from PIL import Image

    from deskpilot.agent import iter_turns, load_config, load_summary, run_agent
    from deskpilot.capture import Capturer
    from deskpilot.testing import ModelServer, Reply, ScriptedPolicy
    from deskpilot.testing._settle_app import ANIM_DONE_RGB, LATE_DONE_RGB, LATE_MS

    class FinalFrames(ScriptedPolicy):
        """The script; at each request, once the app is done, the screen as the agent's
        capture makes it: what the image sent with that request must equal."""

        def __init__(self, replies: list[Any]) -> None:
            super().__init__(replies)
            self.frames: dict[int, Any] = {}

        def respond(self, request: Any) -> Any:
            position = self.position
            time.sleep(DONE_S)
            with Capturer(cursor=True) as capturer:
                self.frames[position] = capturer.grab(size=IMAGE).rgb.copy()
            return super().respond(request)

    widgets, screen = settle_app.widgets, settle_app.ready["screen"]
    script: list[Any] = [
        Reply(tool_calls=[("click_element", {"label": area, "box": _box(widgets[area], screen)})])
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
            },
            env={},
            search_default=False,
        )
        result = run_agent(cfg, "click the areas", handle_signals=False)
    assert result.outcome == "answered", result.error
    assert load_summary(result.run_dir)["settle_signal"] == "poll"
    turns = list(iter_turns(result.run_dir))
    late, anim, dead, spin = turns[1:5]
    seen = {t["tool_call"]["arguments"]["label"]: (t["settle"], t["timings"]) for t in turns[1:5]}
    events = settle_app.events()
    assert [e["widget"] for e in events if e["type"] == "press"] == ["late", "anim", "dead", "spin"]

    assert late["settle"]["ended"] == "quiet" and late["result"]["changed"] is True, seen
    assert late["settle"]["first_reaction_ms"] >= LATE_MS * 0.8, seen
    # (Its frames may all have been drawn during a slow click: the final frame is what counts.)
    assert anim["settle"]["ended"] == "quiet" and anim["settle"]["frames"] >= 1, seen
    for number in (0, 1, 2, 3):
        with Image.open(result.run_dir / turns[number]["observation"]["screenshot"]) as img:
            sent = np.asarray(img.convert("RGB"))
        assert np.array_equal(sent, policy.frames[number]), f"turn {number}: not the app's final frame; {seen}"
    sw, sh = screen
    x, y, w, h = widgets["late"]
    assert tuple(policy.frames[1][(y + h // 2) * IMAGE[1] // sh, (x + w - 4) * IMAGE[0] // sw]) == LATE_DONE_RGB
    x, y, w, h = widgets["anim"]
    assert tuple(policy.frames[2][(y + h // 2) * IMAGE[1] // sh, (x + w - 4) * IMAGE[0] // sw]) == ANIM_DONE_RGB

    assert dead["settle"]["ended"] == "no_reaction" and dead["settle"]["stable"] is True, seen
    assert dead["settle"]["waited_ms"] >= 300 and "first_reaction_ms" not in dead["settle"]
    assert dead["result"]["changed"] is False
    assert spin["settle"]["ended"] == "max" and spin["settle"]["stable"] is False, seen
    assert spin["settle"]["waited_ms"] >= 1500
