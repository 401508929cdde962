"""The agent on a real X server: real capture, real XTest input, the Tk demo app, the real
local model server. Every tool is exercised against an app that records what it receives."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from apps.harness import keys_and_buttons_down

from deskpilot.agent import iter_turns, load_config, load_summary, run_agent, validate_run_dir
from deskpilot.agent._scenarios import DEMO_TEXT
from deskpilot.geometry import Box, Mapping, Rect
from deskpilot.testing import ModelServer, PixelPolicy, Reply, ScriptedPolicy, tool_call
from deskpilot.testing._demo import DemoApp, run_demo
from deskpilot.testing._demo_app import TARGET_RGB

pytestmark = pytest.mark.x11

IMAGE = {"screen.image_width": 960, "screen.image_height": 540}


@pytest.fixture
def app(xvfb: str, tmp_path: Path) -> Iterator[DemoApp]:
    with DemoApp(tmp_path / "events.jsonl") as demo:
        yield demo


def config(tmp_path: Path, endpoint: str, **flags: Any) -> Any:
    return load_config(
        flags={"model.endpoint": endpoint, "run.runs_dir": str(tmp_path / "runs"), **IMAGE, **flags},
        env={},
        search_default=False,
    )


def test_demo_clicks_types_unicode_and_presses_enter(xvfb: str, tmp_path: Path) -> None:
    cfg = load_config(flags={"run.runs_dir": str(tmp_path / "runs"), **IMAGE}, env={}, search_default=False)
    result = run_demo(cfg, work_dir=tmp_path)
    assert result.ok, result.checks
    x, y, w, h = result.target
    clicked = next(e for e in result.events if e["type"] == "target_clicked")
    assert x <= clicked["x"] < x + w and y <= clicked["y"] < y + h
    assert [e["text"] for e in result.events if e["type"] == "submitted"] == [DEMO_TEXT]
    run = result.run
    assert run.outcome == "answered" and validate_run_dir(run.run_dir) == []
    turns = list(iter_turns(run.run_dir))
    assert [t.get("tool_call", {}).get("name") for t in turns[1:4]] == ["click_element", "type_text", "press_key"]
    assert turns[1]["result"]["changed"] is True  # the target turned green
    from PIL import Image

    shots = load_summary(run.run_dir)["screenshots"]
    with Image.open(run.run_dir / shots[0]) as first:
        assert first.size == (960, 540)
        # The magenta target before the click, sampled clear of its label and of the centre,
        # where an earlier test (test_demo.py's runs) may have left the pointer: the cursor is
        # drawn into the screenshot, and its black outline is not the target's colour.
        spot = ((x + w // 8) * 960 // 1920, (y + h // 8) * 540 // 1080)
        r, g, b = first.convert("RGB").getpixel(spot)
        assert (r, g, b) == TARGET_RGB


def test_every_tool_reaches_the_app(app: DemoApp, tmp_path: Path) -> None:
    target = app.widgets["target"]
    full = Mapping(Rect(0, 0, 1920, 1080), 960, 540)
    zoom_box = [400, 200, 600, 460]
    script = [
        Reply(tool_calls=[("click_element", {"label": "TARGET", "box": [500, 330]})]),
        Reply(tool_calls=[("type_text", {"text": "äö ✓"})]),
        Reply(tool_calls=[("press_key", {"key": "backspace"})]),
        Reply(tool_calls=[("double_click", {"label": "background", "box": [100, 900]})]),
        Reply(tool_calls=[("right_click", {"label": "background", "box": [120, 900], "hold": "shift"})]),
        Reply(tool_calls=[("drag", {"start": [100, 850], "end": [200, 950]})]),
        *[Reply(tool_calls=[("scroll", {"box": [150, 900], "direction": d, "amount": 1})]) for d in ("up", "down", "left", "right")],
        Reply(tool_calls=[("scroll_at_position", {"box": [150, 900]})]),
        Reply(tool_calls=[("hold_key", {"key": "shift", "seconds": 0.05})]),
        Reply(tool_calls=[("wait", {"seconds": 0.05})]),
        Reply(tool_calls=[("observe_screen", {})]),
        # Every refusal: answered with the seeds' payload, nothing reaches the app.
        Reply(tool_calls=[("click_element", {"box": [1, 1]})]),
        Reply(tool_calls=[("click_element", {"label": "x"})]),
        Reply(tool_calls=[("click_element", {"label": "x", "box": [1, 2, 3]})]),
        Reply(tool_calls=[tool_call("click_element", '{"label": "x", "box": [1,')]),
        Reply(tool_calls=[tool_call("type_text", "[1, 2]")]),
        Reply(tool_calls=[("type_text", {"text": ""})]),
        Reply(tool_calls=[("press_key", {})]),
        Reply(tool_calls=[("press_key", {"key": "ctrl+entr"})]),
        Reply(tool_calls=[("open_browser", {})]),
        Reply(tool_calls=[("press_key", {"key": "shift"}), ("press_key", {"key": "enter"})]),
        Reply(tool_calls=[("zoom", {"box": zoom_box})]),
        Reply(tool_calls=[("click_element", {"label": "TARGET (zoomed)", "box": [500, 500]})]),
        Reply(tool_calls=[("press_key", {"key": "enter"})]),
        "Done.",
    ]
    with ModelServer(ScriptedPolicy(script)) as server:
        result = run_agent(config(tmp_path, server.endpoint, **{"agent.toolset": "extended", "agent.max_steps": 30}), "all tools")
        assert server.problems == []
    assert result.outcome == "answered", result.error
    app.wait_for(lambda r: r["type"] == "submitted", timeout=5)
    events = app.events()
    presses = [e for e in events if e["type"] == "press"]
    assert {1, 3, 4, 5} <= {e["button"] for e in presses}
    wheel = {(e["button"], bool(e["state"] & 1)) for e in presses if e["button"] in (4, 5, 6, 7)}
    # up/down/left/right: Tk 8.6 reports the horizontal wheel (X buttons 6/7) as 4/5 + Shift.
    assert {(4, False), (5, False)} <= wheel and (wheel & {(4, True), (5, True), (6, False), (7, False)})
    assert sum(1 for e in presses if e["button"] == 1 and e["widget"] == "background") >= 3  # double click + drag
    drag_release = [e for e in events if e["type"] == "release" and e["button"] == 1][-2]
    assert (drag_release["x"], drag_release["y"]) == full.norm_to_physical(200, 950)
    assert any(e["type"] == "key" and e["keysym"].startswith("Shift") for e in events)
    assert [e["text"] for e in events if e["type"] == "submitted"] == ["äö "]  # ✓ was backspaced
    # The click after the zoom maps through the zoomed image exactly, onto the target.
    region = full.norm_box_to_physical(Box(*zoom_box))
    expected = full.sub_mapping(Box(*zoom_box), region.width, region.height).norm_to_physical(500, 500)
    target_presses = [(e["x"], e["y"]) for e in presses if e["widget"] == "target"]
    assert target_presses[-1] == expected
    x, y, w, h = target
    assert x <= expected[0] < x + w and y <= expected[1] < y + h
    turns = list(iter_turns(result.run_dir))
    errors = [t["result"]["error"]["type"] for t in turns if t.get("result") and not t["result"]["ok"]]
    assert errors == ["missing_label", "missing_box", "invalid_box", "invalid_json", "invalid_args", "empty_text",
                      "missing_key", "invalid_key", "unknown_tool"]
    extra = [c["result"]["error"]["type"] for t in turns for c in t.get("extra_calls", [])]
    assert extra == ["too_many_tool_calls"]
    assert [e["text"] for e in events if e["type"] == "submitted"] == ["äö "]  # the refused enter was not pressed
    assert validate_run_dir(result.run_dir) == []
    assert keys_and_buttons_down() == ([], 0)


def test_seed001_tools_on_real_input(app: DemoApp, tmp_path: Path) -> None:
    policy = PixelPolicy(TARGET_RGB, text="hello 001", steps=("move", "click_mouse", "type", "done"))
    with ModelServer(policy) as server:
        result = run_agent(config(tmp_path, server.endpoint, **{"agent.toolset": "seed001"}), "seed 001")
        assert server.problems == []
    assert result.outcome == "answered"
    app.wait_for(lambda r: r["type"] == "entry" and r["text"] == "hello 001", timeout=5)
    assert any(e["type"] == "target_clicked" for e in app.events())
    script = [Reply(tool_calls=[("take_screenshot", {})]), Reply(tool_calls=[("move_mouse", {"x": 100, "y": 900})]),
              Reply(tool_calls=[("scroll_down", {})]), "Done."]
    mark = len(app.events())
    with ModelServer(ScriptedPolicy(script)) as server:
        result = run_agent(config(tmp_path, server.endpoint, **{"agent.toolset": "seed001",
                                                                "agent.observe_after_action": False}), "seed 001 b")
        assert [r.image_count for r in server.requests] == [1, 2, 2, 2]  # take_screenshot adds one
    assert result.outcome == "answered"
    wheel = app.wait_for(lambda r: r["type"] == "press" and r["button"] == 5, timeout=5)
    assert (wheel["x"], wheel["y"]) == Mapping(Rect(0, 0, 1920, 1080), 960, 540).norm_to_physical(100, 900)
    assert len(app.events()) > mark


def test_sigint_mid_hold_releases_everything(app: DemoApp, tmp_path: Path) -> None:
    script = [Reply(tool_calls=[("hold_key", {"key": "shift", "seconds": 5})]), "Done."]
    with ModelServer(ScriptedPolicy(script)) as server:
        cmd = [sys.executable, "-m", "deskpilot", "run", "--endpoint", server.endpoint, "--toolset", "extended",
               "--runs-dir", str(tmp_path / "runs"), "--image-size", "960x540", "--quiet", "--json", "hold shift"]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path)
        try:
            app.wait_for(lambda r: r["type"] == "key" and r["keysym"].startswith("Shift"), timeout=60)
            assert keys_and_buttons_down()[0], "shift should be held now"
            sent = time.monotonic()
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=20)
            elapsed = time.monotonic() - sent
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 130, err.decode()
    assert elapsed < 5.0  # generous bound on a shared CI machine; the run stops within a second
    summary = orjson.loads(out)
    assert summary["outcome"] == "interrupted"
    assert validate_run_dir(summary["run_dir"]) == []
    assert keys_and_buttons_down() == ([], 0)
    app.wait_for(lambda r: r["type"] == "key_release" and r["keysym"].startswith("Shift"), timeout=5)


def test_qwen_computer_use_on_real_input(app: DemoApp, tmp_path: Path) -> None:
    """Qwen3-VL's 0..999 grid, through real capture and XTest, onto the Tk app."""
    from deskpilot.agent.tools._qwen import grid_to_physical

    full = Mapping(Rect(0, 0, 1920, 1080), 960, 540)

    def use(**args: Any) -> Reply:
        return Reply(tool_calls=[("computer_use", args)])

    script = [
        use(action="left_click", coordinate=[500, 330]),
        use(action="type", text="qw ✓"),
        use(action="key", keys=["enter"]),
        use(action="scroll", coordinate=[150, 900], pixels=-1),
        use(action="right_click", coordinate=[100, 900]),
        use(action="terminate", status="success"),
    ]
    with ModelServer(ScriptedPolicy(script)) as server:
        result = run_agent(config(tmp_path, server.endpoint, **{"agent.toolset": "qwen"}), "qwen tools")
        assert server.problems == []
    assert result.outcome == "answered", result.error
    app.wait_for(lambda r: r["type"] == "submitted", timeout=5)
    events = app.events()
    presses = [e for e in events if e["type"] == "press"]
    target = [(e["x"], e["y"]) for e in presses if e["widget"] == "target"]
    assert target == [grid_to_physical(full, 500, 330)]
    assert [e["text"] for e in events if e["type"] == "submitted"] == ["qw ✓"]
    wheel = [e for e in presses if e["button"] == 5]
    assert wheel and (wheel[0]["x"], wheel[0]["y"]) == grid_to_physical(full, 150, 900)
    assert any(e["button"] == 3 for e in presses)
    assert keys_and_buttons_down() == ([], 0)


