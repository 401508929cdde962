"""The kill switch stops every mode and tool set within one turn, on a real X server.

``deskpilot run`` in a child process (real capture, real XTest input, the real X
kill-switch watcher) against the scripted model server, whose model keeps the agent
busy: every reply clicks the middle of the screen, so the agent moves the pointer away
from wherever the user put it at every turn. The user then pushes the pointer into a
corner (xdotool, through XTest like a real device's motion) or presses the kill hotkey;
the run must end ``interrupted`` by that source with at most one more model request,
and nothing may stay pressed.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from deskpilot._x11 import XDisplay as Connection
from deskpilot.agent.modes.team._variants import VARIANTS
from deskpilot.testing import ModelServer, Reply
from deskpilot.testing._server import RecordedRequest

pytestmark = pytest.mark.x11

CENTRE = [500, 500]


def xdotool(*args: str) -> None:
    subprocess.run(["xdotool", *args], check=True, timeout=10)


def wait_until(predicate: object, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return True
        time.sleep(0.005)
    return False


def held_inputs() -> tuple[list[int], int]:
    with Connection() as conn:
        keymap = conn.keymap()
        buttons = conn.pointer_buttons() & 0x1F00
    return [i * 8 + b for i, byte in enumerate(keymap) for b in range(8) if byte & (1 << b)], buttons


class BusyModel:
    """A model that clicks the middle of the screen forever, in the language of
    ``mode`` / ``toolset`` (team: the planner plans once, the executor clicks)."""

    def __init__(self, mode: str, toolset: str | None, variant: str | None) -> None:
        self.mode, self.toolset, self.variant = mode, toolset, variant

    def respond(self, request: RecordedRequest) -> Reply | str:
        if self.mode == "stateless":
            return json.dumps({"observation": "busy", "actions": [{"name": "click", "x1": 500, "y1": 500}]})
        if self.mode == "team":
            v = VARIANTS[self.variant or "002"]
            if v.tool_name("plan") in request.tool_names:
                args = ({"operator_instructions": "Click the middle forever.", "rationale": "r"}
                        if v.name == "002" else {"instructions": "Click the middle forever.", "reasoning": "r"})
                return Reply(content="PLAN", tool_calls=[(v.tool_name("plan"), args)])
            why = "justification" if v.name == "002" else "reasoning"
            label = "label" if v.name == "002" else "element_name"
            return Reply(content="OBS", tool_calls=[(v.tool_name("click"), {why: "busy", label: "middle", "position": CENTRE})])
        if self.toolset == "qwen":
            return Reply(tool_calls=[("computer_use", {"action": "left_click", "coordinate": CENTRE})])
        if self.toolset in ("uitars", "uitars-1.0"):
            return "Thought: busy\nAction: click(start_box='(500,500)')"
        if self.toolset == "pointer":
            return Reply(tool_calls=[("click_mouse", {"x": 500, "y": 500})])
        return Reply(tool_calls=[("click_element", {"label": "middle", "box": CENTRE})])


MODES = [
    pytest.param("single", "element", None, id="single-element"),
    pytest.param("single", "pointer", None, id="single-pointer"),
    pytest.param("single", "extended", None, id="single-extended"),
    pytest.param("single", "qwen", None, id="single-qwen"),
    pytest.param("single", "uitars", None, id="single-uitars"),
    pytest.param("single", "uitars-1.0", None, id="single-uitars-1.0"),
    pytest.param("team", None, "002", id="team-002"),
    pytest.param("team", None, "003", id="team-003"),
    pytest.param("stateless", None, None, id="stateless"),
]


@pytest.fixture
def centred(xvfb: str) -> Iterator[str]:
    xdotool("mousemove", "960", "540")
    yield xvfb
    xdotool("mousemove", "960", "540")


def run_until_stopped(tmp_path: Path, mode: str, toolset: str | None, variant: str | None, gesture: list[str]) -> tuple[dict[str, Any], int, int]:
    """Start a busy run, wait for it to be busy, do ``gesture`` (xdotool arguments);
    returns (summary, exit code, model requests after the gesture). The run must say on
    stderr that the kill switch stopped it."""
    args = ["--mode", mode]
    if toolset is not None:
        args += ["--toolset", toolset]
    if variant is not None:
        args += ["--variant", variant]
    if mode == "stateless":
        args += ["--set", "stateless.panel=off"]
    with ModelServer(BusyModel(mode, toolset, variant)) as server:
        proc = subprocess.Popen(
            [sys.executable, "-m", "deskpilot", "run", "--endpoint", server.endpoint, *args,
             "--runs-dir", str(tmp_path / "runs"), "--image-size", "960x540", "--max-steps", "500",
             "--max-seconds", "60", "--json", "click the middle until stopped"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
        )
        try:
            assert wait_until(lambda: len(server.requests) >= 4 or proc.poll() is not None, 60), "no requests"
            assert proc.poll() is None, proc.communicate()
            xdotool(*gesture)  # returns once the X server has processed it
            at_gesture = len(server.requests)
            out, err = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        after = len(server.requests) - at_gesture
        problems = server.problems
    assert problems == []
    assert out.strip(), err
    assert "deskpilot: run ended interrupted (exit 130): stopped by kill switch" in err, err
    return orjson.loads(out), proc.returncode, after


@pytest.mark.parametrize(("mode", "toolset", "variant"), MODES)
def test_the_corner_stops_every_mode_within_one_turn(centred: str, tmp_path: Path, mode: str, toolset: str | None, variant: str | None) -> None:
    summary, code, after = run_until_stopped(tmp_path, mode, toolset, variant, ["mousemove", "1919", "0"])
    assert code == 130, summary
    assert summary["outcome"] == "interrupted" and "fail-safe" in (summary["error"] or ""), summary
    tripped = summary["safety"]["tripped"]
    assert tripped["source"] == "corner" and (tripped["x"], tripped["y"]) == (1919, 0)
    assert after <= 1, f"{after} model requests after the pointer reached the corner"
    assert held_inputs() == ([], 0)


@pytest.mark.parametrize(("mode", "toolset", "variant"), MODES)
def test_the_hotkey_stops_every_mode_within_one_turn(centred: str, tmp_path: Path, mode: str, toolset: str | None, variant: str | None) -> None:
    summary, code, after = run_until_stopped(tmp_path, mode, toolset, variant, ["key", "ctrl+alt+q"])
    assert code == 130, summary
    assert summary["outcome"] == "interrupted", summary
    assert summary["safety"]["tripped"]["source"] == "hotkey"
    assert after <= 1, f"{after} model requests after the hotkey"
    assert held_inputs() == ([], 0)