def test_uitars_actions_on_real_input(app: DemoApp, tmp_path: Path) -> None:
    """UI-TARS-1.5 absolute pixels on the smart-resized image (960x540 -> 952x532)."""
    from deskpilot.agent.tools._uitars import to_physical

    full = Mapping(Rect(0, 0, 1920, 1080), 960, 540)
    script = [
        "Thought: The magenta target.\nAction: click(start_box='(476,176)')",
        "Thought: Type and submit.\nAction: type(content='tars ✓\\n')",
        "Thought: Done.\nAction: finished(content='typed')",
    ]
    with ModelServer(ScriptedPolicy(script)) as server:
        result = run_agent(config(tmp_path, server.endpoint, **{"agent.toolset": "uitars"}), "uitars")
        assert server.problems == [] and all("tools" not in r.body for r in server.requests)
    assert result.outcome == "answered" and result.answer == "typed", result.error
    app.wait_for(lambda r: r["type"] == "submitted", timeout=5)
    events = app.events()
    target = [(e["x"], e["y"]) for e in events if e["type"] == "press" and e["widget"] == "target"]
    assert target == [to_physical(full, [476, 176], "1.5")]
    assert [e["text"] for e in events if e["type"] == "submitted"] == ["tars ✓"]
    assert keys_and_buttons_down() == ([], 0)
